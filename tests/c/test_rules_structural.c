/* test_rules_structural.c — batch, JVP and transpose rules of the structural,
 * reduction and dot_general rows (structural.c, reduce.c, linalg.c).
 *
 * A table of cases (primitive, params, input avals) runs through rulecheck
 * (rulecheck.h): vmap against a loop over batch elements, jvp against central
 * finite differences, linearize + transpose by the dot-product test, and each
 * linear row's own transpose rule directly. Inputs are float64 so finite
 * differences are accurate. Semantics that finite differences cannot see (ties
 * in max/min, zeros in products, batched start indices, batched padding
 * values) have direct tests below the table. */
#include "rulecheck.h"
#include "test.h"
#include "testutil.h"

#include "trans/trans.h"

#define INTS(...) {.n = (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), .v = {__VA_ARGS__}}
#define NOINTS {.n = 0}

enum { MAX_IN = 4 };

/* Input flags: ZEROS draws float inputs from the whole numbers {-1, 0, 1}, so
 * products see exact zeros (they are multilinear: finite differences stay exact). */
enum { ZEROS = 1 };

typedef struct rcase {
    const char *name;
    const oly_prim *prim;
    const void *params;
    int n_in;
    const char *in[MAX_IN]; /* avals in the printer's form: "f64[2,3]", "i32[]" */
    int flags;
} rcase;

#define P(T, ...) (&(T){__VA_ARGS__})

