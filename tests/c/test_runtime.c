/* test_runtime.c — the runtime's machinery around kernels: the buffer pool
 * (big blocks recycled across runs, never while someone holds them) and the
 * thread pool (big kernels split by ith/nth: the same bytes as one call,
 * failures reported once, a busy pool never waited for). */
#include "test.h"
#include "testutil.h"
#include "rt/rt.h"

#include <pthread.h>
#include <time.h>

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

/* The mapping behind a big block (its data starts at a colour inside the
 * first page). */
static uintptr_t mapping(const void *p) { return (uintptr_t)p & ~(uintptr_t)4095; }

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
    /* the same class again: the same block, no new mapping, another colour */
    char *q = oly__bufpool_alloc(n - 100);
    CHECK(mapping(q) == mapping(p));
    CHECK(q != p);
    CHECK_EQ((uintptr_t)q % 64, 0);
    oly__bufpool_stats(&bytes, &blocks, &maps1, &hits1);
    CHECK_EQ(maps1 - maps0, 1);
    CHECK_EQ(hits1 - hits0, 1);
    CHECK_EQ(blocks, 0);
    /* another class: a new mapping */
    char *r = oly__bufpool_alloc(n * 2);
    CHECK(r != NULL && mapping(r) != mapping(q));
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
    CHECK(mapping(d) == mapping(c));
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

/* A block left cached past the idle time goes at the next big-block call. */
TEST(bufpool_idle_blocks_are_unmapped)
{
    oly__bufpool_set_limit(64 << 20);
    oly__bufpool_trim(0);
    size_t n = (size_t)2 << 20;
    void *a = oly__bufpool_alloc(n), *b = oly__bufpool_alloc(2 * n);
    oly__bufpool_free(a, n);
    int blocks;
    oly__bufpool_stats(NULL, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 1);
    oly__bufpool_set_idle(0);
    struct timespec t = {0, 30 * 1000 * 1000}; /* past the coarse clock's tick */
    nanosleep(&t, NULL);
    oly__bufpool_free(b, 2 * n); /* a is unmapped; b is cached */
    oly__bufpool_stats(NULL, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 1);
    oly__bufpool_set_idle(-1);
    void *c = oly__bufpool_alloc(2 * n); /* b again */
    oly__bufpool_stats(NULL, &blocks, NULL, NULL);
    CHECK_EQ(blocks, 0);
    oly__bufpool_free(c, 2 * n);
    oly__bufpool_trim(0);
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

/* ---------------------------------------------------------------- splitting */

static oly_ints ints(int n, const int64_t *v)
{
    oly_ints r = {.n = n};
    for (int i = 0; i < n; i++) r.v[i] = v[i];
    return r;
}

/* Inputs: rank-r arrays of dtype t with pseudo-random values (distinct enough
 * for sorts, small for integer dtypes). */
static oly_array *random_array(oly_dtype t, int rank, const int64_t *dims, uint32_t seed)
{
    oly_aval a = tu_aval(t, rank, dims);
    oly_array *x = NULL;
    CHECK_OK(oly_array_new(&a, &x));
    int64_t n = oly_aval_size(&a);
    uint32_t h = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        h ^= h << 13;
        h ^= h >> 17;
        h ^= h << 5;
        oly_scalar v = {.dtype = OLY_FLOAT64, .v.f = (double)(h % 20011) / 997.0 - 10.0};
        if (t == OLY_BOOL) v = (oly_scalar){.dtype = OLY_BOOL, .v.i = h & 1};
        else if (!oly_dtype_is_float(t)) v = (oly_scalar){.dtype = OLY_INT64, .v.i = h % 1000};
        oly_scalar_store(&v, t, (char *)oly_array_mutable_data(x) + (size_t)i * oly_dtype_size(t));
    }
    return x;
}

/* A one-equation program p(ins) with the inputs' avals. */
static oly_program *one_eqn(const oly_prim *p, const void *params, oly_array *const *in, int n_in)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_atom atoms[4];
    for (int i = 0; i < n_in; i++) {
        oly_var *v;
        CHECK_OK(oly_builder_add_input(b, oly_array_aval(in[i]), &v));
        atoms[i] = oly_atom_var(v);
    }
    oly_var *outv[4];
    int n_out = 0;
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_append(b, p, atoms, n_in, params, NULL, 0, outv, 4, &n_out));
    oly_atom outs[4];
    for (int k = 0; k < n_out; k++) outs[k] = oly_atom_var(outv[k]);
    CHECK_OK(oly_builder_finish(b, outs, n_out, &prog));
    oly_builder_free(b);
    return prog;
}

