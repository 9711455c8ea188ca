/* test_collective.c — the collective rows (src/prims/collective.c) and vmap over
 * a named axis (src/trans/vmap.c).
 *
 * A collective cannot run on its own (its name is unbound: the kernel says
 * so), so rulecheck's per-element references do not apply. The checks here
 * run collectives the only way they run today, through
 * oly_program_vmap_named:
 *   - shape rules: output avals and the messages of bad params;
 *   - semantics: a one-equation program batched over axis "i" (size 3) on
 *     inputs X[j] = 10 j + c against hand-computed values, with the batch at
 *     axis 0, at the last axis and unbatched;
 *   - another name: batched over "j" first (the collective re-emitted with its
 *     dims shifted), then over "i", equals batching over "i" alone per j;
 *   - derivatives: the JVP of the linear rows batched over "i" is the batched
 *     row applied to the tangent, and the transpose rule passes the
 *     dot-product test <ct, L v> == <L^T ct, v> with L and L^T both batched
 *     over "i" (so psum's transpose is psum, JAX's reading);
 *   - the name reaching nested programs (pjit), inheritance ending with the
 *     batch, the unbound-name error at run time.
 * Every transformed program passes the verifier. */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}
#define P(T, ...) (&(T){__VA_ARGS__})

enum { N = 3 }; /* the size of axis i */

/* aval from the printer's form: "f64[2,3]". */
static oly_aval av(const char *s)
{
    oly_dtype t = strncmp(s, "i32", 3) == 0 ? OLY_INT32 : OLY_FLOAT64;
    int64_t dims[OLY_MAX_RANK];
    int rank = 0;
    const char *c = strchr(s, '[') + 1;
    while (*c && *c != ']') {
        dims[rank++] = strtoll(c, (char **)&c, 10);
        if (*c == ',') c++;
    }
    return tu_aval(t, rank, dims);
}

/* out = prim(in...) as a program; NULL (message printed) when the shape rule refuses. */
static oly_program *one(const oly_prim *p, const void *params, int n_in, const oly_aval *in)
{
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    oly_atom a[8];
    oly_var *o[8];
    int n_out = 0;
    CHECK_OK(oly_builder_new(&b));
    for (int i = 0; i < n_in; i++) {
        oly_var *v = NULL;
        CHECK_OK(oly_builder_add_input(b, &in[i], &v));
        a[i] = oly_atom_var(v);
    }
    oly_status s = oly_builder_append(b, p, a, n_in, params, NULL, 0, o, 8, &n_out);
    CHECK_OK(s);
    if (s == OLY_OK) {
        for (int k = 0; k < n_out; k++) a[k] = oly_atom_var(o[k]);
        CHECK_OK(oly_builder_finish(b, a, n_out, &prog));
    }
    oly_builder_free(b);
    return prog;
}

static oly_program *vmap_named(oly_program *p, const int *in_axes, int64_t size, const char *name,
                               const int *out_axes)
{
    oly_program *o = NULL;
    oly_status s = oly_program_vmap_named(p, in_axes, size, name, out_axes, &o);
    CHECK_OK(s);
    if (s == OLY_OK) CHECK_OK(oly_program_verify(o));
    return o;
}

/* Every input at axis ax (-1: unbatched), every output at 0. */
static oly_program *vmap_all(oly_program *p, int ax, int64_t size, const char *name)
{
    int ia[8], oa[8];
    for (int i = 0; i < 8; i++) ia[i] = ax, oa[i] = 0;
    return vmap_named(p, ia, size, name, oa);
}

static oly_array *run1(oly_program *p, oly_array *const *in, int n_in, int out_index)
{
    oly_array *out[8] = {0};
    int n_out = oly_program_num_outputs(p);
    oly_status s = oly_program_run(p, 0, in, n_in, out, n_out);
    CHECK_OK(s);
    if (s != OLY_OK) return NULL;
    for (int k = 0; k < n_out; k++)
        if (k != out_index) oly_array_release(out[k]);
    return out[out_index];
}

/* ---------------------------------------------------------------- shape rules */

typedef struct shape_case {
    const char *name;
    const oly_prim *prim;
    const void *params;
    int n_in;
    const char *in[2];
    const char *want;     /* output avals printed, or NULL when refused */
    oly_status err;       /* the refusal's status */
    const char *substr;   /* ... and part of its message */
} shape_case;