static const rcase cases[] = {
    /* broadcast_in_dim */
    {"bid_new_leading", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(2, 3), .broadcast_dimensions = INTS(1)), 1,
     {"f64[3]"}, 0},
    {"bid_expand_size1", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(4, 2, 3), .broadcast_dimensions = INTS(1, 2)), 1,
     {"f64[1,3]"}, 0},
    {"bid_scalar", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(2, 2), .broadcast_dimensions = NOINTS), 1,
     {"f64[]"}, 0},
    {"bid_middle", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(2, 5, 3), .broadcast_dimensions = INTS(0, 2)), 1,
     {"f64[2,3]"}, 0},
    {"bid_zero_size", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(2, 0), .broadcast_dimensions = INTS(0, 1)), 1,
     {"f64[2,1]"}, 0},
    /* reshape */
    {"reshape_2d", &oly__prim_reshape, P(oly_params_reshape, .new_sizes = INTS(3, 2)), 1,
     {"f64[2,3]"}, 0},
    {"reshape_merge", &oly__prim_reshape, P(oly_params_reshape, .new_sizes = INTS(6, 4)), 1,
     {"f64[2,3,4]"}, 0},
    {"reshape_units", &oly__prim_reshape, P(oly_params_reshape, .new_sizes = INTS(1, 2, 3, 1)), 1,
     {"f64[6]"}, 0},
    {"reshape_to_scalar", &oly__prim_reshape, P(oly_params_reshape, .new_sizes = NOINTS), 1,
     {"f64[1,1]"}, 0},
    {"reshape_zero", &oly__prim_reshape, P(oly_params_reshape, .new_sizes = INTS(3, 0)), 1,
     {"f64[0,3]"}, 0},
    /* transpose */
    {"transpose_3d", &oly__prim_transpose, P(oly_params_transpose, .permutation = INTS(2, 0, 1)),
     1, {"f64[2,3,4]"}, 0},
    {"transpose_2d", &oly__prim_transpose, P(oly_params_transpose, .permutation = INTS(1, 0)), 1,
     {"f64[2,3]"}, 0},
    {"transpose_ident", &oly__prim_transpose, P(oly_params_transpose, .permutation = INTS(0, 1, 2)),
     1, {"f64[2,3,4]"}, 0},
    /* squeeze, expand_dims */
    {"squeeze_neg", &oly__prim_squeeze, P(oly_params_dims, .dimensions = INTS(0, -1)), 1,
     {"f64[1,3,1]"}, 0},
    {"squeeze_mid", &oly__prim_squeeze, P(oly_params_dims, .dimensions = INTS(1)), 1,
     {"f64[2,1,3]"}, 0},
    {"squeeze_all", &oly__prim_squeeze, P(oly_params_dims, .dimensions = INTS(0, 1)), 1,
     {"f64[1,1]"}, 0},
    {"expand_front", &oly__prim_expand_dims, P(oly_params_dims, .dimensions = INTS(0)), 1,
     {"f64[2,3]"}, 0},
    {"expand_neg", &oly__prim_expand_dims, P(oly_params_dims, .dimensions = INTS(-1)), 1,
     {"f64[2,3]"}, 0},
    {"expand_two", &oly__prim_expand_dims, P(oly_params_dims, .dimensions = INTS(3, 1)), 1,
     {"f64[2,3]"}, 0},
    /* rev */
    {"rev_one", &oly__prim_rev, P(oly_params_dims, .dimensions = INTS(1)), 1, {"f64[2,3]"}, 0},
    {"rev_neg", &oly__prim_rev, P(oly_params_dims, .dimensions = INTS(0, -1)), 1,
     {"f64[2,3,4]"}, 0},
    {"rev_none", &oly__prim_rev, P(oly_params_dims, .dimensions = NOINTS), 1, {"f64[3]"}, 0},
    /* slice */
    {"slice_plain", &oly__prim_slice,
     P(oly_params_slice, .start_indices = INTS(1, 0), .limit_indices = INTS(4, 6),
       .strides = NOINTS),
     1, {"f64[5,6]"}, 0},
    {"slice_strided", &oly__prim_slice,
     P(oly_params_slice, .start_indices = INTS(0, 1), .limit_indices = INTS(7, 5),
       .strides = INTS(3, 2)),
     1, {"f64[7,5]"}, 0},
    {"slice_stride_tail", &oly__prim_slice,
     P(oly_params_slice, .start_indices = INTS(1), .limit_indices = INTS(6), .strides = INTS(2)),
     1, {"f64[8]"}, 0},
    {"slice_empty", &oly__prim_slice,
     P(oly_params_slice, .start_indices = INTS(2, 0), .limit_indices = INTS(2, 3),
       .strides = INTS(2, 1)),
     1, {"f64[4,3]"}, 0},
    /* dynamic_slice, dynamic_update_slice: index values are drawn from [-2, 5]
     * (so clamping is exercised) */
    {"dslice_2d", &oly__prim_dynamic_slice, P(oly_params_dynamic_slice, .slice_sizes = INTS(2, 3)),
     3, {"f64[5,4]", "i32[]", "i32[]"}, 0},
    {"dslice_1d_i64", &oly__prim_dynamic_slice, P(oly_params_dynamic_slice, .slice_sizes = INTS(3)),
     2, {"f64[6]", "i64[]"}, 0},
    {"dslice_full", &oly__prim_dynamic_slice, P(oly_params_dynamic_slice, .slice_sizes = INTS(2, 0)),
     3, {"f64[2,3]", "i32[]", "i32[]"}, 0},
    {"dus_2d", &oly__prim_dynamic_update_slice, NULL, 4,
     {"f64[5,4]", "f64[2,3]", "i32[]", "i32[]"}, 0},
    {"dus_1d", &oly__prim_dynamic_update_slice, NULL, 3, {"f64[6]", "f64[6]", "i32[]"}, 0},
    /* concatenate */
    {"concat_0", &oly__prim_concatenate, P(oly_params_concatenate, .dimension = 0), 2,
     {"f64[2,3]", "f64[4,3]"}, 0},
    {"concat_neg3", &oly__prim_concatenate, P(oly_params_concatenate, .dimension = -1), 3,
     {"f64[2,3]", "f64[2,1]", "f64[2,2]"}, 0},
    {"concat_zero_part", &oly__prim_concatenate, P(oly_params_concatenate, .dimension = 1), 2,
     {"f64[2,0]", "f64[2,3]"}, 0},
    {"concat_one", &oly__prim_concatenate, P(oly_params_concatenate, .dimension = 0), 1,
     {"f64[3]"}, 0},
    /* pad */
    {"pad_plain", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(1, 0), .hi = INTS(2, 1), .interior = INTS(0, 0)), 2,
     {"f64[3,4]", "f64[]"}, 0},
    {"pad_interior_neg", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(-1, 2), .hi = INTS(0, -1), .interior = INTS(1, 2)), 2,
     {"f64[3,4]", "f64[]"}, 0},
    {"pad_crop_all", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(-2), .hi = INTS(-3), .interior = INTS(1)), 2,
     {"f64[4]", "f64[]"}, 0},
    {"pad_empty_operand", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(1), .hi = INTS(2), .interior = INTS(3)), 2,
     {"f64[0]", "f64[]"}, 0},
    {"pad_scalar", &oly__prim_pad, P(oly_params_pad, .lo = NOINTS, .hi = NOINTS, .interior = NOINTS),
     2, {"f64[]", "f64[]"}, 0},
    /* copy */
    {"copy", &oly__prim_copy, NULL, 1, {"f64[2,3]"}, 0},
    /* reductions */
    {"sum_mid", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = INTS(1)), 1, {"f64[2,3,4]"}, 0},
    {"sum_two", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = INTS(2, 0)), 1,
     {"f64[2,3,4]"}, 0},
    {"sum_neg", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = INTS(-1)), 1, {"f64[2,3]"}, 0},
    {"sum_none", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = NOINTS), 1, {"f64[2,3]"}, 0},
    {"sum_empty", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = INTS(1)), 1, {"f64[2,0]"}, 0},
    {"sum_i32", &oly__prim_reduce_sum, P(oly_params_reduce, .axes = INTS(0)), 1, {"i32[3,2]"}, 0},
    {"prod_mid", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = INTS(1)), 1,
     {"f64[2,3,4]"}, 0},
    {"prod_two_zeros", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = INTS(0, -1)), 1,
     {"f64[3,2,4]"}, ZEROS},
    {"prod_all", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = INTS(0, 1)), 1,
     {"f64[2,3]"}, ZEROS},
    {"prod_none", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = NOINTS), 1, {"f64[3]"}, 0},
    {"prod_empty", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = INTS(0)), 1, {"f64[0,2]"},
     0},
    {"max_mid", &oly__prim_reduce_max, P(oly_params_reduce, .axes = INTS(1)), 1, {"f64[2,3,4]"}, 0},
    {"max_two", &oly__prim_reduce_max, P(oly_params_reduce, .axes = INTS(0, 2)), 1,
     {"f64[2,3,4]"}, 0},
    {"min_neg", &oly__prim_reduce_min, P(oly_params_reduce, .axes = INTS(-1)), 1, {"f64[3,5]"}, 0},
    {"min_all", &oly__prim_reduce_min, P(oly_params_reduce, .axes = INTS(0, 1)), 1, {"f64[3,2]"}, 0},
    {"and_1", &oly__prim_reduce_and, P(oly_params_reduce, .axes = INTS(1)), 1, {"bool[3,4]"}, 0},
    {"or_0", &oly__prim_reduce_or, P(oly_params_reduce, .axes = INTS(0)), 1, {"bool[3,4]"}, 0},
    {"and_i32", &oly__prim_reduce_and, P(oly_params_reduce, .axes = INTS(0, 1)), 1, {"i32[3,4]"},
     0},
    {"argmax_1", &oly__prim_argmax, P(oly_params_argminmax, .axes = INTS(1), .index_dtype = OLY_INT32),
     1, {"f64[3,4]"}, 0},
    {"argmin_neg_i64", &oly__prim_argmin,
     P(oly_params_argminmax, .axes = INTS(-3), .index_dtype = OLY_INT64), 1, {"f64[3,4,2]"}, 0},
    {"cumsum_1", &oly__prim_cumsum, P(oly_params_cumulative, .axis = 1), 1, {"f64[3,4]"}, 0},
    {"cumsum_rev0", &oly__prim_cumsum, P(oly_params_cumulative, .axis = 0, .reverse = true), 1,
     {"f64[3,4]"}, 0},
    {"cumsum_neg_rev", &oly__prim_cumsum, P(oly_params_cumulative, .axis = -1, .reverse = true), 1,
     {"f64[2,3,4]"}, 0},
    {"cumprod_1", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 1), 1, {"f64[3,4]"}, 0},
    {"cumprod_rev_zeros", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 0, .reverse = true),
     1, {"f64[4,3]"}, ZEROS},
    {"cumprod_zeros_3d", &oly__prim_cumprod, P(oly_params_cumulative, .axis = -2), 1,
     {"f64[2,5,2]"}, ZEROS},
    {"cummax_1", &oly__prim_cummax, P(oly_params_cumulative, .axis = 1), 1, {"f64[3,5]"}, 0},
    {"cummax_rev", &oly__prim_cummax, P(oly_params_cumulative, .axis = 0, .reverse = true), 1,
     {"f64[4,3]"}, 0},
    {"cummin_1", &oly__prim_cummin, P(oly_params_cumulative, .axis = -1), 1, {"f64[2,3,4]"}, 0},
    {"cummin_rev", &oly__prim_cummin, P(oly_params_cumulative, .axis = 1, .reverse = true), 1,
     {"f64[3,4]"}, 0},
    {"cumprod_long_zeros", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 1), 1,
     {"f64[2,9]"}, ZEROS},
    {"cumprod_long_rev", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 0, .reverse = true),
     1, {"f64[11]"}, 0},
    {"cummax_long", &oly__prim_cummax, P(oly_params_cumulative, .axis = 0), 1, {"f64[9,2]"}, 0},
    {"cummin_long_rev", &oly__prim_cummin, P(oly_params_cumulative, .axis = 0, .reverse = true),
     1, {"f64[11]"}, 0},
    {"cumprod_len1", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 1), 1, {"f64[3,1]"}, 0},
    {"cummax_empty", &oly__prim_cummax, P(oly_params_cumulative, .axis = 0), 1, {"f64[0,2]"}, 0},
    {"cumsum_i32", &oly__prim_cumsum, P(oly_params_cumulative, .axis = 0), 1, {"i32[4]"}, 0},
    /* dot_general */
    {"dot_matmul", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(1), .rhs_contracting = INTS(0)), 2,
     {"f64[2,3]", "f64[3,4]"}, 0},
    {"dot_batched", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(2), .rhs_contracting = INTS(1),
       .lhs_batch = INTS(0), .rhs_batch = INTS(0)),
     2, {"f64[5,2,3]", "f64[5,3,4]"}, 0},
    {"dot_two_contract", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(0, 2), .rhs_contracting = INTS(2, 0)), 2,
     {"f64[3,2,4]", "f64[4,5,3]"}, 0},
    {"dot_batch_inner", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(2), .rhs_contracting = INTS(0),
       .lhs_batch = INTS(1), .rhs_batch = INTS(1)),
     2, {"f64[2,6,3]", "f64[3,6]"}, 0},
    {"dot_two_batch_neg", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(-1), .rhs_contracting = INTS(1),
       .lhs_batch = INTS(1, 0), .rhs_batch = INTS(2, 0)),
     2, {"f64[2,3,4]", "f64[2,4,3,5]"}, 0},
    {"dot_vec", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(0), .rhs_contracting = INTS(0)), 2,
     {"f64[3]", "f64[3]"}, 0},
    {"dot_outer", &oly__prim_dot_general, P(oly_params_dot_general, .lhs_contracting = NOINTS), 2,
     {"f64[2]", "f64[3]"}, 0},
    {"dot_zero_contract", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(1), .rhs_contracting = INTS(0)), 2,
     {"f64[2,0]", "f64[0,3]"}, 0},
    /* other dtypes: complex (transposes are plain, never conjugated), float32,
     * bool and integer values (batching only) */
    {"c128_dot", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(1), .rhs_contracting = INTS(0)), 2,
     {"c128[2,3]", "c128[3,2]"}, 0},
    {"c128_prod", &oly__prim_reduce_prod, P(oly_params_reduce, .axes = INTS(1)), 1,
     {"c128[2,3]"}, 0},
    {"c128_cumprod", &oly__prim_cumprod, P(oly_params_cumulative, .axis = 0), 1, {"c128[3,2]"}, 0},
    {"c128_pad", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(1), .hi = INTS(0), .interior = INTS(1)), 2,
     {"c128[3]", "c128[]"}, 0},
    {"c128_bid", &oly__prim_broadcast_in_dim,
     P(oly_params_broadcast_in_dim, .shape = INTS(2, 3), .broadcast_dimensions = INTS(1)), 1,
     {"c128[3]"}, 0},
    {"f32_dot_batched", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(1), .rhs_contracting = INTS(1),
       .lhs_batch = INTS(0), .rhs_batch = INTS(0)),
     2, {"f32[2,3]", "f32[2,3]"}, 0},
    {"f32_max", &oly__prim_reduce_max, P(oly_params_reduce, .axes = INTS(0)), 1, {"f32[4,2]"}, 0},
    {"f32_cummin", &oly__prim_cummin, P(oly_params_cumulative, .axis = 0), 1, {"f32[4]"}, 0},
    {"f32_dus", &oly__prim_dynamic_update_slice, NULL, 3, {"f32[5]", "f32[2]", "i32[]"}, 0},
    {"bool_pad", &oly__prim_pad,
     P(oly_params_pad, .lo = INTS(1, 0), .hi = INTS(0, 1), .interior = INTS(1, 0)), 2,
     {"bool[2,2]", "bool[]"}, 0},
    {"bool_concat", &oly__prim_concatenate, P(oly_params_concatenate, .dimension = 1), 2,
     {"bool[2,1]", "bool[2,2]"}, 0},
    {"i32_dslice", &oly__prim_dynamic_slice, P(oly_params_dynamic_slice, .slice_sizes = INTS(2)),
     2, {"i32[4]", "i32[]"}, 0},
    {"u8_rev", &oly__prim_rev, P(oly_params_dims, .dimensions = INTS(0)), 1, {"u8[3,2]"}, 0},
    {"i64_dot", &oly__prim_dot_general,
     P(oly_params_dot_general, .lhs_contracting = INTS(0), .rhs_contracting = INTS(0)), 2,
     {"i64[3,2]", "i64[3]"}, 0},
};

