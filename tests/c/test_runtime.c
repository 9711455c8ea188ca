/* test_runtime.c — the runtime's machinery around kernels: the buffer pool
 * (big blocks recycled across runs, never while someone holds them). */
#include "test.h"
#include "testutil.h"
#include "exec/exec.h"

/* ---------------------------------------------------------------- helpers */

static oly_var *unary(oly_builder *b, const oly_prim *p, oly_var *x)
{
    oly_atom in = oly_atom_var(x);
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, &in, 1, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_var *binary(oly_builder *b, const oly_prim *p, oly_atom x, oly_atom y)
{
    oly_atom in[2] = {x, y};
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, in, 2, NULL, NULL, 0, &o, 1, NULL));
    return o;
}

static oly_atom lit(oly_dtype t, double v)
{
    oly_scalar s = {.dtype = t, .weak = false};
    if (oly_dtype_is_float(t)) s.v.f = v;
    else s.v.i = (int64_t)v;
    return oly_atom_lit(s);
}

/* f32[n] -> sin(x) * x + 1: two big intermediates in scratch, one output. */
static oly_program *chain_program(int64_t n)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_var *x;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_var *s = unary(b, &oly__prim_sin, x);
    oly_var *m = binary(b, &oly__prim_mul, oly_atom_var(s), oly_atom_var(x));
    oly_var *y = binary(b, &oly__prim_add, oly_atom_var(m), lit(OLY_FLOAT32, 1));
    oly_atom out = oly_atom_var(y);
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &p));
    oly_builder_free(b);
    return p;
}

static oly_array *filled_f32(int64_t n, float v)
{
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_array *x = NULL;
    CHECK_OK(oly_array_new(&a, &x));
    float *d = oly_array_mutable_data(x);
    for (int64_t i = 0; i < n; i++) d[i] = v + (float)(i % 7);
    return x;
}

/* ---------------------------------------------------------------- buffer pool */

TEST(bufpool_classes)
{
    CHECK_EQ(oly__bufpool_class(1), 64);
    CHECK_EQ(oly__bufpool_class(OLY_BUFPOOL_MIN), OLY_BUFPOOL_MIN);
    /* an eighth of the power of two: at most 12.5% slack */
    CHECK_EQ(oly__bufpool_class(OLY_BUFPOOL_MIN + 1), OLY_BUFPOOL_MIN + OLY_BUFPOOL_MIN / 8);
    size_t n = (size_t)40000000;
    size_t c = oly__bufpool_class(n);
    CHECK(c >= n && c - n <= n / 8);
    CHECK_EQ(oly__bufpool_class(SIZE_MAX - 5), 0);
}

TEST(bufpool_recycles_big_blocks)
{
    oly__bufpool_set_limit(64 << 20);
    oly__bufpool_trim(0);
    size_t n = (size_t)3 << 20;
    long long maps0, hits0, maps1, hits1;
    oly__bufpool_stats(NULL, NULL, &maps0, &hits0);
    char *p = oly__bufpool_alloc(n);
    CHECK(p != NULL);
    CHECK_EQ((uintptr_t)p % 64, 0);
    memset(p, 1, n);
    oly__bufpool_free(p, n);
    size_t bytes;
    int blocks;
    oly__bufpool_stats(&bytes, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 1);
    CHECK_EQ(bytes, oly__bufpool_class(n));
    /* the same class again: the same block, no new mapping */
    char *q = oly__bufpool_alloc(n - 100);
    CHECK(q == p);
    oly__bufpool_stats(&bytes, &blocks, &maps1, &hits1);
    CHECK_EQ(maps1 - maps0, 1);
    CHECK_EQ(hits1 - hits0, 1);
    CHECK_EQ(blocks, 0);
    /* another class: a new mapping */
    char *r = oly__bufpool_alloc(n * 2);
    CHECK(r != NULL && r != q);
    oly__bufpool_free(q, n - 100);
    oly__bufpool_free(r, n * 2);
    oly__bufpool_trim(0);
    oly__bufpool_stats(&bytes, &blocks, NULL, NULL);
    CHECK_EQ(bytes, 0);
    CHECK_EQ(blocks, 0);
    oly__bufpool_set_limit(-1);
}