/* A pool for tests: runs the shares on the calling thread, last first, so a
 * kernel whose shares do not partition its work (or read what another share
 * wrote) gives other bytes than one call. */
static atomic_int fake_jobs;
static bool fake_pool(void (*work)(void *arg, int share), void *arg, int n)
{
    atomic_fetch_add(&fake_jobs, 1);
    for (int i = n - 1; i >= 0; i--) work(arg, i);
    return true;
}

/* Runs prog on in whole (no pool) and split (the fake pool with `threads`),
 * and checks every output has the same bytes. */
static void check_split(const char *what, const oly_prim *p, const void *params,
                        oly_array *const *in, int n_in, int threads)
{
    oly_program *prog = one_eqn(p, params, in, n_in);
    if (!prog) return;
    int n_out = prog->n_out;
    oly_array *whole[4] = {0}, *split[4] = {0};
    oly__exec_set_pool(NULL, 1);
    CHECK_OK(oly_program_run(prog, 0, in, n_in, whole, n_out));
    int jobs0 = atomic_load(&fake_jobs);
    oly__exec_set_pool(fake_pool, threads);
    CHECK_OK(oly_program_run(prog, 0, in, n_in, split, n_out));
    oly__exec_set_pool(NULL, 1);
    if (atomic_load(&fake_jobs) == jobs0) CHECK_FAIL_("%s: the step was not split", what);
    for (int k = 0; k < n_out; k++) {
        if (!whole[k] || !split[k]) continue;
        size_t nb = oly_aval_nbytes(oly_array_aval(whole[k]));
        if (memcmp(oly_array_data(whole[k]), oly_array_data(split[k]), nb) != 0)
            CHECK_FAIL_("%s: output %d differs when split over %d threads", what, k, threads);
        oly_array_release(whole[k]);
        oly_array_release(split[k]);
    }
    oly_program_release(prog);
}

/* Every family whose kernel says `splits`, through the executor with a pool
 * that runs shares in reverse: the same bytes as one call. */
