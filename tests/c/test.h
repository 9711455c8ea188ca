/* test.h — the C test harness: TEST(name) registers a test (no central list to
 * edit); CHECK* macros print both sides and mark the test failed. */
#ifndef OLYMPUS_TEST_H
#define OLYMPUS_TEST_H

#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef void (*oly_test_fn)(void);
void oly_test_register(const char *name, oly_test_fn fn);
extern int oly_test_failed; /* set by CHECK*; reset per test */

#define TEST(name)                                                                        \
    static void test_##name(void);                                                        \
    __attribute__((constructor)) static void register_##name(void)                        \
    {                                                                                     \
        oly_test_register(#name, test_##name);                                            \
    }                                                                                     \
    static void test_##name(void)

#define CHECK_FAIL_(fmt, ...)                                                             \
    do {                                                                                  \
        fprintf(stderr, "    %s:%d: " fmt "\n", __FILE__, __LINE__, __VA_ARGS__);         \
        oly_test_failed = 1;                                                              \
    } while (0)

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) CHECK_FAIL_("CHECK(%s) failed", #c);                                    \
    } while (0)

#define CHECK_EQ(a, b)                                                                    \
    do {                                                                                  \
        long long a_ = (long long)(a), b_ = (long long)(b);                               \
        if (a_ != b_) CHECK_FAIL_("CHECK_EQ(%s, %s): %lld != %lld", #a, #b, a_, b_);      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                             \
    do {                                                                                  \
        double a_ = (double)(a), b_ = (double)(b);                                        \
        if (!(fabs(a_ - b_) <= (tol) || (isnan(a_) && isnan(b_))))                        \
            CHECK_FAIL_("CHECK_NEAR(%s, %s): %.17g vs %.17g", #a, #b, a_, b_);            \
    } while (0)

#define CHECK_STREQ(a, b)                                                                 \
    do {                                                                                  \
        const char *a_ = (a), *b_ = (b);                                                  \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                            \
            CHECK_FAIL_("CHECK_STREQ(%s, %s):\n      got:  %s\n      want: %s", #a, #b,   \
                        a_ ? a_ : "(null)", b_ ? b_ : "(null)");                          \
    } while (0)

/* A status check: prints oly_last_error() when s != OLY_OK. */
#define CHECK_OK(s)                                                                       \
    do {                                                                                  \
        oly_status s_ = (s);                                                              \
        if (s_ != OLY_OK)                                                                 \
            CHECK_FAIL_("%s -> %s: %s", #s, oly_status_name(s_), oly_last_error());       \
    } while (0)

/* Expects status want and an error message containing substr. */
#define CHECK_ERR(s, want, substr)                                                        \
    do {                                                                                  \
        oly_status s_ = (s);                                                              \
        if (s_ != (want))                                                                 \
            CHECK_FAIL_("%s -> %s, want %s (%s)", #s, oly_status_name(s_),                \
                        oly_status_name(want), oly_last_error());                         \
        else if (!strstr(oly_last_error(), (substr)))                                     \
            CHECK_FAIL_("%s: message '%s' lacks '%s'", #s, oly_last_error(), (substr));   \
    } while (0)

#endif
