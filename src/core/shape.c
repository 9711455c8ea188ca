/* shape.c — avals (dtype + static shape): construction, sizes, equality, the
 * printer's "f32[5,3]" form, row-major strides and axis normalisation. */
#include "internal.h"

oly_status oly__dims_check(const char *who, int rank, const int64_t *dims)
{
    /* As NumPy: the product of the nonzero dims must fit even when another dim
     * is 0, so strides and byte offsets of empty arrays cannot overflow. */
    int64_t size = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] == 0) continue;
        if (size > INT64_MAX / dims[i])
            return oly__error(OLY_ERR_INVALID, "%s: element count overflows at dimension %d", who,
                              i);
        size *= dims[i];
    }
    /* 16: the widest element, so that nbytes fits size_t for every dtype */
    if ((uint64_t)size > SIZE_MAX / 16)
        return oly__error(OLY_ERR_INVALID, "%s: %lld elements is too many", who,
                          (long long)size);
    return OLY_OK;
}

oly_status oly_aval_make(oly_dtype t, int rank, const int64_t *dims, oly_aval *out)
{
    if (!out) return oly__error(OLY_ERR_INVALID, "aval: out is NULL");
    if ((unsigned)t >= OLY_DTYPE_COUNT)
        return oly__error(OLY_ERR_TYPE, "aval: invalid dtype %d", (int)t);
    if (rank < 0 || rank > OLY_MAX_RANK)
        return oly__error(OLY_ERR_SHAPE, "aval: rank must be in [0, %d], got %d", OLY_MAX_RANK,
                          rank);
    if (rank > 0 && !dims)
        return oly__error(OLY_ERR_INVALID, "aval: rank %d but dims is NULL", rank);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return oly__error(OLY_ERR_SHAPE, "aval: dimension %d is negative (%lld)", i,
                              (long long)dims[i]);
    /* The public API keeps OLY_ERR_SHAPE here (pinned by tests/c/test_core.c);
     * programs built while tracing report OLY_ERR_INVALID (check_aval in program.c). */
    if (oly__dims_check("aval", rank, dims) != OLY_OK) return OLY_ERR_SHAPE;
    oly_aval a;
    memset(&a, 0, sizeof a);
    a.dtype = t;
    a.rank = rank;
    a.weak = false;
    for (int i = 0; i < rank; i++) a.dims[i] = dims[i];
    *out = a;
    return OLY_OK;
}

int64_t oly_aval_size(const oly_aval *a)
{
    int64_t n = 1;
    for (int i = 0; i < a->rank; i++) n *= a->dims[i];
    return n;
}

size_t oly_aval_nbytes(const oly_aval *a)
{
    return (size_t)oly_aval_size(a) * oly_dtype_size(a->dtype);
}

bool oly_aval_equal(const oly_aval *a, const oly_aval *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

int oly_aval_format(char *buf, size_t n, const oly_aval *a)
{
    char tmp[32 + OLY_MAX_RANK * 22];
    size_t len = 0;
    len += (size_t)snprintf(tmp, sizeof tmp, "%s[", oly_dtype_short_name(a->dtype));
    int rank = a->rank < 0 ? 0 : (a->rank > OLY_MAX_RANK ? OLY_MAX_RANK : a->rank);
    for (int i = 0; i < rank; i++)
        len += (size_t)snprintf(tmp + len, sizeof tmp - len, i ? ",%lld" : "%lld",
                                (long long)a->dims[i]);
    len += (size_t)snprintf(tmp + len, sizeof tmp - len, "]");
    if (buf && n) {
        size_t c = len < n - 1 ? len : n - 1;
        memcpy(buf, tmp, c);
        buf[c] = '\0';
    }
    return (int)len;
}

void oly__strides(const oly_aval *a, int64_t *strides)
{
    int64_t s = 1;
    for (int i = a->rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= a->dims[i];
    }
}

oly_status oly__axis(const char *who, int64_t axis, int rank, int64_t *out)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return oly__error(OLY_ERR_INVALID,
                          "%s: axis %lld is out of bounds for array of rank %d (expected "
                          "[-%d, %d))",
                          who ? who : "axis", (long long)axis, rank, rank, rank);
    *out = axis < 0 ? axis + rank : axis;
    return OLY_OK;
}
