/* testutil.h — helpers shared by every C test: build small arrays from doubles,
 * read elements back, run one primitive's shape rule + kernel directly (no
 * executor, no registry), and compare with tolerances. */
#ifndef OLYMPUS_TESTUTIL_H
#define OLYMPUS_TESTUTIL_H

#include "internal.h"

/* An aval (aborts the test binary on a bad shape: test code only). */
oly_aval tu_aval(oly_dtype t, int rank, const int64_t *dims);
/* A new array of dtype t with the given dims; values (row-major, converted to t;
 * complex gets the real part) may be NULL for zeros. NULL on failure (the
 * message is printed). The caller releases it. */
oly_array *tu_array(oly_dtype t, int rank, const int64_t *dims, const double *values);
/* A rank-0 array holding v. */
oly_array *tu_scalar(oly_dtype t, double v);
/* Element flat (row-major index) as a double (real part of complex). */
double tu_get(const oly_array *a, int64_t flat);
/* Runs p's shape rule on the inputs' avals, allocates zeroed outputs and calls
 * p's CPU kernel (oly__cpu_kernel) once (ith 0, nth 1, run NULL, in_array = in). On success out[0..n-1]
 * hold new references and *n_out (may be NULL) is n; on failure returns the
 * rule's or kernel's status with its message and writes no outputs. */
oly_status tu_run_kernel(const oly_prim *p, const void *params, oly_array *const *in, int n_in,
                         oly_array **out, int max_out, int *n_out);
/* True when a has n elements each within atol + rtol * |expect| (NaN matches NaN,
 * infinities must match exactly); otherwise prints the first mismatch. */
bool tu_allclose(const oly_array *a, const double *expect, int64_t n, double rtol, double atol);

#endif
