/* test_faults.c — allocation failure injected at every allocation of a
 * representative workload (build, print, DCE, vmap, linearize + transpose,
 * compile and run with a host function, eager apply). Each failure must come
 * back as a status with a message, never a crash; the same workload run
 * afterwards must give the right values (no state left broken); under `make
 * asan` LeakSanitizer checks that nothing leaks on any failure path.
 * Every allocation of the workload fails in turn (a few hundred runs, well
 * under a second; make asan runs it with LeakSanitizer). */
#include "test.h"

#define N 4

/* y = 2 * x, elementwise on f64 (the host function of the workload). */
static oly_status host_double(void *user, oly_callback_frame *frame)
{
    (void)user;
    const double *x = frame->args[0];
    double *y = frame->results[0];
    for (int i = 0; i < N; i++) y[i] = 2 * x[i];
    return OLY_OK;
}

typedef struct result {
    double value;      /* sum(sin(x) * host_double(y)) */
    double grad[N];    /* its gradient in x: 2 cos(x) * y */
    double batched[2]; /* the vmapped value over x and x + 1 */
    double eager;      /* sin(x[0]) by oly_apply */
} result;

static const double X[N] = {0.1, 0.7, -1.3, 2.0};
static const double Y[N] = {1.0, -2.0, 0.5, 3.0};

#define STEP(expr)                                                                        \
    do {                                                                                  \
        if ((s = (expr)) != OLY_OK) goto done;                                            \
    } while (0)

/* The workload; every object it makes is released on every path. */
static oly_status workload(result *r)
{
    oly_status s = OLY_OK;
    oly_builder *b = NULL;
    oly_host_fn *fn = NULL;
    oly_program *p = NULL, *d = NULL, *vm = NULL, *pr = NULL, *lin = NULL, *tr = NULL;
    oly_array *x = NULL, *y = NULL, *xb = NULL, *ct = NULL, *e = NULL;
    oly_array *out[8] = {0}, *pout[8] = {0}, *gout[8] = {0}, *vout[2] = {0};
    char *text = NULL;
    int n_res = 0, n_pout = 0;

    oly_aval v, v2, sc;
    STEP(oly_aval_make(OLY_FLOAT64, 1, (const int64_t[]){N}, &v));
    STEP(oly_aval_make(OLY_FLOAT64, 2, (const int64_t[]){2, N}, &v2));
    STEP(oly_aval_make(OLY_FLOAT64, 0, NULL, &sc));
    STEP(oly_host_fn_new("host_double", host_double, NULL, NULL, &fn));

    STEP(oly_builder_new(&b));
    oly_var *vx, *vy, *t[4];
    int n_out;
    STEP(oly_builder_add_input(b, &v, &vx));
    STEP(oly_builder_add_input(b, &v, &vy));
    oly_atom a = oly_atom_var(vx);
    STEP(oly_builder_append(b, oly_prim_lookup("sin"), &a, 1, NULL, NULL, 0, &t[0], 1, &n_out));
    oly_params_callback cb = {.callback = fn, .result_avals = &v, .n_results = 1,
                              .vmap_method = OLY_VMAP_SEQUENTIAL};
    a = oly_atom_var(vy); /* not differentiated: a pure_callback has no JVP */
    STEP(oly_builder_append(b, oly_prim_lookup("pure_callback"), &a, 1, &cb, NULL, 0, &t[1], 1,
                            &n_out));
    oly_atom m[2] = {oly_atom_var(t[0]), oly_atom_var(t[1])};
    STEP(oly_builder_append(b, oly_prim_lookup("mul"), m, 2, NULL, NULL, 0, &t[2], 1, &n_out));
    oly_params_reduce red = {.axes = {.n = 1, .v = {0}}};
    a = oly_atom_var(t[2]);
    STEP(oly_builder_append(b, oly_prim_lookup("reduce_sum"), &a, 1, &red, NULL, 0, &t[3], 1,
                            &n_out));
    a = oly_atom_var(t[3]);
    STEP(oly_builder_finish(b, &a, 1, &p));

    STEP(oly_program_verify(p));
    STEP(oly_program_print(p, &text));
    STEP(oly_program_dce(p, &d));
    STEP(oly_program_vmap(d, (const int[]){0, -1}, 2, (const int[]){0}, &vm));
    STEP(oly_program_linearize(d, (const bool[]){true, false}, &pr, &lin, &n_res,
                               (bool[]){false}));
    STEP(oly_program_transpose(lin, n_res, &tr));

    STEP(oly_array_from_data(&v, X, &x));
    STEP(oly_array_from_data(&v, Y, &y));
    double xb_data[2 * N];
    for (int i = 0; i < N; i++) xb_data[i] = X[i], xb_data[N + i] = X[i] + 1;
    STEP(oly_array_from_data(&v2, xb_data, &xb));
    double one = 1.0;
    STEP(oly_array_from_data(&sc, &one, &ct));

    oly_array *in[2] = {x, y};
    STEP(oly_program_run(d, 0, in, 2, out, 1));
    r->value = *(const double *)oly_array_data(out[0]);
    oly_array *vin[2] = {xb, y};
    STEP(oly_program_run(vm, 0, vin, 2, vout, 1));
    r->batched[0] = ((const double *)oly_array_data(vout[0]))[0];
    r->batched[1] = ((const double *)oly_array_data(vout[0]))[1];
    n_pout = oly_program_num_outputs(pr);
    if (n_pout > 8 || oly_program_num_inputs(tr) > 8) {
        s = oly_host_fail(OLY_ERR_INTERNAL, "workload: too many residuals");
        goto done;
    }
    STEP(oly_program_run(pr, 0, in, 2, pout, n_pout));
    oly_array *tin[8];
    for (int i = 0; i < n_res; i++) tin[i] = pout[1 + i];
    tin[n_res] = ct;
    STEP(oly_program_run(tr, 0, tin, n_res + 1, gout, 1));
    for (int i = 0; i < N; i++) r->grad[i] = ((const double *)oly_array_data(gout[0]))[i];
    int n_e = 0;
    STEP(oly_apply(oly_prim_lookup("sin"), NULL, &x, 1, &e, 1, &n_e));
    r->eager = *(const double *)oly_array_data(e);
done:
    free(text);
    for (int i = 0; i < 8; i++) {
        oly_array_release(out[i]);
        oly_array_release(pout[i]);
        oly_array_release(gout[i]);
    }
    oly_array_release(vout[0]);
    oly_array_release(vout[1]);
    oly_array_release(e);
    oly_array_release(x);
    oly_array_release(y);
    oly_array_release(xb);
    oly_array_release(ct);
    oly_program_release(tr);
    oly_program_release(lin);
    oly_program_release(pr);
    oly_program_release(vm);
    oly_program_release(d);
    oly_program_release(p);
    oly_builder_free(b);
    oly_host_fn_release(fn);
    return s;
}

