/* cpu.h — declarations private to the CPU backend (src/cpu/): one kernel
 * entry per row of prims.def, `const oly_cpu_kernel oly__cpu_<name>`, defined
 * in the family file prims.def names, and collected by table.c. */
#ifndef OLYMPUS_CPU_H
#define OLYMPUS_CPU_H

#include "internal.h"

#define OLY_PRIM(name) extern const oly_cpu_kernel oly__cpu_##name;
#include "prims/prims.def"
#undef OLY_PRIM

#endif /* OLYMPUS_CPU_H */
