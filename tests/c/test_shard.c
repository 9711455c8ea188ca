/* test_shard.c — oly_program_for_shard (an elementwise program re-typed for
 * one shard; NULL for anything else) and oly_program_run_queued (futures even
 * on an idle stream; runs on two devices at once). */
#include "test.h"
#include "testutil.h"

#include <math.h>

/* x: f32[4,6], s: f32[] -> sin(x) * broadcast(s) + 1 (a literal), and x itself. */
static oly_program *elementwise_program(void)
{
    int64_t dims[2] = {4, 6};
    oly_aval ax = tu_aval(OLY_FLOAT32, 2, dims), as = tu_aval(OLY_FLOAT32, 0, NULL);
    oly_builder *b = NULL;
    oly_var *x = NULL, *s = NULL, *sx = NULL, *bs = NULL, *m = NULL, *r = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &ax, &x));
    CHECK_OK(oly_builder_add_input(b, &as, &s));
    oly_atom in[2] = {oly_atom_var(x)};
    CHECK_OK(oly_builder_append(b, &oly__prim_sin, in, 1, NULL, NULL, 0, &sx, 1, NULL));
    oly_params_broadcast_in_dim bp = {.shape = {2, {4, 6}}, .broadcast_dimensions = {0, {0}}};
    in[0] = oly_atom_var(s);
    CHECK_OK(oly_builder_append(b, &oly__prim_broadcast_in_dim, in, 1, &bp, NULL, 0, &bs, 1,
                                NULL));
    in[0] = oly_atom_var(sx);
    in[1] = oly_atom_var(bs);
    CHECK_OK(oly_builder_append(b, &oly__prim_mul, in, 2, NULL, NULL, 0, &m, 1, NULL));
    oly_scalar one = {.dtype = OLY_FLOAT32, .v.f = 1.0};
    in[0] = oly_atom_var(m);
    in[1] = oly_atom_lit(one);
    CHECK_OK(oly_builder_append(b, &oly__prim_add, in, 2, NULL, NULL, 0, &r, 1, NULL));
    oly_atom outs[2] = {oly_atom_var(r), oly_atom_var(x)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &p));
    oly_builder_free(b);
    return p;
}

TEST(shard_elementwise_program_is_retyped_and_computes_the_block)
{
    oly_program *p = elementwise_program();
    int64_t g[2] = {4, 6}, sd[2] = {2, 3};
    oly_program *q = NULL;
    CHECK_OK(oly_program_for_shard(p, 2, g, sd, &q));
    CHECK(q != NULL);
    if (!q) return;
    CHECK_OK(oly_program_verify(q));
    CHECK_EQ(oly_program_input_aval(q, 0)->dims[1], 3);
    CHECK_EQ(oly_program_input_aval(q, 1)->rank, 0);
    CHECK_EQ(oly_program_output_aval(q, 0)->dims[0], 2);
    CHECK_EQ(oly_program_output_aval(q, 1)->dims[1], 3);
    double xv[6] = {0, 1, 2, 3, 4, 5}, expect[6];
    for (int i = 0; i < 6; i++) expect[i] = sin(xv[i]) * 3 + 1;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, sd, xv), tu_scalar(OLY_FLOAT32, 3)};
    oly_array *out[2] = {NULL, NULL};
    CHECK_OK(oly_program_run(q, 0, in, 2, out, 2));
    CHECK(tu_allclose(out[0], expect, 6, 1e-6, 1e-6));
    CHECK(tu_allclose(out[1], xv, 6, 0, 0));
    for (int i = 0; i < 2; i++) {
        oly_array_release(in[i]);
        oly_array_release(out[i]);
    }
    oly_program_release(q);
    oly_program_release(p);
}

TEST(shard_refuses_what_is_not_elementwise_and_bad_shapes)
{
    int64_t dims[2] = {4, 6}, sd[2] = {2, 3}, bad[2] = {3, 3};
    oly_aval ax = tu_aval(OLY_FLOAT32, 2, dims);
    oly_builder *b = NULL;
    oly_var *x = NULL, *y = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &ax, &x));
    oly_params_reduce rp = {.axes = {1, {1}}};
    oly_atom in = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_reduce_sum, &in, 1, &rp, NULL, 0, &y, 1, NULL));
    oly_atom out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    oly_program *q = (oly_program *)1;
    CHECK_OK(oly_program_for_shard(p, 2, dims, sd, &q));
    CHECK(q == NULL); /* a reduction: no per-shard program */
    oly_program *e = elementwise_program();
    CHECK_EQ(oly_program_for_shard(e, 2, dims, bad, &q), OLY_ERR_INVALID);
    CHECK(strstr(oly_last_error(), "does not divide") != NULL);
    int64_t other[2] = {8, 6};
    CHECK_OK(oly_program_for_shard(e, 2, other, sd, &q)); /* inputs of another shape */
    CHECK(q == NULL);
    oly_program_release(e);
    oly_program_release(p);
}

TEST(stream_run_queued_returns_futures_on_idle_streams)
{
    oly_program *p = elementwise_program();
    int64_t g[2] = {4, 6};
    double xv[24];
    for (int i = 0; i < 24; i++) xv[i] = i;
    int n = oly_device_count() < 2 ? 1 : 2;
    oly_array *in[2] = {tu_array(OLY_FLOAT32, 2, g, xv), tu_scalar(OLY_FLOAT32, 2)};
    oly_array *out[2][2] = {{NULL, NULL}, {NULL, NULL}};
    for (int d = 0; d < n; d++) CHECK_OK(oly_program_run_queued(p, d, in, 2, out[d], 2));
    for (int d = 0; d < n; d++) {
        CHECK_OK(oly_array_wait(out[d][0]));
        CHECK_EQ(oly_array_device(out[d][0]), d);
        CHECK(fabs(tu_get(out[d][0], 5) - (sin(5.0) * 2 + 1)) < 1e-5);
        for (int k = 0; k < 2; k++) oly_array_release(out[d][k]);
    }
    CHECK_OK(oly_effects_barrier());
    for (int i = 0; i < 2; i++) oly_array_release(in[i]);
    oly_program_release(p);
}
