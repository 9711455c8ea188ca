/* simd.h — the CPU backend's runtime dispatch: which instruction level its
 * vector loops run at (portable C, AVX2+FMA, AVX-512), chosen once at load
 * (simd.c; oly_cpu_level in olympus.h). A kernel asks oly__cpu_level() once per
 * call and runs the loop compiled for that level; every level's loop is built
 * into every x86-64 gcc build with per-function target attributes, so the
 * library runs on any x86-64 CPU. */
#ifndef OLYMPUS_CPU_SIMD_H
#define OLYMPUS_CPU_SIMD_H

#include "internal.h"

/* Whether this build has the x86-64 vector loops at all (gcc on x86-64). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define OLY__CPU_X86 1
#include <immintrin.h>
/* Function attributes for the two vector levels. AVX-512 loops prefer 512-bit
 * vectors (gcc's tuning otherwise keeps auto-vectorised loops at 256). */
#define OLY__TARGET_AVX2 __attribute__((target("avx2,fma")))
#define OLY__TARGET_AVX512                                                                \
    __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,"                  \
                          "prefer-vector-width=512")))
#else
#define OLY__CPU_X86 0
#endif

/* 0: not probed yet, else the level + 1. */
extern atomic_int oly__cpu_level_state;
/* Reads the CPU and the environment, records and returns the level. Racing
 * first calls compute the same value. */
oly_cpu_level oly__cpu_level_probe(void);

/* The level the loops run at. Thread-safe; one relaxed load once probed
 * (simd.c probes from a constructor), so loops may ask once per call. */
static inline oly_cpu_level oly__cpu_level(void)
{
    int s = atomic_load_explicit(&oly__cpu_level_state, memory_order_relaxed);
    return s ? (oly_cpu_level)(s - 1) : oly__cpu_level_probe();
}

/* True when the AVX2+FMA (or wider) loops may run. */
static inline bool oly__cpu_simd_ok(void) { return oly__cpu_level() >= OLY_CPU_LEVEL_AVX2; }

/* Tests: runs the kernels at level from now on (INVALID above
 * oly_cpu_level_max()). Not for concurrent use with running kernels. */
oly_status oly__cpu_set_level(oly_cpu_level level);

#endif /* OLYMPUS_CPU_SIMD_H */