/* ---------------------------------------------------------------- the table, through rulecheck */

static oly_aval parse_aval(const char *s)
{
    char name[16];
    size_t k = 0;
    while (s[k] && s[k] != '[' && k + 1 < sizeof name) {
        name[k] = s[k];
        k++;
    }
    name[k] = '\0';
    oly_dtype t = OLY_FLOAT64;
    if (oly_dtype_from_name(name, &t) != OLY_OK) {
        fprintf(stderr, "bad aval %s\n", s);
        abort();
    }
    int64_t dims[OLY_MAX_RANK];
    int rank = 0;
    const char *q = s + k + 1;
    while (*q && *q != ']') {
        char *end = NULL;
        dims[rank++] = strtoll(q, &end, 10);
        q = *end == ',' ? end + 1 : end;
    }
    return rc_aval(t, dims, rank);
}

/* The inputs a row is linear in (its transpose rule's business); dot_general
 * is bilinear: one operand at a time. */
static bool linear_in(const oly_prim *p, int i, int which_dot)
{
    if (p == &oly__prim_dot_general) return i == which_dot;
    if (p == &oly__prim_concatenate || p == &oly__prim_pad || p == &oly__prim_dynamic_update_slice)
        return p != &oly__prim_dynamic_update_slice || i < 2;
    return p->transpose && i == 0;
}