static bool right(const result *r)
{
    double value = 0, batched1 = 0;
    bool ok = true;
    for (int i = 0; i < N; i++) {
        value += 2 * sin(X[i]) * Y[i];
        batched1 += 2 * sin(X[i] + 1) * Y[i];
        ok &= fabs(r->grad[i] - 2 * cos(X[i]) * Y[i]) < 1e-12;
    }
    return ok && fabs(r->value - value) < 1e-12 && fabs(r->batched[0] - value) < 1e-12 &&
           fabs(r->batched[1] - batched1) < 1e-12 && fabs(r->eager - sin(X[0])) < 1e-15;
}

TEST(faults_every_allocation_fails_cleanly)
{
    result r;
    memset(&r, 0, sizeof r);
    /* Count the allocations of one run (caches warm: the second run). */
    CHECK_OK(workload(&r));
    CHECK(right(&r));
    const long big = 1L << 40;
    oly_fault_inject_alloc(big);
    CHECK_OK(workload(&r));
    long count = big - oly_fault_inject_left();
    oly_fault_inject_alloc(-1);
    CHECK(count > 20);

    int failures = 0;
    for (long k = 0; k < count; k++) {
        oly_error_clear();
        oly_fault_inject_alloc(k);
        memset(&r, 0, sizeof r);
        oly_status s = workload(&r);
        bool fired = oly_fault_inject_left() < 0;
        oly_fault_inject_alloc(-1);
        if (s != OLY_OK) {
            failures++;
            if (s != OLY_ERR_NOMEM) CHECK_FAIL_("allocation %ld: %s, want OLY_ERR_NOMEM: %s", k,
                                                oly_status_name(s), oly_last_error());
            if (!*oly_last_error()) CHECK_FAIL_("allocation %ld: failed with no message", k);
        } else if (!right(&r)) {
            CHECK_FAIL_("allocation %ld failed but the workload returned wrong values", k);
        }
        (void)fired;
        /* The next run is whole again. */
        memset(&r, 0, sizeof r);
        s = workload(&r);
        if (s != OLY_OK || !right(&r))
            CHECK_FAIL_("after failing allocation %ld the next run is broken: %s %s", k,
                        oly_status_name(s), oly_last_error());
    }
    CHECK(failures > 0);
}