static const shape_case shape_cases[] = {
    {"psum", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), 2, {"f64[2,3]", "i32[]"},
     .want = "f64[2,3] i32[]"},
    {"psum_two_names", &oly__prim_psum, P(oly_params_psum, .axes = "('i', 'j')"), 1, {"f64[2]"},
     .want = "f64[2]"},
    {"psum_bool", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), 1, {"bool[2]"}, NULL,
     OLY_ERR_TYPE, "not bool"},
    {"psum_bad_names", &oly__prim_psum, P(oly_params_psum, .axes = "i"), 1, {"f64[2]"}, NULL,
     OLY_ERR_INVALID, "tuple text of axis names"},
    {"psum_not_tuple", &oly__prim_psum, P(oly_params_psum, .axes = "('i')"), 1, {"f64[2]"}, NULL,
     OLY_ERR_INVALID, "tuple text"},
    {"psum_empty", &oly__prim_psum, P(oly_params_psum, .axes = "()"), 1, {"f64[2]"}, NULL,
     OLY_ERR_INVALID, "tuple text"},
    {"pmax", &oly__prim_pmax, P(oly_params_psum, .axes = "('i',)"), 1, {"i32[4]"},
     .want = "i32[4]"},
    {"all_gather", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 1, .axis_name = "('i',)", .axis_size = 4),
     1, {"f64[2,3]"}, .want = "f64[2,4,3]"},
    {"all_gather_tiled", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 1, .axis_name = "('i',)", .axis_size = 4,
       .tiled = true), 1, {"f64[2,3]"}, .want = "f64[2,12]"},
    {"all_gather_dim_range", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 2, .axis_name = "('i',)", .axis_size = 4,
       .tiled = true), 1, {"f64[2,3]"}, NULL, OLY_ERR_INVALID, "outside [0, 1]"},
    {"all_gather_two_names", &oly__prim_all_gather,
     P(oly_params_all_gather, .axis_name = "('i', 'j')", .axis_size = 4), 1, {"f64[2]"}, NULL,
     OLY_ERR_INVALID, "must name one axis"},
    {"reduce_scatter", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = 4, .scatter_dimension = 1),
     1, {"f64[2,4,3]"}, .want = "f64[2,3]"},
    {"reduce_scatter_tiled", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = 4, .tiled = true), 1,
     {"f64[8,3]"}, .want = "f64[2,3]"},
    {"reduce_scatter_size", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = 4), 1, {"f64[3]"}, NULL,
     OLY_ERR_SHAPE, "must equal the axis size 4"},
    {"reduce_scatter_tiled_size", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = 4, .tiled = true), 1,
     {"f64[6]"}, NULL, OLY_ERR_SHAPE, "divisible"},
    {"ppermute", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 1), (1, 0))"), 1, {"f64[2]"},
     .want = "f64[2]"},
    {"ppermute_one_pair", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 1),)"), 1, {"f64[2]"},
     .want = "f64[2]"},
    {"ppermute_no_pair", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "()"), 1, {"f64[2]"},
     .want = "f64[2]"},
    {"ppermute_dup", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 1), (2, 1))"), 1, {"f64[2]"},
     NULL, OLY_ERR_INVALID, "must be unique"},
    {"ppermute_bad", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, -1),)"), 1, {"f64[2]"}, NULL,
     OLY_ERR_INVALID, "pairs of non-negative ints"},
    {"all_to_all", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = 2, .split_axis = 0,
       .concat_axis = 1), 1, {"f64[4,3]"}, .want = "f64[2,6]"},
    {"all_to_all_same_axis", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = 2, .split_axis = 1,
       .concat_axis = 1), 1, {"f64[4,6]"}, .want = "f64[4,6]"},
    {"all_to_all_divisible", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = 2, .split_axis = 1), 1,
     {"f64[4,3]"}, NULL, OLY_ERR_SHAPE, "not divisible"},
    {"axis_index", &oly__prim_axis_index, P(oly_params_axis_index, .axis_name = "('i',)"), 0,
     {NULL}, .want = "i32[]"},
};

