/* test_random.c — the threefry2x32 row (src/prims/random.c) and its kernel
 * (src/cpu/random.c): Random123's published known-answer vectors for
 * threefry2x32_20, agreement with a plain one-element reference written here
 * (every length around the vector width, broadcast keys, both the AVX2 and the
 * generic loop), a threaded split of the work, the kernel writing over its
 * input, the shape rule's errors, and vmap by rulecheck. */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include "trans/trans.h"

/* Threefry-2x32-20 one pair at a time, written from the specification
 * (a loop over five groups of four rounds), independent of the kernel's
 * unrolled form. */
static void ref_threefry(uint32_t k0, uint32_t k1, uint32_t x[2])
{
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
    x[0] += ks[0];
    x[1] += ks[1];
    for (int g = 0; g < 5; g++) {
        for (int r = 0; r < 4; r++) {
            int s = rot[g % 2][r];
            x[0] += x[1];
            x[1] = (x[1] << s) | (x[1] >> (32 - s));
            x[1] ^= x[0];
        }
        x[0] += ks[(g + 1) % 3];
        x[1] += ks[(g + 2) % 3] + (uint32_t)(g + 1);
    }
}

static oly_array *u32_array(int64_t n, const uint32_t *v)
{
    double *d = calloc((size_t)(n > 0 ? n : 1), sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = v[i];
    oly_array *a = tu_array(OLY_UINT32, 1, &n, d);
    free(d);
    return a;
}

static uint32_t u32_at(const oly_array *a, int64_t i) { return ((const uint32_t *)oly_array_data(a))[i]; }

/* Random123's known answers (kat_vectors, threefry2x32_20). */
static const struct {
    uint32_t k0, k1, x0, x1, y0, y1;
} kat[] = {
    {0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x1cb996fcu, 0xbb002be7u},
    {0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u, 0xc4923a9cu, 0x483df7a0u},
};

TEST(random_threefry_known_answers)
{
    for (int t = 0; t < OLY_ARRAY_LEN(kat); t++) {
        oly_array *in[4] = {tu_scalar(OLY_UINT32, kat[t].k0), tu_scalar(OLY_UINT32, kat[t].k1),
                            tu_scalar(OLY_UINT32, kat[t].x0), tu_scalar(OLY_UINT32, kat[t].x1)};
        oly_array *out[2] = {0};
        CHECK_OK(tu_run_kernel(&oly__prim_threefry2x32, NULL, in, 4, out, 2, NULL));
        if (out[0] && out[1]) {
            CHECK_EQ(u32_at(out[0], 0), kat[t].y0);
            CHECK_EQ(u32_at(out[1], 0), kat[t].y1);
            CHECK_EQ(oly_array_aval(out[0])->rank, 0);
        }
        uint32_t x[2] = {kat[t].x0, kat[t].x1}; /* the reference agrees too */
        ref_threefry(kat[t].k0, kat[t].k1, x);
        CHECK_EQ(x[0], kat[t].y0);
        CHECK_EQ(x[1], kat[t].y1);
        for (int i = 0; i < 4; i++) oly_array_release(in[i]);
        for (int i = 0; i < 2; i++) oly_array_release(out[i]);
    }
}

/* n elements with operand k broadcast (rank 0) where bmask has bit k; checked
 * against the reference element by element. */
static void check_against_reference(int64_t n, unsigned bmask, uint32_t seed)
{
    uint32_t *v[4];
    oly_array *in[4];
    for (int k = 0; k < 4; k++) {
        v[k] = calloc((size_t)(n > 0 ? n : 1), sizeof(uint32_t));
        uint32_t s = seed * 2654435761u + (uint32_t)k * 40503u + 1;
        for (int64_t i = 0; i < n; i++) v[k][i] = s = s * 1664525u + 1013904223u;
        in[k] = (bmask >> k & 1) ? tu_scalar(OLY_UINT32, v[k][0]) : u32_array(n, v[k]);
    }
    oly_array *out[2] = {0};
    CHECK_OK(tu_run_kernel(&oly__prim_threefry2x32, NULL, in, 4, out, 2, NULL));
    int bad = 0;
    for (int64_t i = 0; out[0] && i < n && bad < 3; i++) {
        uint32_t x[2];
        uint32_t kk[4];
        for (int k = 0; k < 4; k++) kk[k] = v[k][(bmask >> k & 1) ? 0 : i];
        x[0] = kk[2];
        x[1] = kk[3];
        ref_threefry(kk[0], kk[1], x);
        if (u32_at(out[0], i) != x[0] || u32_at(out[1], i) != x[1]) {
            CHECK_FAIL_("n=%lld bcast=%x element %lld: got (%08x, %08x), want (%08x, %08x)",
                        (long long)n, bmask, (long long)i, u32_at(out[0], i), u32_at(out[1], i),
                        x[0], x[1]);
            bad++;
        }
    }
    for (int k = 0; k < 4; k++) {
        oly_array_release(in[k]);
        free(v[k]);
    }
    oly_array_release(out[0]);
    oly_array_release(out[1]);
}

/* src/cpu/random.c: 0 the best loop the CPU has, 1 the portable one, 2 AVX2 at most. */
extern int oly__cpu_threefry_loop_cap;

/* Lengths around the 32-lane step (tails of every size) and every pattern of
 * broadcast operands, on each loop this CPU can run (AVX-512, AVX2, portable). */
TEST(random_threefry_matches_reference)
{
    for (int cap = 0; cap < 3; cap++) {
        oly__cpu_threefry_loop_cap = cap;
        static const int64_t lens[] = {1, 2, 7, 8, 9, 31, 32, 33, 64, 100, 131};
        for (int li = 0; li < OLY_ARRAY_LEN(lens); li++)
            for (unsigned bmask = 0; bmask < 16; bmask++)
                if (bmask != 15 || lens[li] == 1)
                    check_against_reference(lens[li], bmask, (uint32_t)(li * 16 + bmask));
    }
    oly__cpu_threefry_loop_cap = 0;
}

/* A rank-0 key against a block of counters: every lane gets the KAT answer. */
TEST(random_threefry_broadcast_key_kat)
{
    enum { N = 37 };
    uint32_t x0[N], x1[N];
    for (int i = 0; i < N; i++) x0[i] = kat[2].x0, x1[i] = kat[2].x1;
    oly_array *in[4] = {tu_scalar(OLY_UINT32, kat[2].k0), tu_scalar(OLY_UINT32, kat[2].k1),
                        u32_array(N, x0), u32_array(N, x1)};
    oly_array *out[2] = {0};
    CHECK_OK(tu_run_kernel(&oly__prim_threefry2x32, NULL, in, 4, out, 2, NULL));
    for (int i = 0; out[0] && i < N; i++) {
        CHECK_EQ(u32_at(out[0], i), kat[2].y0);
        CHECK_EQ(u32_at(out[1], i), kat[2].y1);
    }
    CHECK_EQ(oly_array_aval(out[0])->dims[0], N);
    for (int i = 0; i < 4; i++) oly_array_release(in[i]);
    for (int i = 0; i < 2; i++) oly_array_release(out[i]);
}

/* The kernel's ith/nth split: three threads' shares cover every element
 * exactly once (lengths that split unevenly into vectors). */
TEST(random_threefry_thread_split)
{
    enum { N = 53 };
    uint32_t k0 = 7, k1 = 9, x0[N], x1[N], y0[N], y1[N];
    for (int i = 0; i < N; i++) x0[i] = (uint32_t)i, x1[i] = (uint32_t)(i + N), y0[i] = y1[i] = 0;
    const void *in[4] = {&k0, &k1, x0, x1};
    void *out[2] = {y0, y1};
    int64_t dn = N;
    oly_aval s = tu_aval(OLY_UINT32, 0, NULL), v = tu_aval(OLY_UINT32, 1, &dn);
    oly_aval in_aval[4] = {s, s, v, v}, out_aval[2] = {v, v};
    const oly_cpu_kernel *k = oly__cpu_kernel(&oly__prim_threefry2x32);
    CHECK(k && k->fn);
    for (int ith = 0; k && ith < 3; ith++) {
        oly_kernel_ctx kc = {.n_in = 4, .in = in, .in_aval = in_aval, .n_out = 2, .out = out,
                             .out_aval = out_aval, .ith = ith, .nth = 3};
        CHECK_OK(k->fn(&kc));
    }
    for (int i = 0; i < N; i++) {
        uint32_t x[2] = {x0[i], x1[i]};
        ref_threefry(k0, k1, x);
        CHECK_EQ(y0[i], x[0]);
        CHECK_EQ(y1[i], x[1]);
    }
}

/* Through the executor, with key0 an intermediate of the output's shape that
 * dies at threefry2x32 (so output 0 may be written over it). */
TEST(random_threefry_program_inplace)
{
    enum { N = 21 };
    int64_t n = N;
    oly_aval v = tu_aval(OLY_UINT32, 1, &n);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_var *vin[4];
    oly_atom in[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(oly_builder_add_input(b, &v, &vin[i]));
        in[i] = oly_atom_var(vin[i]);
    }
    oly_var *kv = NULL;
    int nk = 0;
    oly_atom xo[2] = {in[0], in[0]};
    CHECK_OK(oly_builder_append(b, &oly__prim_xor, xo, 2, NULL, NULL, 0, &kv, 1, &nk));
    oly_atom args[4] = {oly_atom_var(kv), in[1], in[2], in[3]}; /* key0 = x ^ x = 0 */
    oly_var *outv[2];
    int no = 0;
    CHECK_OK(oly_builder_append(b, &oly__prim_threefry2x32, args, 4, NULL, NULL, 0, outv, 2, &no));
    CHECK_EQ(no, 2);
    oly_atom outs[2] = {oly_atom_var(outv[0]), oly_atom_var(outv[1])};
    oly_program *prog = NULL;
    CHECK_OK(oly_builder_finish(b, outs, 2, &prog));
    oly_builder_free(b);
    uint32_t vals[4][N];
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 4; k++) vals[k][i] = (uint32_t)(i * 4 + k) * 0x9E3779B9u;
    oly_array *arr[4] = {u32_array(N, vals[0]), u32_array(N, vals[1]), u32_array(N, vals[2]),
                         u32_array(N, vals[3])};
    oly_array *res[2] = {0};
    CHECK_OK(oly_program_run(prog, 0, arr, 4, res, 2));
    for (int i = 0; res[0] && i < N; i++) {
        uint32_t x[2] = {vals[2][i], vals[3][i]};
        ref_threefry(0, vals[1][i], x);
        CHECK_EQ(u32_at(res[0], i), x[0]);
        CHECK_EQ(u32_at(res[1], i), x[1]);
    }
    for (int i = 0; i < 4; i++) oly_array_release(arr[i]);
    for (int i = 0; i < 2; i++) oly_array_release(res[i]);
    oly_program_release(prog);
}