TEST(split_kernels_match_one_call)
{
    oly__pool_install(); /* so the runtime does not lend its pool over ours later */
    int64_t n1[1] = {(int64_t)1 << 17}, m2[2] = {256, 515}, t2[2] = {515, 256};
    oly_array *x = random_array(OLY_FLOAT32, 1, n1, 1), *y = random_array(OLY_FLOAT32, 1, n1, 2);
    oly_array *b = random_array(OLY_BOOL, 1, n1, 3), *i32 = random_array(OLY_INT32, 1, n1, 4);
    oly_array *m = random_array(OLY_FLOAT32, 2, m2, 5), *mt = random_array(OLY_FLOAT32, 2, t2, 6);
    oly_array *u[4];
    for (int k = 0; k < 4; k++) u[k] = random_array(OLY_UINT32, 1, n1, 10 + (uint32_t)k);
    for (int threads = 2; threads <= 5; threads += 3) {
        oly_array *xy[2] = {x, y}, *sel[3] = {b, x, y};
        check_split("add", &oly__prim_add, NULL, xy, 2, threads);
        check_split("sin", &oly__prim_sin, NULL, &x, 1, threads);
        check_split("erf", &oly__prim_erf, NULL, &x, 1, threads);
        check_split("add i32", &oly__prim_add, NULL, (oly_array *[]){i32, i32}, 2, threads);
        oly_params_convert cv = {.new_dtype = OLY_INT32};
        check_split("convert", &oly__prim_convert_element_type, &cv, &x, 1, threads);
        check_split("select_n", &oly__prim_select_n, NULL, sel, 3, threads);
        check_split("threefry2x32", &oly__prim_threefry2x32, NULL, u, 4, threads);
        oly_params_broadcast_in_dim bc = {.shape = ints(2, (int64_t[]){515, 256}),
                                          .broadcast_dimensions = ints(1, (int64_t[]){1})};
        oly_array *row = random_array(OLY_FLOAT32, 1, (int64_t[]){256}, 7);
        check_split("broadcast_in_dim", &oly__prim_broadcast_in_dim, &bc, &row, 1, threads);
        oly_array_release(row);
        oly_params_transpose tr = {.permutation = ints(2, (int64_t[]){1, 0})};
        check_split("transpose", &oly__prim_transpose, &tr, &m, 1, threads);
        oly_params_dims rv = {.dimensions = ints(1, (int64_t[]){1})};
        check_split("rev", &oly__prim_rev, &rv, &m, 1, threads);
        oly_params_slice sl = {.start_indices = ints(1, (int64_t[]){3}),
                               .limit_indices = ints(1, (int64_t[]){(1 << 17) - 5}),
                               .strides = ints(1, (int64_t[]){1})};
        check_split("slice", &oly__prim_slice, &sl, &x, 1, threads);
        oly_params_concatenate cc = {.dimension = 1};
        check_split("concatenate", &oly__prim_concatenate, &cc, (oly_array *[]){m, m}, 2,
                    threads);
        check_split("transpose 515x256", &oly__prim_transpose, &tr, &mt, 1, threads);
        oly_params_iota io = {.dtype = OLY_INT32, .shape = ints(2, m2), .dimension = 1};
        check_split("iota", &oly__prim_iota, &io, NULL, 0, threads);
        oly_params_argminmax am = {.axes = ints(1, (int64_t[]){1}), .index_dtype = OLY_INT32};
        check_split("argmax", &oly__prim_argmax, &am, &m, 1, threads);
        oly_params_cumulative cs = {.axis = 1};
        check_split("cumsum", &oly__prim_cumsum, &cs, &m, 1, threads);
        oly_params_sort so = {.dimension = 1, .is_stable = true, .num_keys = 1};
        check_split("sort", &oly__prim_sort, &so, &m, 1, threads);
        oly_params_top_k tk = {.k = 5};
        check_split("top_k", &oly__prim_top_k, &tk, &m, 1, threads);
        /* x[idx]: 128K indices into 128K elements */
        oly_array *idx = random_array(OLY_INT32, 2, (int64_t[]){(int64_t)1 << 17, 1}, 8);
        oly_params_gather g = {.offset_dims = {0},
                               .collapsed_slice_dims = ints(1, (int64_t[]){0}),
                               .start_index_map = ints(1, (int64_t[]){0}),
                               .slice_sizes = ints(1, (int64_t[]){1}),
                               .mode = OLY_GATHER_CLIP};
        check_split("gather", &oly__prim_gather, &g, (oly_array *[]){x, idx}, 2, threads);
        oly_array_release(idx);
    }
    oly_array_release(x);
    oly_array_release(y);
    oly_array_release(b);
    oly_array_release(i32);
    oly_array_release(m);
    oly_array_release(mt);
    for (int k = 0; k < 4; k++) oly_array_release(u[k]);
    oly__pool_set_threads(oly__pool_threads()); /* the runtime's pool again */
}

/* A step below the threshold, or a kernel that does not split, stays whole. */
TEST(split_small_or_unmarked_steps_stay_whole)
{
    oly__pool_install();
    int64_t small[1] = {OLY_EXEC_SPLIT_MIN / 2}, big[2] = {512, 512};
    oly_array *x = random_array(OLY_FLOAT32, 1, small, 1), *m = random_array(OLY_FLOAT32, 2, big, 2);
    oly_program *p1 = one_eqn(&oly__prim_sin, NULL, &x, 1);
    oly_params_reduce r = {.axes = ints(1, (int64_t[]){1})};
    oly_program *p2 = one_eqn(&oly__prim_reduce_sum, &r, &m, 1);
    oly__exec_set_pool(fake_pool, 4);
    int jobs0 = atomic_load(&fake_jobs);
    oly_array *y = NULL;
    CHECK_OK(oly_program_run(p1, 0, &x, 1, &y, 1));
    oly_array_release(y);
    CHECK_OK(oly_program_run(p2, 0, &m, 1, &y, 1));
    oly_array_release(y);
    CHECK_EQ(atomic_load(&fake_jobs), jobs0);
    oly_array_release(x);
    oly_array_release(m);
    oly_program_release(p1);
    oly_program_release(p2);
    oly__pool_set_threads(oly__pool_threads());
}

/* A test row that splits and fails in its last share (and in share 0 with
 * another message when asked): the run fails once, naming the row. */
