/* cpu.h — declarations private to the CPU backend (src/cpu/): one kernel
 * entry per row of prims.def, `const oly_cpu_kernel oly__cpu_<name>`, defined
 * in the family file prims.def names, and collected by table.c. */
#ifndef OLYMPUS_CPU_H
#define OLYMPUS_CPU_H

#include "internal.h"

#define OLY_PRIM(name) extern const oly_cpu_kernel oly__cpu_##name;
#include "prims/prims.def"
#undef OLY_PRIM

/* Copies n elements of es bytes from src (byte stride ss) to dst (stride
 * ds); one memcpy when both are dense (src/cpu/structural.c). */
void oly__copy_run(char *dst, int64_t ds, const char *src, int64_t ss, int64_t n, size_t es);

/* The integer of dtype t at p (uint64 above INT64_MAX reads INT64_MAX; 0 for a
 * non-integer dtype). */
static inline int64_t oly__read_index(oly_dtype t, const void *p)
{
    switch (t) {
    case OLY_INT8: { int8_t v; memcpy(&v, p, 1); return v; }
    case OLY_INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case OLY_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case OLY_INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case OLY_UINT8: { uint8_t v; memcpy(&v, p, 1); return v; }
    case OLY_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case OLY_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case OLY_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default: return 0;
    }
}

#endif /* OLYMPUS_CPU_H */
