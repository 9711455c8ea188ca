/* rulecheck.h — the table-driven checker of transform rules. A case names one
 * primitive, its params and its input avals; the checks build the one-equation
 * program, transform it, run oly_program_verify on every result, execute with
 * deterministic pseudo-random inputs and compare against a reference:
 *
 *   rc_check_vmap       vmap (batch size 3; every input batched at axis 0, at
 *                       its last axis (outputs batched at their last axis),
 *                       and each input batched alone with the others
 *                       unbatched) == running the program per element and stacking.
 *   rc_check_jvp        jvp == central finite differences along a random
 *                       direction: all differentiated inputs at once, then
 *                       each alone (exercises symbolic-zero tangents). Write
 *                       these cases in float64 (tolerance ~1e-6 relative);
 *                       float32 cases get a loose tolerance.
 *   rc_check_transpose  linearize then transpose: <ct, L v> == <L^T ct, v>
 *                       (complex: the real part of the bilinear pairing),
 *                       L(0) == 0, and L v equals the jvp's tangent. When the case marks
 *                       inputs `linear`, the primitive's own transpose rule is
 *                       also checked directly with the other inputs as residuals.
 *   rc_check_all        what applies: vmap, and jvp + transpose when some
 *                       input is differentiable (minus what `skip` says).
 *
 * On failure each prints the case ("rulecheck sin(f64[3,4]) vmap in_axes=(0) ...")
 * and the first discrepancy, sets oly_test_failed and returns false.
 *
 * Use inside a TEST:
 *   rc_case c = {.prim = "log", .n_in = 1, .in = {RC_F64(3, 4)}, .lo = {0.5}, .hi = {3}};
 *   rc_check_all(&c);
 */
#ifndef OLYMPUS_RULECHECK_H
#define OLYMPUS_RULECHECK_H

#include "internal.h"

#define RC_MAX_IN 8

enum { RC_SKIP_VMAP = 1, RC_SKIP_JVP = 2, RC_SKIP_TRANSPOSE = 4 };

typedef struct rc_case {
    const char *prim;             /* registry name */
    const oly_prim *row;          /* borrowed; when set, used instead of looking up prim */
    const void *params;           /* borrowed; NULL when the primitive has none */
    int n_in;
    oly_aval in[RC_MAX_IN];
    /* Value range of input i: uniform in [lo, hi]; lo == hi (both 0 by default)
     * means [-2, 2] for signed and float types, [0, 5] for unsigned, {0, 1} for bool. */
    double lo[RC_MAX_IN], hi[RC_MAX_IN];
    bool integer[RC_MAX_IN];      /* whole numbers (exponents, indices) in a float input */
    bool nodiff[RC_MAX_IN];       /* not differentiated (jvp / transpose) */
    bool linear[RC_MAX_IN];       /* the primitive is linear in these: checked directly */
    oly_program *const *subs;     /* borrowed: nested programs (pjit, control flow) */
    int n_sub;
    double rtol;                  /* 0: each check's default */
    unsigned skip;                /* RC_SKIP_*: what rc_check_all leaves out */
} rc_case;

/* Avals for case tables (automatic variables): RC_F64(3, 4) is f64[3,4];
 * RC_AVAL(OLY_INT32, 5) is i32[5]; RC_SCALAR(OLY_FLOAT64) is f64[]. */
oly_aval rc_aval(oly_dtype t, const int64_t *dims, int rank);
#define RC_AVAL(t, ...)                                                                   \
    rc_aval((t), (const int64_t[]){__VA_ARGS__},                                          \
            (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define RC_SCALAR(t) rc_aval((t), NULL, 0)
#define RC_F64(...) RC_AVAL(OLY_FLOAT64, __VA_ARGS__)
#define RC_F32(...) RC_AVAL(OLY_FLOAT32, __VA_ARGS__)

bool rc_check_vmap(const rc_case *c);
bool rc_check_jvp(const rc_case *c);
bool rc_check_transpose(const rc_case *c);
bool rc_check_all(const rc_case *c);

/* The dot-product test on any linear program lin ((n_res residuals...,
 * linear inputs...) -> outputs): residuals drawn in [-2, 2]; what names it. */
bool rc_check_linear_program(const char *what, oly_program *lin, int n_res);

/* Helpers the checks use, for tests that build their own programs: */
/* A deterministic pseudo-random array (see rc_case's ranges); seed picks the stream. */
oly_array *rc_random(const oly_aval *a, double lo, double hi, bool integer, uint64_t seed);
/* Elementwise comparison: floats within atol + rtol * |want| (NaN == NaN),
 * others exact. Prints the first mismatch after `what` and returns false. */
bool rc_allclose(const char *what, const oly_array *got, const oly_array *want, double rtol,
                 double atol);

#endif