static atomic_int fail_calls;
static oly_status k_split_fail(const oly_kernel_ctx *c)
{
    atomic_fetch_add(&fail_calls, 1);
    const float *x = c->in[0];
    float *y = c->out[0];
    int64_t n = oly_aval_size(&c->out_aval[0]), lo = n * c->ith / c->nth,
            hi = n * (c->ith + 1) / c->nth;
    for (int64_t i = lo; i < hi; i++) y[i] = x[i];
    if (c->ith == c->nth - 1 && x[0] < 0) return oly__error(OLY_ERR_INVALID, "share %d of %d failed", c->ith, c->nth);
    return OLY_OK;
}
static oly_status same_shape1(const oly_shape_ctx *ctx, oly_aval *out)
{
    out[0] = ctx->in[0];
    return OLY_OK;
}
static const oly_prim t_split_fail = {.name = "t_split_fail", .n_in = 1, .n_out = 1,
                                      .shape = same_shape1};
static const oly_cpu_kernel t_split_fail_cpu = {.fn = k_split_fail, .splits = true};

TEST(split_failure_fails_the_run_once)
{
    CHECK_OK(oly__cpu_register(&t_split_fail, &t_split_fail_cpu));
    oly__pool_install();
    int64_t n = (int64_t)1 << 18;
    oly_array *x = filled_f32(n, -1.0f);
    oly_program *p = one_eqn(&t_split_fail, NULL, &x, 1);
    oly_array *y = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        oly__pool_set_threads(threads); /* the real pool, with real threads */
        atomic_store(&fail_calls, 0);
        CHECK_ERR(oly_program_run(p, 0, &x, 1, &y, 1), OLY_ERR_INVALID, "t_split_fail: share");
        CHECK(y == NULL);
        int64_t shares = n / OLY_EXEC_SHARE_MIN, cap = (int64_t)threads * OLY_EXEC_SHARES_PER_THREAD;
        int want = threads == 1 ? 1 : (int)(shares < cap ? shares : cap);
        CHECK_EQ(atomic_load(&fail_calls), want);
    }
    oly_array_release(x);
    x = filled_f32(n, 2.0f);
    CHECK_OK(oly_program_run(p, 0, &x, 1, &y, 1));
    CHECK(y && memcmp(oly_array_data(y), oly_array_data(x), (size_t)n * 4) == 0);
    oly_array_release(y);
    oly_array_release(x);
    oly_program_release(p);
    oly__pool_set_threads(oly__pool_threads());
}

/* Several threads running big programs at once share one pool: whoever finds
 * it busy runs alone; every result is right. */
typedef struct racer {
    oly_program *p;
    oly_array *x;
    const oly_array *want;
    int bad;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    for (int i = 0; i < 20; i++) {
        oly_array *y = NULL;
        if (oly_program_run(r->p, 0, &r->x, 1, &y, 1) != OLY_OK) {
            r->bad++;
            continue;
        }
        r->bad += memcmp(oly_array_data(y), oly_array_data(r->want),
                         oly_aval_nbytes(oly_array_aval(y))) != 0;
        oly_array_release(y);
    }
    return NULL;
}