static rc_case to_rc(const rcase *c, int which_dot)
{
    rc_case r;
    memset(&r, 0, sizeof r);
    r.prim = c->name;
    r.row = c->prim;
    r.params = c->params;
    r.n_in = c->n_in;
    for (int i = 0; i < c->n_in; i++) {
        r.in[i] = parse_aval(c->in[i]);
        bool fl = oly_dtype_is_inexact(r.in[i].dtype);
        if ((c->flags & ZEROS) && fl) { /* whole numbers in [-1, 1]: many exact zeros */
            r.lo[i] = -1;
            r.hi[i] = 1;
            r.integer[i] = true;
        }
        r.linear[i] = fl && linear_in(c->prim, i, which_dot);
    }
    return r;
}

TEST(rstruct_table)
{
    int failed = 0;
    for (int k = 0; k < OLY_ARRAY_LEN(cases); k++) {
        rc_case r = to_rc(&cases[k], 0);
        bool ok = rc_check_all(&r);
        if (ok && cases[k].prim == &oly__prim_dot_general) {
            r = to_rc(&cases[k], 1);
            ok = rc_check_transpose(&r);
        }
        if (!ok) {
            fprintf(stderr, "    case %s failed\n", cases[k].name);
            failed++;
        }
    }
    CHECK_EQ(failed, 0);
}

