/* test_main.c — runs every registered C test (optionally only those whose name
 * contains argv[1]) and prints "N passed, N failed". */
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

int main(int argc, char **argv)
{
    qsort(tests, (size_t)n_tests, sizeof tests[0], by_name);
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; i++) {
        if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
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
