/* simd.c — chooses the CPU kernels' instruction level once, at load (simd.h).
 *
 * A level needs the CPU's instructions (CPUID) and the OS's saving of their
 * registers on a context switch (OSXSAVE, then XCR0 through XGETBV): AVX2 needs
 * the SSE and AVX state, AVX-512 also the opmask and both halves of the upper
 * ZMM state. OLYMPUS_CPU_LEVEL lowers the level (tests run every level the
 * machine has this way); asking for more than the machine has, or for an
 * unknown level, prints one line on stderr and keeps the best supported. */
#include "cpu/simd.h"

#if OLY__CPU_X86
#include <cpuid.h>
#endif

atomic_int oly__cpu_level_state;

static const char *const level_names[OLY_CPU_LEVEL_COUNT] = {
    [OLY_CPU_LEVEL_PORTABLE] = "portable",
    [OLY_CPU_LEVEL_AVX2] = "avx2",
    [OLY_CPU_LEVEL_AVX512] = "avx512",
};

const char *oly_cpu_level_name(oly_cpu_level level)
{
    return (unsigned)level < OLY_CPU_LEVEL_COUNT ? level_names[level] : "?";
}

#if OLY__CPU_X86
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}
#endif

oly_cpu_level oly_cpu_level_max(void)
{
#if OLY__CPU_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return OLY_CPU_LEVEL_PORTABLE;
    bool osxsave = c >> 27 & 1, avx = c >> 28 & 1, fma = c >> 12 & 1;
    if (!osxsave || !avx || !fma) return OLY_CPU_LEVEL_PORTABLE;
    uint64_t x = xcr0();
    if ((x & 0x6) != 0x6) return OLY_CPU_LEVEL_PORTABLE; /* SSE + AVX state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b >> 5 & 1)) /* AVX2 */
        return OLY_CPU_LEVEL_PORTABLE;
    bool f = b >> 16 & 1, dq = b >> 17 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1;
    if (f && dq && bw && vl && (x & 0xe0) == 0xe0) /* opmask, ZMM_Hi256, Hi16_ZMM */
        return OLY_CPU_LEVEL_AVX512;
    return OLY_CPU_LEVEL_AVX2;
#else
    return OLY_CPU_LEVEL_PORTABLE;
#endif
}

oly_cpu_level oly__cpu_level_probe(void)
{
    oly_cpu_level max = oly_cpu_level_max(), level = max;
    const char *no = getenv("OLYMPUS_NO_SIMD");
    const char *e = getenv("OLYMPUS_CPU_LEVEL");
    if (no && *no && strcmp(no, "0") != 0) level = OLY_CPU_LEVEL_PORTABLE;
    if (e && *e) {
        int want = -1;
        for (int i = 0; i < OLY_CPU_LEVEL_COUNT; i++)
            if (strcmp(e, level_names[i]) == 0) want = i;
        if (want < 0)
            fprintf(stderr, "olympus: OLYMPUS_CPU_LEVEL=%s is not a level (portable, avx2, "
                            "avx512); using %s\n", e, level_names[level]);
        else if (want > (int)max)
            fprintf(stderr, "olympus: OLYMPUS_CPU_LEVEL=%s, but this CPU supports at most %s; "
                            "using %s\n", e, level_names[max], level_names[max]);
        else
            level = (oly_cpu_level)want;
    }
    /* Racing probes store the same value; the message may print twice. */
    atomic_store_explicit(&oly__cpu_level_state, (int)level + 1, memory_order_relaxed);
    return level;
}

/* Probe at load, so the choice (and any message) comes before the first kernel. */
__attribute__((constructor)) static void probe_at_load(void) { (void)oly__cpu_level(); }

oly_cpu_level oly_cpu_level_get(void) { return oly__cpu_level(); }

oly_status oly__cpu_set_level(oly_cpu_level level)
{
    if ((unsigned)level >= OLY_CPU_LEVEL_COUNT || level > oly_cpu_level_max())
        return oly__error(OLY_ERR_INVALID, "cpu level %d: this CPU supports at most %s",
                          (int)level, level_names[oly_cpu_level_max()]);
    atomic_store_explicit(&oly__cpu_level_state, (int)level + 1, memory_order_relaxed);
    return OLY_OK;
}