/* ---------------------------------------------------------------- direct tests */

/* The program x... -> prim(x...). */
static oly_program *one_eqn(const oly_prim *prim, const void *params, int n_in, const oly_aval *in)
{
    oly_builder *b = NULL;
    oly_program *p = NULL;
    oly_atom a[MAX_IN], out;
    CHECK_OK(oly_builder_new(&b));
    oly_status s = OLY_OK;
    for (int i = 0; i < n_in && s == OLY_OK; i++) {
        oly_var *v = NULL;
        s = oly_builder_add_input(b, &in[i], &v);
        a[i] = oly_atom_var(v);
    }
    if (s == OLY_OK) s = oly__emit(b, prim, a, n_in, params, NULL, 0, &out);
    if (s == OLY_OK) s = oly_builder_finish(b, &out, 1, &p);
    CHECK_OK(s);
    oly_builder_free(b);
    return p;
}

/* The tangent of prim at x (f64, rank 1 or 2 dims) along t, against want. */
static void expect_jvp(const oly_prim *prim, const void *params, int rank, const int64_t *dims,
                       const double *x, const double *t, const double *want, int64_t n_want)
{
    oly_aval a = tu_aval(OLY_FLOAT64, rank, dims);
    oly_program *p = one_eqn(prim, params, 1, &a), *j = NULL;
    bool nz = true, nz_out = false;
    if (p) CHECK_OK(oly_program_jvp(p, &nz, &j, &nz_out));
    CHECK(nz_out);
    if (j) {
        oly_array *in[2] = {tu_array(OLY_FLOAT64, rank, dims, x),
                            tu_array(OLY_FLOAT64, rank, dims, t)};
        oly_array *out[2] = {NULL, NULL};
        CHECK_OK(oly_program_run(j, 0, in, 2, out, 2));
        if (out[1]) CHECK(tu_allclose(out[1], want, n_want, 1e-12, 1e-12));
        for (int i = 0; i < 2; i++) {
            oly_array_release(in[i]);
            oly_array_release(out[i]);
        }
    }
    oly_program_release(j);
    oly_program_release(p);
}

