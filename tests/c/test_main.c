/* test_main.c — runs every registered C test (optionally only those whose name
 * contains one of the arguments) and prints "N passed, N failed".
 * `test_c --cpu-levels` prints the CPU kernel levels this machine supports
 * (the Makefile re-runs tests under each with OLYMPUS_CPU_LEVEL). */
#include "test.h"

typedef struct {
    const char *name;
    oly_test_fn fn;
} test_entry;

static test_entry tests[1024];
static int n_tests;
int oly_test_failed;

void oly_test_register(const char *name, oly_test_fn fn)
{
    if (n_tests < OLY_ARRAY_LEN(tests)) tests[n_tests++] = (test_entry){name, fn};
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const test_entry *)a)->name, ((const test_entry *)b)->name);
}

static bool selected(const char *name, int argc, char **argv)
{
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i])) return true;
    return false;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--cpu-levels") == 0) {
        for (int l = 0; l <= (int)oly_cpu_level_max(); l++)
            printf("%s%s", l ? " " : "", oly_cpu_level_name((oly_cpu_level)l));
        printf("\n");
        return 0;
    }
    qsort(tests, (size_t)n_tests, sizeof tests[0], by_name);
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; i++) {
        if (!selected(tests[i].name, argc, argv)) continue;
        oly_test_failed = 0;
        tests[i].fn();
        if (oly_test_failed) {
            failed++;
            printf("FAIL %s\n", tests[i].name);
        } else {
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