TEST(collective_shape_rules)
{
    for (int k = 0; k < OLY_ARRAY_LEN(shape_cases); k++) {
        const shape_case *c = &shape_cases[k];
        oly_aval in[2];
        for (int i = 0; i < c->n_in; i++) {
            if (strncmp(c->in[i], "bool", 4) == 0) {
                int64_t d[1] = {2};
                in[i] = tu_aval(OLY_BOOL, 1, d);
            } else {
                in[i] = av(c->in[i]);
            }
        }
        oly_aval out[2];
        oly_shape_ctx sc = {.prim = c->prim, .params = c->params, .n_in = c->n_in, .in = in,
                            .n_out = c->prim->num_outputs ? c->n_in : 1};
        oly_status s = c->prim->shape(&sc, out);
        if (!c->want) {
            if (s != c->err || !strstr(oly_last_error(), c->substr))
                CHECK_FAIL_("%s: got %s '%s', want %s with '%s'", c->name, oly_status_name(s),
                            oly_last_error(), oly_status_name(c->err), c->substr);
            continue;
        }
        if (s != OLY_OK) {
            CHECK_FAIL_("%s: refused: %s", c->name, oly_last_error());
            continue;
        }
        char got[128] = "", one_aval[64];
        for (int j = 0; j < sc.n_out; j++) {
            oly_aval_format(one_aval, sizeof one_aval, &out[j]);
            if (j) strcat(got, " ");
            strcat(got, one_aval);
        }
        if (strcmp(got, c->want) != 0) CHECK_FAIL_("%s: %s, want %s", c->name, got, c->want);
    }
}

/* ---------------------------------------------------------------- semantics over axis i */

