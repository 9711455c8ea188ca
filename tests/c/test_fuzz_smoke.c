/* test_fuzz_smoke.c — a quick deterministic run of the fuzz target
 * (tests/fuzz/fuzz_program.c) inside the C test runner: fixed-seed
 * pseudo-random byte strings, no libFuzzer, any defect the target detects
 * fails the test. The sanitizer builds (make asan) run it too.
 *
 * test.h is not included so that this file, like the fuzz target, sees only
 * the public header; the runner's registration hook is declared here. */
#include "../fuzz/fuzz_program.c"

void oly_test_register(const char *name, void (*fn)(void));
extern int oly_test_failed;

enum { SMOKE_RUNS = 5000, SMOKE_MAX_LEN = 256 };

/* Primitives with a known library defect the smoke run steps around, each
 * with a comment naming the defect and its reproducer under tests/fuzz/crashes/
 * (none today). */
static const char *const smoke_skip[] = {NULL};

static int smoke_defects;

static void smoke_defect(const char *what, const char *where, const char *detail)
{
    if (smoke_defects++ < 5) fprintf(stderr, "    fuzz smoke: %s in %s: %s\n", what, where, detail);
    oly_test_failed = 1;
}

static uint64_t smoke_next(uint64_t *s)
{
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static void test_fuzz_smoke(void)
{
    uint8_t buf[SMOKE_MAX_LEN];
    uint64_t seed = 0x6f6c796d707573ULL; /* fixed: the run is the same every time */
    fz_on_defect = smoke_defect;
    fz_skip_prims = smoke_skip;
    smoke_defects = 0;
    for (int r = 0; r < SMOKE_RUNS; r++) {
        size_t n = (size_t)(smoke_next(&seed) % (SMOKE_MAX_LEN + 1));
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)(smoke_next(&seed) >> 56);
        LLVMFuzzerTestOneInput(buf, n);
    }
    if (smoke_defects) fprintf(stderr, "    fuzz smoke: %d defects in %d runs\n", smoke_defects,
                               SMOKE_RUNS);
    fz_on_defect = NULL;
    fz_skip_prims = NULL;
}

__attribute__((constructor)) static void register_fuzz_smoke(void)
{
    oly_test_register("fuzz_smoke", test_fuzz_smoke);
}