TEST(split_pool_shared_by_threads)
{
    oly__pool_install();
    int64_t n = (int64_t)1 << 18;
    oly_program *p = chain_program(n);
    oly_array *x = filled_f32(n, 0.5f), *want = NULL;
    oly__pool_set_threads(1);
    CHECK_OK(oly_program_run(p, 0, &x, 1, &want, 1));
    oly__pool_set_threads(3);
    racer r[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        r[i] = (racer){p, x, want, 0};
        CHECK_EQ(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(r[i].bad, 0);
    }
    oly_array_release(want);
    oly_array_release(x);
    oly_program_release(p);
    oly__pool_set_threads(oly__pool_threads());
}

TEST(split_thread_count_parsing)
{
    CHECK_EQ(oly__pool_parse_threads(NULL), 0);
    CHECK_EQ(oly__pool_parse_threads(""), 0);
    CHECK_EQ(oly__pool_parse_threads("0"), 0);
    CHECK_EQ(oly__pool_parse_threads("-2"), 0);
    CHECK_EQ(oly__pool_parse_threads("3x"), 0);
    CHECK_EQ(oly__pool_parse_threads("1"), 1);
    CHECK_EQ(oly__pool_parse_threads("12"), 12);
    CHECK_EQ(oly__pool_parse_threads("100000"), 256);
    CHECK(oly__pool_threads() >= 1);
}

/* ---------------------------------------------------------------- one-element ops */

/* Special values per dtype kind, as doubles (stored with oly_scalar_store, so
 * integers wrap and unsigned types see their extremes too). */
static const double FLOAT_VALS[] = {0.0,  -0.0,      1.0,     -1.0,    0.5,   3.0,    -7.25,
                                    1e30, -1e-30,    0.999,   INFINITY, -INFINITY, NAN,
                                    3.4028234663852886e38, 1.4e-45, 16777217.0};
static const double INT_VALS[] = {0, 1, -1, 2, -7, 100, 2147483647.0, -2147483648.0,
                                  -2147483647.0, 4294967295.0, 9.2233720368547758e18,
                                  -9.2233720368547758e18, 1e19};
static const double BOOL_VALS[] = {0, 1};

static void vals_of(oly_dtype t, const double **v, int *n)
{
    if (t == OLY_BOOL) {
        *v = BOOL_VALS;
        *n = OLY_ARRAY_LEN(BOOL_VALS);
    } else if (oly_dtype_is_float(t)) {
        *v = FLOAT_VALS;
        *n = OLY_ARRAY_LEN(FLOAT_VALS);
    } else {
        *v = INT_VALS;
        *n = OLY_ARRAY_LEN(INT_VALS);
    }
}

static void store_val(oly_dtype t, double v, void *dst)
{
    oly_scalar s = {.dtype = OLY_FLOAT64, .v.f = v};
    if (!oly_dtype_is_float(t) && t != OLY_BOOL) {
        /* through int64/uint64 so the integer bit patterns wrap */
        if (v >= 9.2e18) s = (oly_scalar){.dtype = OLY_UINT64, .v.u = (uint64_t)v};
        else s = (oly_scalar){.dtype = OLY_INT64, .v.i = (int64_t)v};
    }
    oly_scalar_store(&s, t, dst);
}

/* p(params) on operands of dtypes in[] (n_in of them, rank 0): the program
 * p alone (a register program), and p beside a broadcast of operand 0 (so its
 * step runs through the one-step entry); NULL when the shape rule refuses. */
static oly_program *scalar_prog(const oly_prim *p, const void *params, const oly_dtype *dt,
                                int n_in, bool with_other)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_atom atoms[3];
    for (int i = 0; i < n_in; i++) {
        oly_aval a = tu_aval(dt[i], 0, NULL);
        oly_var *v;
        CHECK_OK(oly_builder_add_input(b, &a, &v));
        atoms[i] = oly_atom_var(v);
    }
    oly_var *o = NULL;
    if (oly_builder_append(b, p, atoms, n_in, params, NULL, 0, &o, 1, NULL) != OLY_OK) {
        oly_builder_free(b);
        return NULL;
    }
    oly_atom outs[2] = {oly_atom_var(o)};
    int n_out = 1;
    if (with_other) {
        oly_params_broadcast_in_dim bc = {.shape = ints(1, (int64_t[]){2})};
        oly_var *w = NULL;
        CHECK_OK(oly_builder_append(b, &oly__prim_broadcast_in_dim, atoms, 1, &bc, NULL, 0, &w,
                                    1, NULL));
        outs[n_out++] = oly_atom_var(w);
    }
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, outs, n_out, &prog));
    oly_builder_free(b);
    return prog;
}

/* The same op on rank-1 operands holding every combination (the kernel). */
static oly_program *vector_prog(const oly_prim *p, const void *params, const oly_dtype *dt,
                                int n_in, int64_t n)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_atom atoms[3];
    for (int i = 0; i < n_in; i++) {
        oly_aval a = tu_aval(dt[i], 1, &n);
        oly_var *v;
        CHECK_OK(oly_builder_add_input(b, &a, &v));
        atoms[i] = oly_atom_var(v);
    }
    oly_var *o = NULL;
    CHECK_OK(oly_builder_append(b, p, atoms, n_in, params, NULL, 0, &o, 1, NULL));
    oly_atom out = oly_atom_var(o);
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, &out, 1, &prog));
    oly_builder_free(b);
    return prog;
}

static bool same_element(oly_dtype t, const void *a, const void *b)
{
    size_t es = oly_dtype_size(t);
    if (memcmp(a, b, es) == 0) return true;
    if (oly_dtype_is_float(t)) { /* NaN payloads may differ; NaN-ness may not */
        double x = oly_scalar_load(t, a).v.f, y = oly_scalar_load(t, b).v.f;
        return isnan(x) && isnan(y);
    }
    return false;
}