TEST(bufpool_bound_evicts_oldest)
{
    size_t n = (size_t)2 << 20;
    oly__bufpool_set_limit((long long)(5 * n / 2)); /* room for two blocks, not three */
    oly__bufpool_trim(0);
    char *a = oly__bufpool_alloc(n), *b = oly__bufpool_alloc(n), *c = oly__bufpool_alloc(n);
    CHECK(a && b && c);
    oly__bufpool_free(a, n);
    oly__bufpool_free(b, n);
    oly__bufpool_free(c, n); /* evicts a */
    size_t bytes;
    int blocks;
    oly__bufpool_stats(&bytes, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 2);
    CHECK(bytes <= 5 * n / 2);
    /* the warmest block first */
    char *d = oly__bufpool_alloc(n);
    CHECK(d == c);
    oly__bufpool_free(d, n);
    /* a block bigger than the bound is never cached */
    char *e = oly__bufpool_alloc(4 * n);
    oly__bufpool_free(e, 4 * n);
    oly__bufpool_stats(NULL, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 2);
    /* bound 0: nothing is cached */
    oly__bufpool_set_limit(0);
    oly__bufpool_stats(&bytes, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 0);
    char *f = oly__bufpool_alloc(n);
    oly__bufpool_free(f, n);
    oly__bufpool_stats(NULL, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 0);
    oly__bufpool_set_limit(-1);
}

TEST(bufpool_fault_injection)
{
    oly_fault_inject_alloc_this_thread(0);
    void *p = oly__bufpool_alloc((size_t)8 << 20);
    oly_fault_inject_alloc(-1);
    CHECK(p == NULL);
    CHECK(strstr(oly_last_error(), "out of memory") != NULL);
}

/* A recycled block behind a new zeroed array reads zeros, whatever the
 * array that held it before wrote. */
TEST(bufpool_new_arrays_are_zeroed)
{
    oly__bufpool_set_limit(64 << 20);
    int64_t n = (int64_t)1 << 20; /* 4 MiB of f32 */
    oly_array *x = filled_f32(n, 3.0f);
    oly_array_release(x);
    oly_aval a = tu_aval(OLY_FLOAT32, 1, &n);
    oly_array *y = NULL;
    CHECK_OK(oly_array_new(&a, &y));
    const float *d = oly_array_data(y);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < n; i++) nonzero += d[i] != 0;
    CHECK_EQ(nonzero, 0);
    oly_array_release(y);
    oly__bufpool_set_limit(-1);
}

/* Steady runs of a big program map nothing new, and an output the caller
 * still holds is never handed to a later run. */
TEST(bufpool_steady_runs_and_held_outputs)
{
    oly__bufpool_set_limit(256 << 20);
    int64_t n = (int64_t)3 << 20; /* 12 MiB per value */
    oly_program *p = chain_program(n);
    oly_array *x1 = filled_f32(n, 0.25f), *x2 = filled_f32(n, -2.0f);
    oly_array *first = NULL, *y = NULL;
    CHECK_OK(oly_program_run(p, 0, &x1, 1, &first, 1));
    CHECK_OK(oly_program_run(p, 0, &x2, 1, &y, 1));
    oly_array_release(y);
    long long maps0, maps1;
    oly__bufpool_stats(NULL, NULL, &maps0, NULL);
    for (int r = 0; r < 5; r++) {
        CHECK_OK(oly_program_run(p, 0, &x2, 1, &y, 1));
        CHECK(oly_array_data(y) != oly_array_data(first));
        oly_array_release(y);
    }
    oly__bufpool_stats(NULL, NULL, &maps1, NULL);
    CHECK_EQ(maps1 - maps0, 0);
    /* first still holds x1's result */
    const float *d = oly_array_data(first), *xs = oly_array_data(x1);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i += 4099) {
        float want = sinf(xs[i]) * xs[i] + 1.0f;
        bad += fabsf(d[i] - want) > 1e-5f * (fabsf(want) + 1.0f);
    }
    CHECK_EQ(bad, 0);
    oly_array_release(first);
    oly_array_release(x1);
    oly_array_release(x2);
    oly_program_release(p);
    oly__bufpool_trim(0);
    oly__bufpool_set_limit(-1);
}