/* reduce_max/min: ties share the tangent evenly (JAX's rule). */
TEST(rstruct_reduce_max_ties)
{
    oly_params_reduce ax1 = {.axes = INTS(1)};
    expect_jvp(&oly__prim_reduce_max, &ax1, 2, (int64_t[]){2, 4},
               (double[]){1, 3, 3, 2, 5, 5, 5, 0}, (double[]){1, 2, 4, 8, 1, 2, 4, 8},
               (double[]){3, 7.0 / 3}, 2);
    expect_jvp(&oly__prim_reduce_min, &ax1, 2, (int64_t[]){2, 4},
               (double[]){-1, -3, -3, -2, -5, -5, -5, 0}, (double[]){1, 2, 4, 8, 1, 2, 4, 8},
               (double[]){3, 7.0 / 3}, 2);
}

/* cummax/cummin: the tangent of the running extremum's element, ties split. */
TEST(rstruct_cummax_ties)
{
    oly_params_cumulative fwd = {.axis = 0}, rev = {.axis = -1, .reverse = true};
    expect_jvp(&oly__prim_cummax, &fwd, 1, (int64_t[]){5}, (double[]){1, 3, 3, 2, 4},
               (double[]){1, 2, 4, 8, 16}, (double[]){1, 2, 3, 3, 16}, 5);
    expect_jvp(&oly__prim_cummin, &rev, 1, (int64_t[]){4}, (double[]){2, 1, 1, 3},
               (double[]){1, 2, 4, 8}, (double[]){3, 3, 4, 8}, 4);
}

/* Products with zeros: no division by x anywhere. */
TEST(rstruct_prod_zeros)
{
    oly_params_reduce all = {.axes = INTS(0)};
    /* d(x0 x1 x2) = x1 x2 t0 + x0 x2 t1 + x0 x1 t2 */
    expect_jvp(&oly__prim_reduce_prod, &all, 1, (int64_t[]){3}, (double[]){0, 2, 3},
               (double[]){1, 10, 100}, (double[]){6}, 1);
    expect_jvp(&oly__prim_reduce_prod, &all, 1, (int64_t[]){3}, (double[]){0, 2, 0},
               (double[]){1, 10, 100}, (double[]){0}, 1);
    oly_params_cumulative fwd = {.axis = 0}, rev = {.axis = 0, .reverse = true};
    expect_jvp(&oly__prim_cumprod, &fwd, 1, (int64_t[]){3}, (double[]){2, 0, 3},
               (double[]){1, 1, 1}, (double[]){1, 2, 6}, 3);
    /* reverse: y = (x0 x1 x2, x1 x2, x2) */
    expect_jvp(&oly__prim_cumprod, &rev, 1, (int64_t[]){3}, (double[]){2, 0, 3},
               (double[]){1, 1, 1}, (double[]){6, 3, 1}, 3);

    /* the gradient of prod through linearize + transpose: (x1 x2, x0 x2, x0 x1) */
    oly_aval a = tu_aval(OLY_FLOAT64, 1, (int64_t[]){3});
    oly_program *p = one_eqn(&oly__prim_reduce_prod, &all, 1, &a), *k = NULL, *l = NULL,
                *g = NULL;
    bool nz = true, nz_out = false;
    int n_res = 0;
    if (p) CHECK_OK(oly_program_linearize(p, &nz, &k, &l, &n_res, &nz_out));
    if (l) CHECK_OK(oly_program_transpose(l, n_res, &g));
    if (g) {
        oly_array *x = tu_array(OLY_FLOAT64, 1, (int64_t[]){3}, (double[]){0, 2, 3});
        oly_array **kout = calloc((size_t)n_res + 1, sizeof *kout);
        oly_array **gin = calloc((size_t)n_res + 1, sizeof *gin);
        oly_array *grad = NULL;
        CHECK_OK(oly_program_run(k, 0, &x, 1, kout, 1 + n_res));
        for (int r = 0; r < n_res; r++) gin[r] = kout[1 + r];
        gin[n_res] = tu_scalar(OLY_FLOAT64, 1);
        CHECK_OK(oly_program_run(g, 0, gin, n_res + 1, &grad, 1));
        if (grad) CHECK(tu_allclose(grad, (double[]){6, 0, 0}, 3, 1e-12, 1e-12));
        oly_array_release(grad);
        oly_array_release(gin[n_res]);
        for (int r = 0; r < 1 + n_res; r++) oly_array_release(kout[r]);
        free(kout);
        free(gin);
        oly_array_release(x);
    }
    oly_program_release(g);
    oly_program_release(l);
    oly_program_release(k);
    oly_program_release(p);
}

