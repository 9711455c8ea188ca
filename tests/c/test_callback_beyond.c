/* test_callback_beyond.c — issue 16's additions to the callback rows: the
 * gufunc-signature vmap rule of pure_callback (what the host function sees,
 * against a per-element loop, and the shape rule's errors). */
#include "test.h"
#include "testutil.h"
#include "rulecheck.h"
#include "trans/trans.h"

/* ---------------------------------------------------------------- a broadcasting gufunc */

/* Element offset of loop index idx (of the result's loop rank `lr`) in an argument of
 * shape dims[0..rank) whose last `core` dims are core dims: NumPy's
 * broadcasting, right-aligned, size-1 dims read index 0. */
static int64_t loop_offset(const int64_t *idx, int lr, const int64_t *dims, int rank, int core)
{
    int al = rank - core; /* the argument's loop rank */
    int64_t off = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (d < al) {
            int64_t i = idx[lr - al + d];
            off += (dims[d] == 1 ? 0 : i) * stride;
        }
        stride *= dims[d];
    }
    return off;
}

typedef struct gucount {
    int calls;
    oly_aval last[2]; /* the arguments of the last call */
} gucount;

/* "(n),(n)->()" in float64: result[loop] = sum_k a[loop, k] * b[loop, k],
 * broadcasting the loop dims as a NumPy gufunc does. */
static oly_status gu_dot(void *user, oly_callback_frame *f)
{
    gucount *c = user;
    c->calls++;
    if (f->n_args != 2 || f->n_results != 1)
        return oly_host_fail(OLY_ERR_CALLBACK, "gu_dot: 2 arguments and 1 result");
    c->last[0] = f->arg_avals[0];
    c->last[1] = f->arg_avals[1];
    const oly_aval *a = &f->arg_avals[0], *b = &f->arg_avals[1], *r = &f->result_avals[0];
    int64_t n = a->dims[a->rank - 1];
    if (b->dims[b->rank - 1] != n) return oly_host_fail(OLY_ERR_CALLBACK, "gu_dot: core sizes");
    int64_t idx[OLY_MAX_RANK] = {0};
    int64_t total = oly_aval_size(r);
    const double *pa = f->args[0], *pb = f->args[1];
    double *out = f->results[0];
    for (int64_t e = 0; e < total; e++) {
        int64_t oa = loop_offset(idx, r->rank, a->dims, a->rank, 1);
        int64_t ob = loop_offset(idx, r->rank, b->dims, b->rank, 1);
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += pa[oa + k] * pb[ob + k];
        out[e] = s;
        for (int d = r->rank - 1; d >= 0; d--) {
            if (++idx[d] < r->dims[d]) break;
            idx[d] = 0;
        }
    }
    return OLY_OK;
}

/* vmap of the signature rule agrees with a loop over the batch, whichever
 * inputs are batched and on whichever axis (rulecheck), with and without
 * loop dims at the top level. */
TEST(beyond_signature_vmap_agrees_with_a_loop)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_aval r0 = RC_F64(2);
    oly_params_callback pc = {.callback = fn, .result_avals = &r0, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE, .signature = "(n),(n)->()"};
    /* a: loop (2,), b: no loop dims: they broadcast to (2,) */
    rc_case k = {.prim = "pure_callback", .params = &pc, .n_in = 2, .in = {RC_F64(2, 3), RC_F64(3)}};
    CHECK(rc_check_vmap(&k));
    oly_aval r1 = RC_SCALAR(OLY_FLOAT64);
    pc.result_avals = &r1;
    rc_case k1 = {.prim = "pure_callback", .params = &pc, .n_in = 2, .in = {RC_F64(4), RC_F64(4)}};
    CHECK(rc_check_vmap(&k1));
    CHECK(c.calls > 0);
    oly_host_fn_release(fn);
}

/* What the host function sees: one call; the batched argument has the batch
 * axis first, the unbatched one a size-1 axis there, and an argument with
 * fewer loop dims is padded after the batch axis. Nested vmap: one call per
 * level. */