TEST(random_threefry_shape_errors)
{
    int64_t d3 = 3, d4 = 4;
    oly_aval u = tu_aval(OLY_UINT32, 0, NULL), u3 = tu_aval(OLY_UINT32, 1, &d3),
             u4 = tu_aval(OLY_UINT32, 1, &d4), i3 = tu_aval(OLY_INT32, 1, &d3);
    oly_aval out[2];
    oly_shape_ctx sc = {.prim = &oly__prim_threefry2x32, .n_in = 4, .n_out = 2};
    oly_aval ok[4] = {u, u, u3, u3};
    sc.in = ok;
    CHECK_OK(oly__prim_threefry2x32.shape(&sc, out));
    CHECK_EQ(out[0].rank, 1);
    CHECK_EQ(out[1].dims[0], 3);
    CHECK_EQ(out[1].dtype, OLY_UINT32);
    oly_aval bad_type[4] = {u, u, i3, u3};
    sc.in = bad_type;
    CHECK_ERR(oly__prim_threefry2x32.shape(&sc, out), OLY_ERR_TYPE, "operand x0 must be uint32");
    oly_aval bad_shape[4] = {u3, u, u3, u4};
    sc.in = bad_shape;
    CHECK_ERR(oly__prim_threefry2x32.shape(&sc, out), OLY_ERR_SHAPE, "operand x1 is u32[4]");
    sc.in = ok;
    sc.n_in = 3;
    CHECK_ERR(oly__prim_threefry2x32.shape(&sc, out), OLY_ERR_INVALID, "expected 4 operands");
}

