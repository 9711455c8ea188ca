/* test_hardening.c — defects a bad-input probe found in the public C API, each
 * failing before its fix: NULL out-parameters, and empty shapes whose other
 * dims overflow the element count. */
#include "test.h"

#include <limits.h>

#define D(...) ((const int64_t[]){__VA_ARGS__})

/* C1: NULL out-parameters are an error, not a segfault. */
TEST(hardening_null_out_params)
{
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 1, D(3), NULL), OLY_ERR_INVALID, "out is NULL");
    CHECK_ERR(oly_dtype_from_name("float32", NULL), OLY_ERR_INVALID, "out is NULL");
    oly_dtype t = OLY_BOOL;
    CHECK_ERR(oly_dtype_from_name(NULL, &t), OLY_ERR_INVALID, "NULL");
    CHECK_EQ(t, OLY_BOOL);
}

/* F06: an empty shape may not carry dims whose product overflows (as NumPy:
 * "array is too big"), so strides and offsets of empty arrays stay in range. */
TEST(hardening_empty_shape_with_huge_dims)
{
    oly_aval a;
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 2, D(0, INT64_MAX), &a), OLY_ERR_SHAPE, "");
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 3, D(0, (int64_t)1 << 62, 4), &a), OLY_ERR_SHAPE, "");
    CHECK_ERR(oly_aval_make(OLY_FLOAT32, 3, D((int64_t)1 << 40, 0, (int64_t)1 << 40), &a),
              OLY_ERR_SHAPE, "");
    CHECK_OK(oly_aval_make(OLY_FLOAT32, 3, D((int64_t)1 << 20, 0, (int64_t)1 << 20), &a));
    CHECK_EQ(oly_aval_size(&a), 0);
    CHECK_EQ(oly_aval_nbytes(&a), 0);
    oly_builder *b = NULL;
    CHECK_OK(oly_builder_new(&b));
    oly_aval big = {.dtype = OLY_FLOAT32, .rank = 2, .dims = {0, INT64_MAX}};
    oly_var *v = NULL;
    CHECK_ERR(oly_builder_add_input(b, &big, &v), OLY_ERR_INVALID, "too many");
    oly_builder_free(b);
}