/* a with axis `axis` at index idx removed (a new array). */
static oly_array *take(const oly_array *a, int axis, int64_t idx)
{
    const oly_aval *aa = oly_array_aval(a);
    oly_aval r = *aa;
    r.rank--;
    for (int d = axis; d < r.rank; d++) r.dims[d] = aa->dims[d + 1];
    oly_array *out = NULL;
    if (oly_array_new(&r, &out) != OLY_OK) return NULL;
    size_t es = oly_dtype_size(aa->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= aa->dims[d];
    for (int d = axis + 1; d < aa->rank; d++) inner *= aa->dims[d];
    const char *src = oly_array_data(a);
    char *dst = oly_array_mutable_data(out);
    for (int64_t o = 0; o < outer; o++)
        memcpy(dst + (size_t)(o * inner) * es,
               src + (size_t)((o * aa->dims[axis] + idx) * inner) * es, (size_t)inner * es);
    return out;
}


/* X with dims (batch N at ax of rank+1 dims) and values 10 j + c, j the batch
 * index and c the element's flat index in the unbatched value. */
static oly_array *input_x(const oly_aval *a, int ax)
{
    int64_t dims[OLY_MAX_RANK], n = 1;
    int r = a->rank + 1;
    for (int d = 0, k = 0; d < r; d++) dims[d] = d == ax ? N : a->dims[k++];
    for (int d = 0; d < a->rank; d++) n *= a->dims[d];
    double *v = calloc((size_t)(N * n) + 1, sizeof *v);
    /* walk the batched array in its own order */
    int64_t total = N * n;
    for (int64_t f = 0; f < total; f++) {
        int64_t rem = f, idx[OLY_MAX_RANK] = {0};
        for (int d = r - 1; d >= 0; d--) {
            idx[d] = rem % dims[d];
            rem /= dims[d];
        }
        int64_t j = idx[ax], c = 0;
        for (int d = 0; d < r; d++)
            if (d != ax) c = c * dims[d] + idx[d];
        v[f] = 10.0 * (double)j + (double)c;
    }
    oly_array *x = tu_array(a->dtype, r, dims, v);
    free(v);
    return x;
}

typedef struct sem_case {
    const char *name;
    const oly_prim *prim;
    const void *params;
    const char *in;        /* one operand */
    int ax;                /* its batch axis, -1 unbatched */
    int n_want;
    double want[64];       /* the output, batched at 0 */
} sem_case;

static const sem_case sem_cases[] = {
    /* X = [[0, 1], [10, 11], [20, 21]] */
    {"psum", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), "f64[2]", 0, 6,
     {30, 33, 30, 33, 30, 33}},
    {"psum_batch_last", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), "f64[2]", 1, 6,
     {30, 33, 30, 33, 30, 33}},
    {"psum_unbatched", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), "f64[2]", -1, 6,
     {0, 3, 0, 3, 0, 3}}, /* unbatched x = [0, 1]: 3 x for every index */
    {"pmax", &oly__prim_pmax, P(oly_params_psum, .axes = "('i',)"), "f64[2]", 0, 6,
     {20, 21, 20, 21, 20, 21}},
    {"pmin_batch_last", &oly__prim_pmin, P(oly_params_psum, .axes = "('i',)"), "f64[2]", 1, 6,
     {0, 1, 0, 1, 0, 1}},
    {"pmin_unbatched", &oly__prim_pmin, P(oly_params_psum, .axes = "('i',)"), "f64[2]", -1, 6,
     {0, 1, 0, 1, 0, 1}},
    {"all_gather", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 0, .axis_name = "('i',)", .axis_size = N),
     "f64[2]", 0, 18, {0, 1, 10, 11, 20, 21, 0, 1, 10, 11, 20, 21, 0, 1, 10, 11, 20, 21}},
    {"all_gather_dim1_batch_last", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 1, .axis_name = "('i',)", .axis_size = N),
     "f64[2]", 1, 18, {0, 10, 20, 1, 11, 21, 0, 10, 20, 1, 11, 21, 0, 10, 20, 1, 11, 21}},
    {"all_gather_tiled", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 0, .axis_name = "('i',)", .axis_size = N,
       .tiled = true),
     "f64[2]", 0, 18, {0, 1, 10, 11, 20, 21, 0, 1, 10, 11, 20, 21, 0, 1, 10, 11, 20, 21}},
    {"all_gather_unbatched", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 0, .axis_name = "('i',)", .axis_size = N),
     "f64[2]", -1, 18, {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}},
    /* X[j] = [[10j, 10j+1], [10j+2, 10j+3], [10j+4, 10j+5]]: index k keeps row k of the sum */
    {"reduce_scatter", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N), "f64[3,2]", 0, 6,
     {30, 33, 36, 39, 42, 45}},
    {"reduce_scatter_dim1_batch_last", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N, .scatter_dimension = 1),
     "f64[2,3]", 2, 6, {30, 39, 33, 42, 36, 45}},
    /* X[j] = [10j .. 10j+5]: tiled blocks of 2 */
    {"reduce_scatter_tiled", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N, .tiled = true),
     "f64[6]", 0, 6, {30, 33, 36, 39, 42, 45}},
    {"reduce_scatter_unbatched", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N, .tiled = true),
     "f64[6]", -1, 6, {0, 3, 6, 9, 12, 15}},
    {"ppermute_rotate", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 1), (1, 2), (2, 0))"), "f64[2]",
     0, 6, {20, 21, 0, 1, 10, 11}},
    {"ppermute_partial_batch_last", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 2),)"), "f64[2]", 1, 6,
     {0, 0, 0, 0, 0, 1}},
    {"ppermute_partial_unbatched", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((1, 0), (0, 1))"), "f64[2]", -1, 6,
     {0, 1, 0, 1, 0, 0}},
    /* split 0 concat 0 on X[j] = [[10j, 10j+1], [10j+2, ...], [10j+4, ...]]:
     * index k receives row k of every X[j], in j order */
    {"all_to_all_0_0", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = N), "f64[3,2]", 0, 18,
     {0, 1, 10, 11, 20, 21, 2, 3, 12, 13, 22, 23, 4, 5, 14, 15, 24, 25}},
    /* split 1 concat 0 on X[j] = [[10j, 10j+1, 10j+2]]: index k gets column k of each */
    {"all_to_all_1_0_batch_last", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = N, .split_axis = 1,
       .concat_axis = 0),
     "f64[1,3]", 2, 9, {0, 10, 20, 1, 11, 21, 2, 12, 22}},
    /* split 0 concat 1 on X[j] = [10j, 10j+1, 10j+2] as f64[3,1]: index k gets [[X_0[k], X_1[k], X_2[k]]] */
    {"all_to_all_0_1_unbatched", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = N, .split_axis = 0,
       .concat_axis = 1),
     "f64[3,1]", -1, 9, {0, 0, 0, 1, 1, 1, 2, 2, 2}},
};

TEST(collective_vmap_named_semantics)
{
    for (int k = 0; k < OLY_ARRAY_LEN(sem_cases); k++) {
        const sem_case *c = &sem_cases[k];
        oly_aval in = av(c->in);
        oly_program *p = one(c->prim, c->params, 1, &in);
        oly_program *v = p ? vmap_all(p, c->ax, N, "i") : NULL;
        oly_array *x = input_x(&in, c->ax >= 0 ? c->ax : 0);
        if (c->ax < 0) { /* unbatched: the value of index 0 */
            oly_array *x0 = take(x, 0, 0);
            oly_array_release(x);
            x = x0;
        }
        oly_array *y = v && x ? run1(v, &x, 1, 0) : NULL;
        if (y) {
            CHECK_EQ(oly_array_aval(y)->dims[0], N);
            if (!tu_allclose(y, c->want, c->n_want, 0, 0)) CHECK_FAIL_("case %s", c->name);
        }
        oly_array_release(y);
        oly_array_release(x);
        oly_program_release(v);
        oly_program_release(p);
    }
}