/* Checks op(params) over every combination of special values: the kernel on
 * vectors against the register program and the one-step entry, element by
 * element. Returns whether the op had a one-element code. */
static bool check_scalar_op(const char *what, const oly_prim *p, const void *params,
                            const oly_dtype *dt, int n_in)
{
    oly_program *sp = scalar_prog(p, params, dt, n_in, false);
    if (!sp) return false; /* the shape rule refuses these dtypes */
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(sp, &exe));
    bool coded = exe->n_step == 1 && exe->step[0].scalar && exe->sprog;
    if (!coded) {
        oly_program_release(sp);
        return false;
    }
    oly_program *mixed = scalar_prog(p, params, dt, n_in, true);
    const oly_exe *mexe;
    CHECK_OK(oly__exec_get(mixed, &mexe));
    CHECK(!mexe->sprog && mexe->step[0].scalar);
    /* every combination of the operands' special values */
    const double *v[3];
    int nv[3], total = 1;
    for (int i = 0; i < n_in; i++) {
        vals_of(dt[i], &v[i], &nv[i]);
        total *= nv[i];
    }
    oly_array *vin[3];
    for (int i = 0; i < n_in; i++) {
        int64_t n = total;
        oly_aval a = tu_aval(dt[i], 1, &n);
        CHECK_OK(oly_array_new(&a, &vin[i]));
    }
    for (int e = 0; e < total; e++) {
        for (int i = 0, rest = e; i < n_in; i++) {
            store_val(dt[i], v[i][rest % nv[i]],
                      (char *)oly_array_mutable_data(vin[i]) + (size_t)e * oly_dtype_size(dt[i]));
            rest /= nv[i];
        }
    }
    oly_program *vp = vector_prog(p, params, dt, n_in, total);
    oly_array *vout = NULL;
    CHECK_OK(oly_program_run(vp, 0, vin, n_in, &vout, 1));
    oly_dtype ot = oly_array_aval(vout)->dtype;
    size_t oes = oly_dtype_size(ot);
    int bad = 0;
    for (int e = 0; e < total && bad < 3; e++) {
        oly_array *sin_[3];
        for (int i = 0; i < n_in; i++) {
            oly_aval a = tu_aval(dt[i], 0, NULL);
            CHECK_OK(oly_array_from_data(&a, (const char *)oly_array_data(vin[i]) +
                                                 (size_t)e * oly_dtype_size(dt[i]),
                                         &sin_[i]));
        }
        oly_array *r1 = NULL, *r2[2] = {NULL, NULL};
        CHECK_OK(oly_program_run(sp, 0, sin_, n_in, &r1, 1));
        CHECK_OK(oly_program_run(mixed, 0, sin_, n_in, r2, 2));
        const void *want = (const char *)oly_array_data(vout) + (size_t)e * oes;
        if (r1 && r2[0] &&
            (!same_element(ot, want, oly_array_data(r1)) ||
             !same_element(ot, want, oly_array_data(r2[0])))) {
            char args[256] = "";
            for (int i = 0; i < n_in; i++) {
                oly_scalar s = oly_scalar_load(dt[i], oly_array_data(sin_[i]));
                size_t l = strlen(args);
                snprintf(args + l, sizeof args - l, "%s%.17g", i ? ", " : "",
                         oly_dtype_is_float(dt[i]) ? s.v.f : (double)s.v.i);
            }
            CHECK_FAIL_("%s(%s) [%s]: one-element op differs from the kernel", what, args,
                        oly_dtype_name(dt[0]));
            bad++;
        }
        oly_array_release(r1);
        oly_array_release(r2[0]);
        oly_array_release(r2[1]);
        for (int i = 0; i < n_in; i++) oly_array_release(sin_[i]);
    }
    oly_array_release(vout);
    for (int i = 0; i < n_in; i++) oly_array_release(vin[i]);
    oly_program_release(vp);
    oly_program_release(mixed);
    oly_program_release(sp);
    return true;
}