/* vmap against a loop (both outputs), every operand pattern rulecheck walks;
 * integer outputs have no tangents and the row is not linear. */
TEST(random_threefry_rules)
{
    const rc_case cases[] = {
        {.prim = "threefry2x32", .n_in = 4,
         .in = {RC_AVAL(OLY_UINT32, 3, 4), RC_AVAL(OLY_UINT32, 3, 4), RC_AVAL(OLY_UINT32, 3, 4),
                RC_AVAL(OLY_UINT32, 3, 4)}},
        {.prim = "threefry2x32", .n_in = 4,
         .in = {RC_SCALAR(OLY_UINT32), RC_SCALAR(OLY_UINT32), RC_AVAL(OLY_UINT32, 5),
                RC_AVAL(OLY_UINT32, 5)}},
        {.prim = "threefry2x32", .n_in = 4,
         .in = {RC_SCALAR(OLY_UINT32), RC_SCALAR(OLY_UINT32), RC_SCALAR(OLY_UINT32),
                RC_SCALAR(OLY_UINT32)}},
    };
    for (int i = 0; i < OLY_ARRAY_LEN(cases); i++) CHECK(rc_check_vmap(&cases[i]));
    const oly_prim *p = oly_prim_lookup("threefry2x32");
    CHECK(p == &oly__prim_threefry2x32);
    CHECK(p->jvp == oly__jvp_zero);
    CHECK(!p->transpose && (p->no_rule & OLY_RULE_TRANSPOSE));
}
