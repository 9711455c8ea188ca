/* simd.h — the CPU backend's one switch for its vector paths: whether the
 * AVX2+FMA loops may run (the CPU has them and OLYMPUS_NO_SIMD is unset or
 * "0"). Probed once per process; runtime dispatch by CPU features grows here. */
#ifndef OLYMPUS_CPU_SIMD_H
#define OLYMPUS_CPU_SIMD_H

#include "internal.h"

/* 0: not probed yet, 1: on, 2: off. */
extern atomic_int oly__cpu_simd_state;
/* Reads the CPU and the environment, records and returns the state (1 or 2). */
int oly__cpu_simd_probe(void);

/* True when the AVX2+FMA loops may run. Thread-safe; one relaxed load once
 * probed, so loops may ask once per call. */
static inline bool oly__cpu_simd_ok(void)
{
    int s = atomic_load_explicit(&oly__cpu_simd_state, memory_order_relaxed);
    if (s == 0) s = oly__cpu_simd_probe();
    return s == 1;
}

#endif /* OLYMPUS_CPU_SIMD_H */