TEST(collective_psum_several_operands_and_names)
{
    /* psum(x batched, y unbatched) over ('i', 'j'), batched over i: the sum
     * over i, then a psum over j that stays for an enclosing vmap over j. */
    oly_aval in[2] = {av("f64[2]"), av("f64[2]")};
    oly_program *p = one(&oly__prim_psum, P(oly_params_psum, .axes = "('i', 'j')"), 2, in);
    int ia[2] = {0, -1}, oa[2] = {0, 0};
    oly_program *v = p ? vmap_named(p, ia, N, "i", oa) : NULL;
    char *text = NULL;
    if (v) CHECK_OK(oly_program_print(v, &text));
    if (text && !strstr(text, "psum[axes=('j',)]")) CHECK_FAIL_("no psum over j left:\n%s", text);
    free(text);
    /* then over j (size 2): x batched at 0 over j, y unbatched */
    int ja[2] = {0, -1};
    oly_program *w = v ? vmap_named(v, ja, 2, "j", oa) : NULL;
    if (w) {
        int64_t d3[3] = {2, N, 2}, d1[1] = {2};
        double xv[12], yv[2] = {1, 2};
        for (int f = 0; f < 12; f++) xv[f] = f;
        oly_array *in_arr[2] = {tu_array(OLY_FLOAT64, 3, d3, xv), tu_array(OLY_FLOAT64, 1, d1, yv)};
        oly_array *out[2] = {0};
        CHECK_OK(oly_program_run(w, 0, in_arr, 2, out, 2));
        /* x: sum over j and i of x[j][i][c] = sum of evens / odds: 30, 36 */
        const double wx[] = {30, 36, 30, 36, 30, 36, 30, 36, 30, 36, 30, 36};
        /* y unbatched over both: times 3 * 2 */
        const double wy[] = {6, 12, 6, 12, 6, 12, 6, 12, 6, 12, 6, 12};
        if (out[0]) CHECK(tu_allclose(out[0], wx, 12, 0, 0));
        if (out[1]) CHECK(tu_allclose(out[1], wy, 12, 0, 0));
        for (int i = 0; i < 2; i++) oly_array_release(in_arr[i]), oly_array_release(out[i]);
    }
    oly_program_release(w);
    oly_program_release(v);
    oly_program_release(p);
}

TEST(collective_axis_index_and_unmapped_out_axes)
{
    oly_program *p = one(&oly__prim_axis_index, P(oly_params_axis_index, .axis_name = "('i',)"),
                         0, NULL);
    int oa[1] = {0};
    oly_program *v = p ? vmap_named(p, NULL, 4, "i", oa) : NULL;
    oly_array *y = v ? run1(v, NULL, 0, 0) : NULL;
    const double want[] = {0, 1, 2, 3};
    if (y) CHECK(tu_allclose(y, want, 4, 0, 0) && oly_array_aval(y)->dtype == OLY_INT32);
    oly_array_release(y);
    oly_program_release(v);
    /* unbatched over its own axis: out_axes -1 is an error naming the output */
    oly_program *bad = NULL;
    int none[1] = {-1};
    CHECK_ERR(oly_program_vmap_named(p, NULL, 4, "i", none, &bad), OLY_ERR_INVALID,
              "depends on the batched inputs");
    /* psum's result does not vary along its axis: out_axes -1 is fine */
    oly_aval in = av("f64[2]");
    oly_program *q = one(&oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), 1, &in);
    int ia[1] = {0};
    oly_program *w = q ? vmap_named(q, ia, N, "i", none) : NULL;
    oly_array *x = input_x(&in, 0);
    oly_array *sum = w && x ? run1(w, &x, 1, 0) : NULL;
    const double want_sum[] = {30, 33};
    if (sum) CHECK(oly_array_aval(sum)->rank == 1 && tu_allclose(sum, want_sum, 2, 0, 0));
    oly_array_release(sum);
    oly_array_release(x);
    oly_program_release(w);
    oly_program_release(q);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- another name */