TEST(beyond_signature_vmap_shapes_and_calls)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval ain = tu_aval(OLY_FLOAT64, 2, (int64_t[]){2, 3});
    oly_aval bin = tu_aval(OLY_FLOAT64, 1, (int64_t[]){3});
    oly_aval res = tu_aval(OLY_FLOAT64, 1, (int64_t[]){2});
    oly_var *va, *vb;
    CHECK_OK(oly_builder_add_input(b, &ain, &va));
    CHECK_OK(oly_builder_add_input(b, &bin, &vb));
    oly_atom in[2] = {oly_atom_var(va), oly_atom_var(vb)}, out[1];
    oly_params_callback pc = {.callback = fn, .result_avals = &res, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE, .signature = " (n) , (n) -> () "};
    CHECK_OK(oly__emit(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, out));
    oly_program *p = NULL, *v1 = NULL, *v2 = NULL;
    CHECK_OK(oly_builder_finish(b, out, 1, &p));
    oly_builder_free(b);
    /* b batched (5 of them), a not: a -> (1, 2, 3), b -> (5, 1, 3) */
    int ax1[2] = {-1, 0}, ox[1] = {0};
    CHECK_OK(oly_program_vmap(p, ax1, 5, ox, &v1));
    /* then a batched (4): a -> (4, 1, 2, 3), b -> (1, 5, 1, 3) */
    int ax2[2] = {0, -1};
    if (v1) CHECK_OK(oly_program_vmap(v1, ax2, 4, ox, &v2));
    if (v2) {
        CHECK_OK(oly_program_verify(v2));
        double av[24], bv[15];
        for (int i = 0; i < 24; i++) av[i] = i;
        for (int i = 0; i < 15; i++) bv[i] = i % 4;
        oly_array *args[2] = {tu_array(OLY_FLOAT64, 3, (int64_t[]){4, 2, 3}, av),
                              tu_array(OLY_FLOAT64, 2, (int64_t[]){5, 3}, bv)};
        oly_array *r = NULL;
        CHECK_OK(oly_program_run(v2, 0, args, 2, &r, 1));
        CHECK_EQ(c.calls, 1);
        CHECK_EQ(c.last[0].rank, 4);
        CHECK_EQ(c.last[1].rank, 4);
        int64_t wa[4] = {4, 1, 2, 3}, wb[4] = {1, 5, 1, 3};
        for (int d = 0; d < 4; d++) {
            CHECK_EQ(c.last[0].dims[d], wa[d]);
            CHECK_EQ(c.last[1].dims[d], wb[d]);
        }
        if (r) {
            const oly_aval *ra = oly_array_aval(r);
            CHECK_EQ(ra->rank, 3); /* (4, 5, 2) */
            CHECK_EQ(ra->dims[0], 4);
            CHECK_EQ(ra->dims[1], 5);
            CHECK_EQ(ra->dims[2], 2);
            double want[40];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 5; j++)
                    for (int m = 0; m < 2; m++) {
                        double s = 0;
                        for (int k = 0; k < 3; k++) s += av[i * 6 + m * 3 + k] * bv[j * 3 + k];
                        want[(i * 5 + j) * 2 + m] = s;
                    }
            CHECK(tu_allclose(r, want, 40, 0, 0));
        }
        oly_array_release(r);
        oly_array_release(args[0]);
        oly_array_release(args[1]);
    }
    oly_program_release(v2);
    oly_program_release(v1);
    oly_program_release(p);
    oly_host_fn_release(fn);
}

/* The shape rule refuses a bad signature with what was wrong. */
TEST(beyond_signature_shape_errors)
{
    gucount c = {0};
    oly_host_fn *fn = NULL;
    CHECK_OK(oly_host_fn_new("gu_dot", gu_dot, &c, NULL, &fn));
    oly_aval a3 = RC_F64(3), s0 = RC_SCALAR(OLY_FLOAT64);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a3, &x));
    oly_atom in[2] = {oly_atom_var(x), oly_atom_var(x)};
    oly_var *o[1];
    oly_params_callback pc = {.callback = fn, .result_avals = &s0, .n_results = 1,
                              .vmap_method = OLY_VMAP_SIGNATURE};
    struct {
        const char *sig;
        oly_status st;
        const char *msg;
    } bad[] = {
        {NULL, OLY_ERR_INVALID, "vmap_method=signature needs a signature"},
        {"(n)(n)->()", OLY_ERR_INVALID, "is not a gufunc signature"},
        {"(n),(n)->", OLY_ERR_INVALID, "unexpected end at offset 9"},
        {"(n,),(n)->()", OLY_ERR_INVALID, "unexpected character at offset 3"},
        {"(n)->()", OLY_ERR_INVALID, "has 1 argument and 1 result groups, the call has 2"},
        {"(n),(n)->(),()", OLY_ERR_INVALID, "2 result groups, the call has 2 arguments and 1 results"},
        {"(n,m),(n)->()", OLY_ERR_SHAPE, "argument 0 is f64[3], but the signature"},
        {"(n),(n)->(n)", OLY_ERR_SHAPE, "result 0 is f64[], but the signature"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pc.signature = bad[i].sig;
        CHECK_ERR(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
                  bad[i].st, bad[i].msg);
    }
    pc.signature = "(n),(n)->()";
    CHECK_ERR(oly_builder_append(b, &oly__prim_buffer_callback, in, 2, &pc, NULL, 0, o, 1, NULL),
              OLY_ERR_INVALID, "vmap_method=signature is for pure_callback only");
    CHECK_OK(oly_builder_append(b, &oly__prim_pure_callback, in, 2, &pc, NULL, 0, o, 1, NULL));
    oly_builder_free(b);
    oly_host_fn_release(fn);
}
