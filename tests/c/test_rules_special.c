/* test_rules_special.c — batch and JVP rules of the special-function rows
 * (src/prims/special.c), walked by rulecheck: vmap against a loop over batch
 * elements, jvp against central finite differences (float64 inputs drawn from
 * each function's domain), and linearize + transpose of the JVP by the
 * dot-product test. Operands without a derivative (polygamma's order,
 * zeta's exponent, igamma_grad_a's a) are held fixed; random_gamma_grad has
 * no JVP rule (as in JAX) and is checked under vmap only. The values
 * themselves are checked against SciPy in tests/python/test_special.py. */
#include "test.h"
#include "testutil.h"

#include "rulecheck.h"

static int check_table(const rc_case *cases, int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !rc_check_all(&cases[i]);
    if (bad) fprintf(stderr, "    %d of %d cases failed\n", bad, n);
    return bad;
}

#define DOM(a, b) .lo = {(a)}, .hi = {(b)}
#define DOM2(a, b, c, d) .lo = {(a), (c)}, .hi = {(b), (d)}
#define U64(...) {.n_in = 1, .in = {RC_F64(3, 4)}, .prim = __VA_ARGS__}
#define B64(...) {.n_in = 2, .in = {RC_F64(3, 4), RC_F64(3, 4)}, .prim = __VA_ARGS__}

TEST(rules_special_unary_f64)
{
    const rc_case cases[] = {
        U64("erf"),
        U64("erfc"),
        U64("erf_inv", DOM(-0.9, 0.9)),
        U64("lgamma", DOM(0.3, 4)),
        U64("lgamma", DOM(-0.9, -0.1)),
        U64("digamma", DOM(0.3, 4)),
        U64("digamma", DOM(-2.9, -2.1)),
        U64("bessel_i0e", DOM(-3, 3)),
        U64("bessel_i1e", DOM(-3, 3)),
        U64("bessel_i0e", DOM(20, 40)), /* the asymptotic branch */
        U64("bessel_i1e", DOM(-40, -20)),
    };
    CHECK_EQ(check_table(cases, OLY_ARRAY_LEN(cases)), 0);
}

TEST(rules_special_binary_f64)
{
    const rc_case cases[] = {
        B64("igamma", DOM2(0.5, 4, 0.2, 3)),  /* the series */
        B64("igamma", DOM2(0.5, 2, 4, 8)),    /* the continued fraction */
        B64("igammac", DOM2(0.5, 4, 0.2, 6)),
        B64("igamma_grad_a", DOM2(0.5, 4, 0.2, 6), .nodiff = {true, false}),
        B64("polygamma", DOM2(0, 3, 0.5, 4), .integer = {true, false}, .nodiff = {true, false}),
        B64("zeta", DOM2(2, 5, 0.5, 3), .nodiff = {true, false}),
        B64("random_gamma_grad", DOM2(0.5, 4, 0.2, 6),
            .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE),
        /* a rank-0 operand broadcasts */
        {.prim = "igamma", .n_in = 2, .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(5)},
         DOM2(0.5, 3, 0.2, 4)},
        {.prim = "polygamma", .n_in = 2, .in = {RC_SCALAR(OLY_FLOAT64), RC_F64(5)},
         DOM2(1, 2, 0.5, 4), .integer = {true, false}, .nodiff = {true, false}},
    };
    CHECK_EQ(check_table(cases, OLY_ARRAY_LEN(cases)), 0);
}

/* float32 / float16: vmap exact, jvp with rulecheck's float32 tolerance. */
TEST(rules_special_low_precision)
{
    const rc_case cases[] = {
        {.prim = "erf", .n_in = 1, .in = {RC_F32(7)}},
        {.prim = "digamma", .n_in = 1, .in = {RC_F32(7)}, DOM(0.5, 3)},
        {.prim = "igamma", .n_in = 2, .in = {RC_F32(7), RC_F32(7)}, DOM2(0.5, 3, 0.5, 3)},
        {.prim = "erf_inv", .n_in = 1, .in = {RC_AVAL(OLY_FLOAT16, 3, 4)}, DOM(-0.9, 0.9),
         .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE},
        {.prim = "zeta", .n_in = 2, .in = {RC_AVAL(OLY_BFLOAT16, 5), RC_SCALAR(OLY_BFLOAT16)},
         DOM2(2, 4, 1, 3), .skip = RC_SKIP_JVP | RC_SKIP_TRANSPOSE},
    };
    CHECK_EQ(check_table(cases, OLY_ARRAY_LEN(cases)), 0);
}

/* Every special row: no transpose (none is linear), a batch rule, and a jvp
 * rule except random_gamma_grad, whose empty slot is marked. */
TEST(rules_special_slots)
{
    static const char *const names[] = {"erf", "erfc", "erf_inv", "lgamma", "digamma",
                                        "bessel_i0e", "bessel_i1e", "igamma", "igammac",
                                        "igamma_grad_a", "polygamma", "zeta",
                                        "random_gamma_grad"};
    for (int i = 0; i < OLY_ARRAY_LEN(names); i++) {
        const oly_prim *p = oly_prim_lookup(names[i]);
        if (!p) {
            CHECK_FAIL_("no row named %s", names[i]);
            continue;
        }
        CHECK(p->batch != NULL);
        CHECK(p->transpose == NULL && (p->no_rule & OLY_RULE_TRANSPOSE));
        bool jvp_marked = (p->no_rule & OLY_RULE_JVP) != 0;
        CHECK(strcmp(names[i], "random_gamma_grad") == 0 ? jvp_marked && !p->jvp
                                                         : !jvp_marked && p->jvp);
    }
}