typedef struct row_case {
    const char *name;
    const oly_prim *prim;
    const void *params;
    const char *in;
    bool linear;         /* JVP / transpose checks apply */
} row_case;

static const row_case row_cases[] = {
    {"psum", &oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), "f64[2,2]", true},
    {"pmax", &oly__prim_pmax, P(oly_params_psum, .axes = "('i',)"), "f64[2,2]", false},
    {"all_gather", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 1, .axis_name = "('i',)", .axis_size = N),
     "f64[2,2]", true},
    {"all_gather_tiled", &oly__prim_all_gather,
     P(oly_params_all_gather, .all_gather_dimension = 1, .axis_name = "('i',)", .axis_size = N,
       .tiled = true),
     "f64[2,2]", true},
    {"reduce_scatter", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N, .scatter_dimension = 1),
     "f64[2,3]", true},
    {"reduce_scatter_tiled", &oly__prim_reduce_scatter,
     P(oly_params_reduce_scatter, .axis_name = "('i',)", .axis_size = N, .scatter_dimension = 0,
       .tiled = true),
     "f64[6,2]", true},
    {"ppermute", &oly__prim_ppermute,
     P(oly_params_ppermute, .axis_name = "('i',)", .perm = "((0, 1), (2, 0))"), "f64[2,2]", true},
    {"all_to_all", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = N, .split_axis = 1,
       .concat_axis = 0),
     "f64[2,3]", true},
    {"all_to_all_same", &oly__prim_all_to_all,
     P(oly_params_all_to_all, .axis_name = "('i',)", .axis_size = N, .split_axis = 1,
       .concat_axis = 1),
     "f64[2,3]", true},
};

/* Batched over j (size 2, at axis ja) then over i == over i alone, per j. */
TEST(collective_batched_over_another_name)
{
    for (int k = 0; k < OLY_ARRAY_LEN(row_cases); k++) {
        const row_case *c = &row_cases[k];
        oly_aval in = av(c->in);
        oly_program *p = one(c->prim, c->params, 1, &in);
        if (!p) continue;
        oly_program *vi = vmap_all(p, 0, N, "i");
        for (int ja = 0; ja <= in.rank; ja += in.rank) { /* j first, then j last */
            int ia[1] = {ja}, oa[1] = {0};
            oly_program *vj = vmap_named(p, ia, 2, "j", oa);
            char *text = NULL;
            if (vj) CHECK_OK(oly_program_print(vj, &text));
            if (text && !strstr(text, c->prim->name))
                CHECK_FAIL_("%s: over j the collective should stay:\n%s", c->name, text);
            free(text);
            oly_program *vji = vj ? vmap_all(vj, 0, N, "i") : NULL;
            /* X: [N (i), then the value batched over j at ja] */
            oly_aval xa = in;
            xa.rank += 2;
            xa.dims[0] = N;
            for (int d = 0, s = 0; d < in.rank + 1; d++) xa.dims[d + 1] = d == ja ? 2 : in.dims[s++];
            oly_array *x = rc_random(&xa, 0, 0, false, 11), *xi = NULL;
            oly_array *both = vji ? run1(vji, &x, 1, 0) : NULL; /* [N, 2, ...] */
            for (int64_t j = 0; both && vi && j < 2; j++) {
                xi = take(x, ja + 1, j); /* [N, ...] at this j */
                oly_array *want = run1(vi, &xi, 1, 0);
                oly_array *got = take(both, 1, j);
                char what[96];
                snprintf(what, sizeof what, "%s (j at %d) j=%lld", c->name, ja, (long long)j);
                if (want && got) rc_allclose(what, got, want, 1e-12, 1e-12);
                oly_array_release(want);
                oly_array_release(got);
                oly_array_release(xi);
            }
            oly_array_release(both);
            oly_array_release(x);
            oly_program_release(vji);
            oly_program_release(vj);
        }
        oly_program_release(vi);
        oly_program_release(p);
    }
}

/* ---------------------------------------------------------------- derivatives */

static double dot(const oly_array *a, const oly_array *b)
{
    double s = 0;
    int64_t n = 1;
    const oly_aval *aa = oly_array_aval(a);
    for (int d = 0; d < aa->rank; d++) n *= aa->dims[d];
    for (int64_t f = 0; f < n; f++) s += tu_get(a, f) * tu_get(b, f);
    return s;
}