TEST(scalar_ops_match_kernels)
{
    static const oly_dtype types[] = {OLY_BOOL,   OLY_INT8,   OLY_INT16,  OLY_INT32,
                                      OLY_INT64,  OLY_UINT8,  OLY_UINT32, OLY_UINT64,
                                      OLY_FLOAT16, OLY_FLOAT32, OLY_FLOAT64};
    const struct {
        const char *name;
        const oly_prim *p;
        int n_in;
    } rows[] = {
        {"neg", &oly__prim_neg, 1},   {"not", &oly__prim_not, 1},   {"sqrt", &oly__prim_sqrt, 1},
        {"add", &oly__prim_add, 2},   {"sub", &oly__prim_sub, 2},   {"mul", &oly__prim_mul, 2},
        {"div", &oly__prim_div, 2},   {"max", &oly__prim_max, 2},   {"min", &oly__prim_min, 2},
        {"and", &oly__prim_and, 2},   {"or", &oly__prim_or, 2},     {"xor", &oly__prim_xor, 2},
        {"eq", &oly__prim_eq, 2},     {"ne", &oly__prim_ne, 2},     {"lt", &oly__prim_lt, 2},
        {"le", &oly__prim_le, 2},     {"gt", &oly__prim_gt, 2},     {"ge", &oly__prim_ge, 2},
    };
    int coded = 0;
    for (int r = 0; r < OLY_ARRAY_LEN(rows); r++)
        for (int t = 0; t < OLY_ARRAY_LEN(types); t++) {
            oly_dtype dt[2] = {types[t], types[t]};
            coded += check_scalar_op(rows[r].name, rows[r].p, NULL, dt, rows[r].n_in);
        }
    /* select_n: bool or int32 which, two cases of each dtype */
    for (int t = 0; t < OLY_ARRAY_LEN(types); t++) {
        oly_dtype dt[3] = {OLY_BOOL, types[t], types[t]};
        coded += check_scalar_op("select_n", &oly__prim_select_n, NULL, dt, 3);
        dt[0] = OLY_INT32;
        coded += check_scalar_op("select_n", &oly__prim_select_n, NULL, dt, 3);
    }
    /* every conversion between these dtypes */
    for (int f = 0; f < OLY_ARRAY_LEN(types); f++)
        for (int t = 0; t < OLY_ARRAY_LEN(types); t++) {
            oly_params_convert cv = {.new_dtype = types[t]};
            coded += check_scalar_op("convert", &oly__prim_convert_element_type, &cv, &types[f],
                                     1);
        }
    /* the table covers what it says (scalar.c): a change that drops codes
     * shows here */
    CHECK(coded >= 240);
    if (coded < 240) fprintf(stderr, "    %d one-element codes checked\n", coded);
}

/* A program with a one-element step whose operand is a literal, a constant
 * and an input passed straight to an output: the register program's slots. */
TEST(scalar_program_slots)
{
    oly_builder *b;
    CHECK_OK(oly_builder_new(&b));
    oly_aval a = tu_aval(OLY_FLOAT64, 0, NULL);
    oly_var *x, *c;
    CHECK_OK(oly_builder_add_input(b, &a, &x));
    oly_array *cv = tu_scalar(OLY_FLOAT64, 2.5);
    CHECK_OK(oly_builder_add_const(b, cv, &c));
    oly_var *m = binary(b, &oly__prim_mul, oly_atom_var(x), oly_atom_var(c));
    oly_var *s = binary(b, &oly__prim_sub, oly_atom_var(m), lit(OLY_FLOAT64, 0.25));
    oly_atom outs[4] = {oly_atom_var(s), oly_atom_var(x), lit(OLY_INT32, 7), oly_atom_var(c)};
    oly_program *p = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 4, &p));
    oly_builder_free(b);
    const oly_exe *exe;
    CHECK_OK(oly__exec_get(p, &exe));
    CHECK(exe->sprog != NULL);
    oly_array *in = tu_scalar(OLY_FLOAT64, 4.0), *res[4] = {0};
    for (int rep = 0; rep < 2; rep++) {
        CHECK_OK(oly_program_run(p, 0, &in, 1, res, 4));
        CHECK_EQ(tu_get(res[0], 0), 9.75);
        CHECK_EQ(tu_get(res[1], 0), 4.0);
        CHECK_EQ(tu_get(res[2], 0), 7);
        CHECK_EQ(oly_array_aval(res[2])->dtype, OLY_INT32);
        CHECK_EQ(tu_get(res[3], 0), 2.5);
        for (int k = 0; k < 4; k++) oly_array_release(res[k]);
    }
    oly_array_release(in);
    oly_array_release(cv);
    oly_program_release(p);
}