/* dynamic_slice with a batched start index: one slice per batch element
 * (olympus has no gather), including a batch of 0 and clamped starts. */
TEST(rstruct_dynamic_slice_batched_index)
{
    oly_params_dynamic_slice sz = {.slice_sizes = INTS(2)};
    oly_aval in[2] = {tu_aval(OLY_FLOAT64, 1, (int64_t[]){5}), tu_aval(OLY_INT32, 0, NULL)};
    oly_program *p = one_eqn(&oly__prim_dynamic_slice, &sz, 2, in);
    int axes[2] = {OLY_NOT_MAPPED, 0}, oax = 0;
    for (int64_t n = 0; p && n <= 4; n += 4) {
        oly_program *v = NULL;
        CHECK_OK(oly_program_vmap(p, axes, n, &oax, &v));
        if (!v) continue;
        CHECK_OK(oly_program_verify(v));
        CHECK_EQ(oly_program_output_aval(v, 0)->rank, 2);
        CHECK_EQ(oly_program_output_aval(v, 0)->dims[0], n);
        CHECK_EQ(oly_program_output_aval(v, 0)->dims[1], 2);
        oly_array *x = tu_array(OLY_FLOAT64, 1, (int64_t[]){5}, (double[]){10, 11, 12, 13, 14});
        oly_array *i = tu_array(OLY_INT32, 1, &n, (double[]){-3, 1, 4, 2});
        oly_array *args[2] = {x, i}, *y = NULL;
        CHECK_OK(oly_program_run(v, 0, args, 2, &y, 1));
        if (y && n == 4)
            CHECK(tu_allclose(y, (double[]){10, 11, 11, 12, 13, 14, 12, 13}, 8, 0, 0));
        oly_array_release(y);
        oly_array_release(x);
        oly_array_release(i);
        oly_program_release(v);
    }
    oly_program_release(p);
}

/* A batched padding value: each batch element pads with its own value. */
TEST(rstruct_pad_batched_value)
{
    oly_params_pad pp = {.lo = INTS(1), .hi = INTS(-1), .interior = INTS(1)};
    oly_aval in[2] = {tu_aval(OLY_FLOAT64, 1, (int64_t[]){3}), tu_aval(OLY_FLOAT64, 0, NULL)};
    oly_program *p = one_eqn(&oly__prim_pad, &pp, 2, in), *v = NULL;
    int axes[2] = {OLY_NOT_MAPPED, 0}, oax = 1;
    if (p) CHECK_OK(oly_program_vmap(p, axes, 2, &oax, &v));
    if (v) {
        oly_array *x = tu_array(OLY_FLOAT64, 1, (int64_t[]){3}, (double[]){1, 2, 3});
        oly_array *pv = tu_array(OLY_FLOAT64, 1, (int64_t[]){2}, (double[]){-1, -2});
        oly_array *args[2] = {x, pv}, *y = NULL;
        CHECK_OK(oly_program_run(v, 0, args, 2, &y, 1));
        /* out_axes 1: y[k, b]; rows of pad: (v, 1, v, 2, v) */
        if (y) CHECK(tu_allclose(y, (double[]){-1, -2, 1, 1, -1, -2, 2, 2, -1, -2}, 10, 0, 0));
        oly_array_release(y);
        oly_array_release(x);
        oly_array_release(pv);
    }
    oly_program_release(v);
    oly_program_release(p);
}

/* Batched dot_general is one dot_general: the batch axis becomes a batch
 * dimension (both sides) or stays a free one (one side), never a transpose or
 * a broadcast. */