TEST(collective_jvp_and_transpose_under_named_vmap)
{
    for (int k = 0; k < OLY_ARRAY_LEN(row_cases); k++) {
        const row_case *c = &row_cases[k];
        oly_aval in = av(c->in);
        oly_program *p = one(c->prim, c->params, 1, &in);
        if (!p) continue;
        bool nz[1] = {true}, nz_out[1];
        oly_program *j = NULL;
        if (!c->linear) { /* pmax, pmin: no JVP, as in JAX */
            CHECK_ERR(oly_program_jvp(p, nz, &j, nz_out), OLY_ERR_UNSUPPORTED, "no JVP rule");
            oly_program_release(p);
            continue;
        }
        /* jvp, batched over i: tangent out == the batched row on the tangent */
        CHECK_OK(oly_program_jvp(p, nz, &j, nz_out));
        oly_program *vj = j ? vmap_all(j, 0, N, "i") : NULL;
        oly_program *vp = vmap_all(p, 0, N, "i");
        oly_aval xa = in;
        xa.rank++;
        xa.dims[0] = N;
        for (int d = 0; d < in.rank; d++) xa.dims[d + 1] = in.dims[d];
        oly_array *xt[2] = {rc_random(&xa, 0, 0, false, 1), rc_random(&xa, 0, 0, false, 2)};
        oly_array *tan = vj ? run1(vj, xt, 2, 1) : NULL;
        oly_array *want = vp ? run1(vp, &xt[1], 1, 0) : NULL;
        if (tan && want) rc_allclose(c->name, tan, want, 1e-12, 1e-12);
        oly_array_release(tan);
        oly_array_release(want);
        /* the dot-product test of the transpose rule, both sides batched over i */
        oly_program *t = NULL;
        CHECK_OK(oly_program_transpose(p, 0, &t));
        oly_program *vt = t ? vmap_all(t, 0, N, "i") : NULL;
        oly_array *lv = vp ? run1(vp, &xt[0], 1, 0) : NULL;
        oly_array *ct = lv ? rc_random(oly_array_aval(lv), 0, 0, false, 3) : NULL;
        oly_array *ltct = vt && ct ? run1(vt, &ct, 1, 0) : NULL;
        if (lv && ltct) {
            double a = dot(ct, lv), b = dot(ltct, xt[0]);
            if (fabs(a - b) > 1e-9 * (1 + fabs(a)))
                CHECK_FAIL_("%s: <ct, L v> = %.17g but <L^T ct, v> = %.17g", c->name, a, b);
        }
        /* linearize + transpose goes through the rows' JVP and transpose too */
        oly_program *prim = NULL, *lin = NULL;
        int n_res = 0;
        bool nzo[1];
        CHECK_OK(oly_program_linearize(p, nz, &prim, &lin, &n_res, nzo));
        if (lin) CHECK_EQ(n_res, 0);
        oly_program *lt = NULL;
        if (lin && n_res == 0) CHECK_OK(oly_program_transpose(lin, 0, &lt));
        oly_program *vlt = lt ? vmap_all(lt, 0, N, "i") : NULL;
        oly_array *ltct2 = vlt && ct ? run1(vlt, &ct, 1, 0) : NULL;
        if (ltct && ltct2) rc_allclose(c->name, ltct2, ltct, 1e-12, 1e-12);
        oly_array_release(ltct2);
        oly_program_release(vlt);
        oly_program_release(lt);
        oly_program_release(prim);
        oly_program_release(lin);
        oly_array_release(ltct);
        oly_array_release(ct);
        oly_array_release(lv);
        oly_program_release(vt);
        oly_program_release(t);
        oly_array_release(xt[0]);
        oly_array_release(xt[1]);
        oly_program_release(vp);
        oly_program_release(vj);
        oly_program_release(j);
        oly_program_release(p);
    }
}