TEST(rstruct_dot_general_batch_is_one_eqn)
{
    oly_params_dot_general mm = {.lhs_contracting = INTS(1), .rhs_contracting = INTS(0)};
    oly_aval in[2] = {tu_aval(OLY_FLOAT32, 2, (int64_t[]){2, 3}),
                      tu_aval(OLY_FLOAT32, 2, (int64_t[]){3, 4})};
    oly_program *p = one_eqn(&oly__prim_dot_general, &mm, 2, in);
    /* in_axes, out_axes, and the result's shape */
    static const struct {
        int in_axes[2], out_axis;
        int64_t dims[3];
    } pats[] = {
        {{0, 0}, 0, {5, 2, 4}},
        {{0, OLY_NOT_MAPPED}, 0, {5, 2, 4}},
        {{2, OLY_NOT_MAPPED}, 1, {2, 5, 4}},
        {{OLY_NOT_MAPPED, 2}, 2, {2, 4, 5}},
        {{OLY_NOT_MAPPED, 1}, 1, {2, 5, 4}},
        {{1, 2}, 0, {5, 2, 4}},
    };
    for (int k = 0; p && k < OLY_ARRAY_LEN(pats); k++) {
        oly_program *v = NULL;
        CHECK_OK(oly_program_vmap(p, pats[k].in_axes, 5, &pats[k].out_axis, &v));
        if (!v) continue;
        CHECK_EQ(oly_program_num_eqns(v), 1);
        const oly_aval *o = oly_program_output_aval(v, 0);
        for (int d = 0; d < 3; d++) CHECK_EQ(o->dims[d], pats[k].dims[d]);
        oly_program_release(v);
    }
    oly_program_release(p);
}

/* Batching that would pass the maximum rank fails with a message, no crash. */
TEST(rstruct_batch_rank_limit)
{
    oly_params_broadcast_in_dim bd = {.broadcast_dimensions = INTS(15)};
    bd.shape.n = OLY_MAX_RANK;
    for (int d = 0; d < OLY_MAX_RANK; d++) bd.shape.v[d] = d == 15 ? 2 : 1;
    oly_aval in = tu_aval(OLY_FLOAT64, 1, (int64_t[]){2});
    oly_program *p = one_eqn(&oly__prim_broadcast_in_dim, &bd, 1, &in), *v = NULL;
    int axis = 0, oax = 0;
    if (p) CHECK_ERR(oly_program_vmap(p, &axis, 3, &oax, &v), OLY_ERR_UNSUPPORTED, "rank 17");
    CHECK(v == NULL);
    oly_program_release(v);
    oly_program_release(p);
}

/* ---------------------------------------------------------------- rule presence */

static const oly_prim *const rows[] = {
    &oly__prim_broadcast_in_dim, &oly__prim_reshape, &oly__prim_transpose, &oly__prim_squeeze,
    &oly__prim_expand_dims, &oly__prim_rev, &oly__prim_slice, &oly__prim_dynamic_slice,
    &oly__prim_dynamic_update_slice, &oly__prim_concatenate, &oly__prim_pad, &oly__prim_iota,
    &oly__prim_copy, &oly__prim_reduce_sum, &oly__prim_reduce_prod, &oly__prim_reduce_max,
    &oly__prim_reduce_min, &oly__prim_reduce_and, &oly__prim_reduce_or, &oly__prim_argmax,
    &oly__prim_argmin, &oly__prim_cumsum, &oly__prim_cumprod, &oly__prim_cummax,
    &oly__prim_cummin, &oly__prim_dot_general,
};

/* The rows that are linear in (some of) their inputs need transpose rules. */
static const oly_prim *const linear_rows[] = {
    &oly__prim_broadcast_in_dim, &oly__prim_reshape, &oly__prim_transpose, &oly__prim_squeeze,
    &oly__prim_expand_dims, &oly__prim_rev, &oly__prim_slice, &oly__prim_dynamic_slice,
    &oly__prim_dynamic_update_slice, &oly__prim_concatenate, &oly__prim_pad, &oly__prim_copy,
    &oly__prim_reduce_sum, &oly__prim_cumsum, &oly__prim_dot_general,
};

TEST(rstruct_rules_present)
{
    for (int i = 0; i < OLY_ARRAY_LEN(rows); i++) {
        if (!rows[i]->batch) fprintf(stderr, "    %s: no batch rule\n", rows[i]->name);
        if (!rows[i]->jvp) fprintf(stderr, "    %s: no jvp rule\n", rows[i]->name);
        CHECK(rows[i]->batch && rows[i]->jvp);
    }
    for (int i = 0; i < OLY_ARRAY_LEN(linear_rows); i++) {
        if (!linear_rows[i]->transpose)
            fprintf(stderr, "    %s: no transpose rule\n", linear_rows[i]->name);
        CHECK(linear_rows[i]->transpose != NULL);
    }
    /* every row of this family is covered by a case of the table (iota has no
     * inputs, so no transform ever asks its rules) */
    for (int i = 0; i < OLY_ARRAY_LEN(rows); i++) {
        bool found = rows[i] == &oly__prim_iota;
        for (int k = 0; k < OLY_ARRAY_LEN(cases); k++) found = found || cases[k].prim == rows[i];
        if (!found) fprintf(stderr, "    %s: no case in the table\n", rows[i]->name);
        CHECK(found);
    }
}