TEST(collective_psum_transpose_is_psum)
{
    /* JAX's reading: psum transposes to psum over the same axes */
    oly_aval in[2] = {av("f64[2]"), av("f64[]")};
    oly_program *p = one(&oly__prim_psum, P(oly_params_psum, .axes = "('i', 'k')"), 2, in);
    oly_program *t = NULL;
    if (p) CHECK_OK(oly_program_transpose(p, 0, &t));
    char *text = NULL;
    if (t) CHECK_OK(oly_program_print(t, &text));
    if (text && !strstr(text, "psum[axes=('i', 'k')]")) CHECK_FAIL_("transpose:\n%s", text);
    free(text);
    oly_program_release(t);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- nesting and errors */

TEST(collective_name_reaches_nested_programs)
{
    /* pjit(x) { axis_index(i) + x } with x unbatched: the name reaches the
     * nested program (oly_program_vmap inherits it inside call_batch) */
    oly_aval s = av("i32[]");
    oly_builder *b = NULL;
    oly_var *x = NULL, *o[2];
    oly_program *inner = NULL, *outer = NULL;
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    CHECK_OK(oly_builder_append(b, &oly__prim_axis_index,
                                NULL, 0, P(oly_params_axis_index, .axis_name = "('i',)"), NULL, 0,
                                o, 1, NULL));
    oly_atom sum_in[2] = {oly_atom_var(o[0]), oly_atom_var(x)};
    CHECK_OK(oly_builder_append(b, &oly__prim_add, sum_in, 2, NULL, NULL, 0, &o[1], 1, NULL));
    oly_atom res = oly_atom_var(o[1]);
    CHECK_OK(oly_builder_finish(b, &res, 1, &inner));
    oly_builder_free(b);
    CHECK_OK(oly_builder_new(&b));
    CHECK_OK(oly_builder_add_input(b, &s, &x));
    oly_atom xa = oly_atom_var(x);
    CHECK_OK(oly_builder_append(b, &oly__prim_pjit, &xa, 1,
                                P(oly_params_call, .name = "f", .n_out = 1), &inner, 1, o, 1,
                                NULL));
    res = oly_atom_var(o[0]);
    CHECK_OK(oly_builder_finish(b, &res, 1, &outer));
    oly_builder_free(b);
    int ia[1] = {-1}, oa[1] = {0};
    oly_program *v = outer ? vmap_named(outer, ia, 4, "i", oa) : NULL;
    oly_array *x5 = tu_scalar(OLY_INT32, 5);
    oly_array *y = v ? run1(v, &x5, 1, 0) : NULL;
    const double want[] = {5, 6, 7, 8};
    if (y) CHECK(tu_allclose(y, want, 4, 0, 0));
    oly_array_release(y);
    oly_program_release(v);
    /* the inheritance ends with the batch: an unnamed vmap afterwards leaves
     * the collective in place, and running it is the unbound-name error */
    int ma[1] = {0};
    v = outer ? vmap_named(outer, ma, 4, NULL, oa) : NULL;
    oly_array *xs = tu_array(OLY_INT32, 1, (int64_t[]){4}, NULL);
    oly_array *out[1] = {0};
    if (v)
        CHECK_ERR(oly_program_run(v, 0, &xs, 1, out, 1), OLY_ERR_INVALID,
                  "axis_index: unbound axis name ('i',)");
    oly_array_release(xs);
    oly_array_release(x5);
    oly_program_release(v);
    oly_program_release(outer);
    oly_program_release(inner);
}

TEST(collective_unbound_at_run_time)
{
    oly_aval in = av("f64[2]");
    oly_program *p = one(&oly__prim_psum, P(oly_params_psum, .axes = "('i',)"), 1, &in);
    oly_array *x = tu_array(OLY_FLOAT64, 1, (int64_t[]){2}, NULL), *y = NULL;
    if (p)
        CHECK_ERR(oly_program_run(p, 0, &x, 1, &y, 1), OLY_ERR_INVALID,
                  "psum: unbound axis name ('i',): a collective runs only inside a pmap or a vmap");
    CHECK(y == NULL);
    /* batched over another name it stays a psum, still unbound */
    oly_program *v = p ? vmap_all(p, 0, N, "j") : NULL;
    oly_array *xs = input_x(&in, 0);
    if (v)
        CHECK_ERR(oly_program_run(v, 0, &xs, 1, &y, 1), OLY_ERR_INVALID, "unbound axis name");
    /* a program traced with another axis size is refused by name */
    oly_aval g = av("f64[2]");
    oly_program *ag = one(&oly__prim_all_gather,
                          P(oly_params_all_gather, .axis_name = "('i',)", .axis_size = 5), 1, &g);
    oly_program *bad = NULL;
    int ia[1] = {0}, oa[1] = {0};
    if (ag)
        CHECK_ERR(oly_program_vmap_named(ag, ia, N, "i", oa, &bad), OLY_ERR_SHAPE,
                  "traced with axis ('i',) of size 5, but vmap binds it with size 3");
    oly_program_release(ag);
    oly_array_release(xs);
    oly_program_release(v);
    oly_array_release(x);
    oly_program_release(p);
}
