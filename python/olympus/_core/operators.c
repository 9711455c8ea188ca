/* operators.c — NumPy semantics in one place: type promotion with weak
 * Python scalars (result_type), broadcasting (broadcast_shapes), and the
 * number-protocol and comparison slots shared by Array and Tracer, with the
 * module functions binop / unop the Python layer calls. Operators bind
 * primitives (ext_bind), so they work eagerly and while tracing alike. */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

#define FN_SLOT(f) (__extension__(void *)(f))

/* ---------------------------------------------------------------- primitives by name */

/* Every primitive of the library by index: the enum and the names come from
 * src/prims/prims.def, which the build copies next to the extension's
 * objects (the extension sees no src/ header); the rows are looked up once. */
enum {
#define OLY_PRIM(name) P_##name,
#include "prims.def"
#undef OLY_PRIM
    P_COUNT
};
static const char *const prim_names[P_COUNT] = {
#define OLY_PRIM(name) #name,
#include "prims.def"
#undef OLY_PRIM
};
static const oly_prim *prim_rows[P_COUNT];

static const oly_prim *prim(int i)
{
    const oly_prim *p = prim_rows[i];
    if (!p && (p = prim_rows[i] = oly_prim_lookup(prim_names[i])) == NULL)
        PyErr_Format(PyExc_NotImplementedError, "the primitive '%s' is not available in this build",
                     prim_names[i]);
    return p;
}

/* bind with a single result (new reference). */
static PyObject *bind1(int pi, const void *params, PyObject *const *args, Py_ssize_t n)
{
    const oly_prim *p = prim(pi);
    if (!p) return NULL;
    PyObject *t = ext_bind(p, params, args, n, NULL, 0);
    if (!t) return NULL;
    if (PyTuple_GET_SIZE(t) < 1) {
        Py_DECREF(t);
        PyErr_Format(PyExc_SystemError, "%s returned no result", prim_names[pi]);
        return NULL;
    }
    PyObject *r = Py_NewRef(PyTuple_GET_ITEM(t, 0));
    Py_DECREF(t);
    return r;
}

static PyObject *B2(int pi, PyObject *a, PyObject *b)
{
    PyObject *args[2] = {a, b};
    return bind1(pi, NULL, args, 2);
}

static PyObject *B1(int pi, PyObject *a) { return bind1(pi, NULL, &a, 1); }

/* A rank-0 Array of dtype t holding the integer v (weak as asked, so helper
 * constants do not change the weak type of a result). */
static PyObject *const_of(oly_dtype t, long v, bool weak)
{
    PyObject *pv = PyLong_FromLong(v);
    if (!pv) return NULL;
    oly_array *a = NULL;
    int r = ext_to_array(pv, (int)t, &a);
    Py_DECREF(pv);
    if (r < 0) return NULL;
    if (weak) {
        oly_aval w = *oly_array_aval(a);
        w.weak = true;
        oly_array *v2 = NULL;
        oly_status s = oly_array_view(a, &w, &v2);
        oly_array_release(a);
        if (s != OLY_OK) return ext_raise(s);
        a = v2;
    }
    return ext_array_wrap(a);
}

/* ---------------------------------------------------------------- promotion helpers */

/* NumPy broadcasting, the one implementation (operators, jnp.broadcast_shapes
 * and everything built on it): folds b into the broadcast shape acc. false
 * when b does not fit (acc is then unspecified). */
static bool broadcast_fold(oly_aval *acc, const oly_aval *b)
{
    oly_aval a = *acc;
    int r = a.rank > b->rank ? a.rank : b->rank;
    acc->rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a.rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1)
            acc->dims[i] = da;
        else if (da == 1)
            acc->dims[i] = db;
        else
            return false;
    }
    return true;
}

/* Two shapes into out; -1 with TypeError (the operators' text) on mismatch. */
static int broadcast_shapes(const char *name, const oly_aval *a, const oly_aval *b, oly_aval *out)
{
    *out = *a;
    if (broadcast_fold(out, b)) return 0;
    PyObject *sa = ext_shape_tuple(a), *sb = ext_shape_tuple(b);
    if (sa && sb)
        PyErr_Format(PyExc_TypeError, "%s got incompatible shapes for broadcasting: %R, %R", name,
                     sa, sb);
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return -1;
}

static bool same_shape(const oly_aval *a, const oly_aval *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* Broadcast v (aval av) to shape (rank, dims), trailing alignment. New reference. */
static PyObject *broadcast_to(PyObject *v, const oly_aval *av, int rank, const int64_t *dims)
{
    oly_params_broadcast_in_dim bp;
    memset(&bp, 0, sizeof bp);
    bp.shape.n = rank;
    for (int i = 0; i < rank; i++) bp.shape.v[i] = dims[i];
    bp.broadcast_dimensions.n = av->rank;
    for (int i = 0; i < av->rank; i++) bp.broadcast_dimensions.v[i] = rank - av->rank + i;
    return bind1(P_broadcast_in_dim, &bp, &v, 1);
}

/* The operand o (aval av) as an Array/Tracer of dtype t; weak: the weak flag a
 * converted value gets. Python scalars and NumPy values become Arrays. */
static PyObject *coerce(PyObject *o, const oly_aval *av, oly_dtype t, bool weak)
{
    if (ext_is_tracer(o) || ext_array_get(o)) {
        if (av->dtype == t) return Py_NewRef(o);
        oly_params_convert cp = {.new_dtype = t, .weak = weak};
        return bind1(P_convert_element_type, &cp, &o, 1);
    }
    oly_array *a = NULL;
    if (ext_to_array(o, (int)t, &a) < 0) return NULL;
    if (av->weak && ext_is_python_scalar(o)) {
        oly_aval w = *oly_array_aval(a);
        w.weak = true;
        oly_array *v = NULL;
        oly_status s = oly_array_view(a, &w, &v);
        oly_array_release(a);
        if (s != OLY_OK) return ext_raise(s);
        a = v;
    }
    return ext_array_wrap(a);
}

/* ---------------------------------------------------------------- binary operators */

enum {
    OP_ADD, OP_SUB, OP_MUL, OP_TRUEDIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_MAX, OP_MIN, OP_ATAN2,
    OP_NEXTAFTER, OP_AND, OP_OR, OP_XOR, OP_LSHIFT, OP_RSHIFT, OP_EQ, OP_NE, OP_LT, OP_LE,
    OP_GT, OP_GE, OP_MATMUL, OP_COUNT
};
enum { F_FLOAT = 1, F_BITS = 2, F_CMP = 4, F_SHIFT = 8 };

static const struct {
    const char *name;
    int prim;
    int flags;
} ops[OP_COUNT] = {
    [OP_ADD] = {"add", P_add, 0},
    [OP_SUB] = {"subtract", P_sub, 0},
    [OP_MUL] = {"multiply", P_mul, 0},
    [OP_TRUEDIV] = {"true_divide", P_div, F_FLOAT},
    [OP_FLOORDIV] = {"floor_divide", P_div, 0},
    [OP_MOD] = {"mod", P_rem, 0},
    [OP_POW] = {"power", P_pow, 0},
    [OP_MAX] = {"maximum", P_max, 0},
    [OP_MIN] = {"minimum", P_min, 0},
    [OP_ATAN2] = {"arctan2", P_atan2, F_FLOAT},
    [OP_NEXTAFTER] = {"nextafter", P_nextafter, F_FLOAT},
    [OP_AND] = {"bitwise_and", P_and, F_BITS},
    [OP_OR] = {"bitwise_or", P_or, F_BITS},
    [OP_XOR] = {"bitwise_xor", P_xor, F_BITS},
    [OP_LSHIFT] = {"left_shift", P_shift_left, F_BITS | F_SHIFT},
    [OP_RSHIFT] = {"right_shift", P_shift_right_arithmetic, F_BITS | F_SHIFT},
    [OP_EQ] = {"equal", P_eq, F_CMP},
    [OP_NE] = {"not_equal", P_ne, F_CMP},
    [OP_LT] = {"less", P_lt, F_CMP},
    [OP_LE] = {"less_equal", P_le, F_CMP},
    [OP_GT] = {"greater", P_gt, F_CMP},
    [OP_GE] = {"greater_equal", P_ge, F_CMP},
    [OP_MATMUL] = {"matmul", P_dot_general, 0},
};

static const struct {
    const char *alias;
    int op;
} op_aliases[] = {
    {"sub", OP_SUB}, {"mul", OP_MUL}, {"divide", OP_TRUEDIV}, {"div", OP_TRUEDIV},
    {"remainder", OP_MOD}, {"pow", OP_POW}, {"atan2", OP_ATAN2}, {"max", OP_MAX},
    {"min", OP_MIN}, {"eq", OP_EQ}, {"ne", OP_NE}, {"lt", OP_LT}, {"le", OP_LE}, {"gt", OP_GT},
    {"ge", OP_GE},
};

/* select_n(which, false_case, true_case) */
static PyObject *select2(PyObject *which, PyObject *f, PyObject *t)
{
    PyObject *args[3] = {which, f, t};
    return bind1(P_select_n, NULL, args, 3);
}

/* cond = (r != 0) & ((r < 0) != (y < 0)): where NumPy's floor semantics differ
 * from C's truncation. New reference. */
static PyObject *sign_fixup_cond(PyObject *r, PyObject *y, PyObject *zero)
{
    PyObject *res = NULL, *nz = NULL, *rneg = NULL, *yneg = NULL, *diff = NULL;
    if (!(nz = B2(P_ne, r, zero))) goto done;
    if (!(rneg = B2(P_lt, r, zero))) goto done;
    if (!(yneg = B2(P_lt, y, zero))) goto done;
    if (!(diff = B2(P_ne, rneg, yneg))) goto done;
    res = B2(P_and, nz, diff);
done:
    Py_XDECREF(nz);
    Py_XDECREF(rneg);
    Py_XDECREF(yneg);
    Py_XDECREF(diff);
    return res;
}

/* NumPy floor_divide / mod on operands already of dtype t and broadcast. */
static PyObject *floor_div_mod(int op, PyObject *x, PyObject *y, oly_dtype t, bool weak)
{
    if (oly_dtype_is_complex(t) || t == OLY_BOOL) {
        PyErr_Format(PyExc_TypeError, "%s does not support %s operands", ops[op].name,
                     oly_dtype_name(t));
        return NULL;
    }
    if (oly_dtype_is_unsigned_int(t)) return B2(op == OP_MOD ? P_rem : P_div, x, y);
    PyObject *res = NULL, *zero = NULL, *one = NULL, *r = NULL, *cond = NULL, *q = NULL,
             *adj = NULL, *num = NULL;
    if (!(zero = const_of(t, 0, weak)) || !(one = const_of(t, 1, weak))) goto done;
    if (!(r = B2(P_rem, x, y))) goto done;
    if (!(cond = sign_fixup_cond(r, y, zero))) goto done;
    if (op == OP_MOD) {
        if (!(adj = B2(P_add, r, y))) goto done;
        res = select2(cond, r, adj);
        goto done;
    }
    if (oly_dtype_is_int(t)) {
        if (!(q = B2(P_div, x, y))) goto done;
    } else {
        /* q = round((x - r) / y), exact up to rounding, like NumPy's divmod */
        if (!(num = B2(P_sub, x, r))) goto done;
        PyObject *d = B2(P_div, num, y);
        if (!d) goto done;
        oly_params_round rp = {.rounding_method = 1};
        q = bind1(P_round, &rp, &d, 1);
        Py_DECREF(d);
        if (!q) goto done;
    }
    if (!(adj = B2(P_sub, q, one))) goto done;
    res = select2(cond, q, adj);
done:
    Py_XDECREF(zero);
    Py_XDECREF(one);
    Py_XDECREF(r);
    Py_XDECREF(cond);
    Py_XDECREF(q);
    Py_XDECREF(adj);
    Py_XDECREF(num);
    return res;
}


/* NumPy matmul via dot_general (batch dims broadcast, 1-D operands without the
 * inserted unit dims). x, y already of a common dtype. */
static PyObject *matmul(PyObject *x, const oly_aval *ax, PyObject *y, const oly_aval *ay)
{
    if (ax->rank == 0 || ay->rank == 0) {
        PyErr_Format(PyExc_ValueError,
                     "matmul: Input operand %d does not have enough dimensions (has 0, gufunc "
                     "core with signature (n?,k),(k,m?)->(n?,m?) requires 1)",
                     ax->rank == 0 ? 0 : 1);
        return NULL;
    }
    bool x1 = ax->rank == 1, y1 = ay->rank == 1;
    int64_t kx = ax->dims[ax->rank - 1], ky = y1 ? ay->dims[0] : ay->dims[ay->rank - 2];
    if (kx != ky) {
        PyErr_Format(PyExc_TypeError,
                     "dot_general requires contracting dimensions to have the same shape, got "
                     "(%lld,) and (%lld,).",
                     (long long)kx, (long long)ky);
        return NULL;
    }
    /* batch shapes */
    oly_aval bx, by, bo;
    memset(&bx, 0, sizeof bx);
    memset(&by, 0, sizeof by);
    memset(&bo, 0, sizeof bo);
    bx.rank = x1 ? 0 : ax->rank - 2;
    by.rank = y1 ? 0 : ay->rank - 2;
    for (int i = 0; i < bx.rank; i++) bx.dims[i] = ax->dims[i];
    for (int i = 0; i < by.rank; i++) by.dims[i] = ay->dims[i];
    if (broadcast_shapes("matmul", &bx, &by, &bo) < 0) return NULL;
    int nb = bo.rank;
    PyObject *xb = NULL, *yb = NULL, *res = NULL;
    /* each operand to shape batch + core */
    int64_t dims[OLY_MAX_RANK];
    int cx = x1 ? 1 : 2, cy = y1 ? 1 : 2;
    if (nb + cx > OLY_MAX_RANK || nb + cy > OLY_MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "matmul: result rank too large");
        return NULL;
    }
    for (int i = 0; i < nb; i++) dims[i] = bo.dims[i];
    for (int i = 0; i < cx; i++) dims[nb + i] = ax->dims[ax->rank - cx + i];
    if (ax->rank != nb + cx || (nb && !same_shape(&bx, &bo)))
        xb = broadcast_to(x, ax, nb + cx, dims);
    else
        xb = Py_NewRef(x);
    if (!xb) return NULL;
    for (int i = 0; i < cy; i++) dims[nb + i] = ay->dims[ay->rank - cy + i];
    if (ay->rank != nb + cy || (nb && !same_shape(&by, &bo)))
        yb = broadcast_to(y, ay, nb + cy, dims);
    else
        yb = Py_NewRef(y);
    if (!yb) goto done;
    oly_params_dot_general dp;
    memset(&dp, 0, sizeof dp);
    dp.lhs_contracting.n = 1;
    dp.lhs_contracting.v[0] = nb + cx - 1;
    dp.rhs_contracting.n = 1;
    dp.rhs_contracting.v[0] = nb;
    dp.lhs_batch.n = dp.rhs_batch.n = nb;
    for (int i = 0; i < nb; i++) dp.lhs_batch.v[i] = dp.rhs_batch.v[i] = i;
    PyObject *args[2] = {xb, yb};
    res = bind1(P_dot_general, &dp, args, 2);
done:
    Py_XDECREF(xb);
    Py_XDECREF(yb);
    return res;
}

/* The binary operator op on x and y. Unsupported operand types: NotImplemented
 * (operators) or TypeError (strict, for binop()). */
static PyObject *binop_impl(int op, PyObject *x, PyObject *y, bool strict)
{
    /* Two Arrays of one aval (the common eager case): nothing to promote or
     * broadcast; the op's primitive at once (not for the ops composed of
     * several, for bool's or / and, or where the dtype may be refused). */
    oly_array *xa = ext_array_get(x), *ya = xa ? ext_array_get(y) : NULL;
    if (ya && (ops[op].flags & ~F_CMP) == 0 && op != OP_FLOORDIV && op != OP_MOD &&
        op != OP_POW && op != OP_MATMUL) {
        const oly_aval *ax = oly_array_aval(xa), *ay = oly_array_aval(ya);
        if (ax->dtype == ay->dtype && ax->weak == ay->weak && same_shape(ax, ay) &&
            ax->dtype != OLY_BOOL)
            return B2(ops[op].prim, x, y);
    }
    if (!ext_is_operand(x) || !ext_is_operand(y)) {
        if (!strict) Py_RETURN_NOTIMPLEMENTED;
        PyObject *bad = ext_is_operand(x) ? y : x;
        PyErr_Format(PyExc_TypeError, "%s: unsupported operand type %s (expected an array, a "
                     "tracer or a scalar)", ops[op].name, Py_TYPE(bad)->tp_name);
        return NULL;
    }
    oly_aval ax, ay;
    if (ext_aval_of(x, &ax) < 0 || ext_aval_of(y, &ay) < 0) return NULL;

    /* x ** <Python int>: integer_pow */
    if (op == OP_POW && PyLong_Check(y) && !PyBool_Check(y) && !ext_is_python_scalar(x)) {
        int overflow = 0;
        long long e = PyLong_AsLongLongAndOverflow(y, &overflow);
        if (!(e == -1 && PyErr_Occurred()) && !overflow && e >= INT32_MIN && e <= INT32_MAX) {
            PyObject *xv = coerce(x, &ax, ax.dtype, ax.weak);
            if (!xv) return NULL;
            oly_params_integer_pow ip = {.y = e};
            PyObject *r = bind1(P_integer_pow, &ip, &xv, 1);
            Py_DECREF(xv);
            return r;
        }
        PyErr_Clear();
    }

    bool weak = false;
    oly_dtype t = oly_dtype_promote(ax.dtype, ax.weak, ay.dtype, ay.weak, &weak);
    if (op == OP_SUB && t == OLY_BOOL) { /* NumPy: no boolean subtract */
        PyErr_SetString(PyExc_TypeError, "subtract is not supported for boolean operands; use "
                        "logical_xor or bitwise_xor");
        return NULL;
    }
    int flags = ops[op].flags;
    if ((flags & F_FLOAT) && !oly_dtype_is_inexact(t)) t = oly_default_float();
    if ((flags & F_BITS) && !(oly_dtype_is_int(t) || (t == OLY_BOOL && !(flags & F_SHIFT)))) {
        PyErr_Format(PyExc_TypeError, "%s is only defined for %s dtypes, got %s", ops[op].name,
                     (flags & F_SHIFT) ? "integer" : "integer and bool", oly_dtype_name(t));
        return NULL;
    }

    PyObject *xv = NULL, *yv = NULL, *res = NULL;
    if (!(xv = coerce(x, &ax, t, weak))) goto done;
    if (!(yv = coerce(y, &ay, t, weak))) goto done;

    if (op == OP_MATMUL) {
        res = matmul(xv, &ax, yv, &ay);
        goto done;
    }

    oly_aval out;
    memset(&out, 0, sizeof out);
    if (broadcast_shapes(ops[op].name, &ax, &ay, &out) < 0) goto done;
    if (ax.rank > 0 && !same_shape(&ax, &out)) {
        PyObject *b = broadcast_to(xv, &ax, out.rank, out.dims);
        Py_SETREF(xv, b);
        if (!xv) goto done;
    }
    if (ay.rank > 0 && !same_shape(&ay, &out)) {
        PyObject *b = broadcast_to(yv, &ay, out.rank, out.dims);
        Py_SETREF(yv, b);
        if (!yv) goto done;
    }

    int pi = ops[op].prim;
    if (t == OLY_BOOL) { /* NumPy: + and max are `or`, * and min are `and` on bools */
        if (op == OP_ADD || op == OP_MAX) pi = P_or;
        if (op == OP_MUL || op == OP_MIN) pi = P_and;
    }
    switch (op) {
    case OP_FLOORDIV:
    case OP_MOD: res = floor_div_mod(op, xv, yv, t, weak); break;
    case OP_RSHIFT:
        res = B2(oly_dtype_is_unsigned_int(t) ? P_shift_right_logical : P_shift_right_arithmetic, xv, yv);
        break;
    default: res = B2(pi, xv, yv); break;
    }
done:
    Py_XDECREF(xv);
    Py_XDECREF(yv);
    return res;
}

static PyObject *nb_add(PyObject *x, PyObject *y) { return binop_impl(OP_ADD, x, y, false); }
static PyObject *nb_sub(PyObject *x, PyObject *y) { return binop_impl(OP_SUB, x, y, false); }
static PyObject *nb_mul(PyObject *x, PyObject *y) { return binop_impl(OP_MUL, x, y, false); }
static PyObject *nb_truediv(PyObject *x, PyObject *y) { return binop_impl(OP_TRUEDIV, x, y, false); }
static PyObject *nb_floordiv(PyObject *x, PyObject *y)
{
    return binop_impl(OP_FLOORDIV, x, y, false);
}
static PyObject *nb_mod(PyObject *x, PyObject *y) { return binop_impl(OP_MOD, x, y, false); }
static PyObject *nb_and(PyObject *x, PyObject *y) { return binop_impl(OP_AND, x, y, false); }
static PyObject *nb_or(PyObject *x, PyObject *y) { return binop_impl(OP_OR, x, y, false); }
static PyObject *nb_xor(PyObject *x, PyObject *y) { return binop_impl(OP_XOR, x, y, false); }
static PyObject *nb_lshift(PyObject *x, PyObject *y) { return binop_impl(OP_LSHIFT, x, y, false); }
static PyObject *nb_rshift(PyObject *x, PyObject *y) { return binop_impl(OP_RSHIFT, x, y, false); }
static PyObject *nb_matmul(PyObject *x, PyObject *y) { return binop_impl(OP_MATMUL, x, y, false); }

static PyObject *nb_pow(PyObject *x, PyObject *y, PyObject *z)
{
    if (z != Py_None) {
        PyErr_SetString(PyExc_TypeError, "pow() with a modulus is not supported for arrays");
        return NULL;
    }
    return binop_impl(OP_POW, x, y, false);
}

static PyObject *nb_divmod(PyObject *x, PyObject *y)
{
    PyObject *q = binop_impl(OP_FLOORDIV, x, y, false);
    if (!q || q == Py_NotImplemented) return q;
    PyObject *r = binop_impl(OP_MOD, x, y, false);
    if (!r) {
        Py_DECREF(q);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, q, r);
    Py_DECREF(q);
    Py_DECREF(r);
    return t;
}

static PyObject *richcompare(PyObject *x, PyObject *y, int cmp)
{
    static const int map[] = {[Py_LT] = OP_LT, [Py_LE] = OP_LE, [Py_EQ] = OP_EQ,
                              [Py_NE] = OP_NE, [Py_GT] = OP_GT, [Py_GE] = OP_GE};
    return binop_impl(map[cmp], x, y, false);
}

/* ---------------------------------------------------------------- unary operators */

static PyObject *nb_neg(PyObject *x) { return B1(P_neg, x); }
static PyObject *nb_pos(PyObject *x) { return Py_NewRef(x); }
static PyObject *nb_abs(PyObject *x) { return B1(P_abs, x); }
static PyObject *nb_invert(PyObject *x)
{
    oly_aval a;
    if (ext_aval_of(x, &a) < 0) return NULL;
    if (!oly_dtype_is_int(a.dtype) && a.dtype != OLY_BOOL) {
        PyErr_Format(PyExc_TypeError,
                     "bitwise_not is only defined for integer and bool dtypes, got %s",
                     oly_dtype_name(a.dtype));
        return NULL;
    }
    return B1(P_not, x);
}

const PyType_Slot ext_operator_slots[] = {
    {Py_nb_add, FN_SLOT(nb_add)},
    {Py_nb_subtract, FN_SLOT(nb_sub)},
    {Py_nb_multiply, FN_SLOT(nb_mul)},
    {Py_nb_true_divide, FN_SLOT(nb_truediv)},
    {Py_nb_floor_divide, FN_SLOT(nb_floordiv)},
    {Py_nb_remainder, FN_SLOT(nb_mod)},
    {Py_nb_divmod, FN_SLOT(nb_divmod)},
    {Py_nb_power, FN_SLOT(nb_pow)},
    {Py_nb_matrix_multiply, FN_SLOT(nb_matmul)},
    {Py_nb_and, FN_SLOT(nb_and)},
    {Py_nb_or, FN_SLOT(nb_or)},
    {Py_nb_xor, FN_SLOT(nb_xor)},
    {Py_nb_lshift, FN_SLOT(nb_lshift)},
    {Py_nb_rshift, FN_SLOT(nb_rshift)},
    {Py_nb_negative, FN_SLOT(nb_neg)},
    {Py_nb_positive, FN_SLOT(nb_pos)},
    {Py_nb_absolute, FN_SLOT(nb_abs)},
    {Py_nb_invert, FN_SLOT(nb_invert)},
    {Py_tp_richcompare, FN_SLOT(richcompare)},
    {0, NULL},
};

static int type_dtype(PyObject *o, oly_dtype *t, bool *weak)
{
    /* Python scalar types are weak, like JAX's result_type(int). */
    if (o == (PyObject *)&PyBool_Type) {
        *t = OLY_BOOL;
        *weak = false;
    } else if (o == (PyObject *)&PyLong_Type) {
        *t = oly_default_int();
        *weak = true;
    } else if (o == (PyObject *)&PyFloat_Type) {
        *t = oly_default_float();
        *weak = true;
    } else if (o == (PyObject *)&PyComplex_Type) {
        *t = oly_x64_enabled() ? OLY_COMPLEX128 : OLY_COMPLEX64;
        *weak = true;
    } else {
        if (ext_dtype_from_py(o, t) < 0) return -1;
        *t = oly_dtype_canonicalize(*t);
        *weak = false;
    }
    return 0;
}

static PyObject *py_result_type(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "result_type: at least one argument is required");
        return NULL;
    }
    oly_dtype acc = OLY_BOOL;
    bool acc_weak = false;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = args[i];
        oly_dtype t;
        bool w;
        if (PyType_Check(o) || PyArray_DescrCheck(o) || PyUnicode_Check(o)) {
            if (type_dtype(o, &t, &w) < 0) return NULL;
        } else {
            oly_aval a;
            if (ext_aval_of(o, &a) < 0) return NULL;
            t = a.dtype;
            w = a.weak;
        }
        if (i == 0) {
            acc = oly_dtype_canonicalize(t);
            acc_weak = w;
        } else {
            bool nw = false;
            acc = oly_dtype_promote(acc, acc_weak, t, w, &nw);
            acc_weak = nw;
        }
    }
    PyObject *d = ext_dtype_to_numpy(acc);
    if (!d) return NULL;
    return Py_BuildValue("(NO)", d, acc_weak ? Py_True : Py_False);
}

/* The operation named name (or an alias), or -1 with ValueError set. */
static int op_by_name(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(ops[i].name, name) == 0) return i;
    for (size_t i = 0; i < sizeof op_aliases / sizeof op_aliases[0]; i++)
        if (strcmp(op_aliases[i].alias, name) == 0) return op_aliases[i].op;
    PyErr_Format(PyExc_ValueError, "binop: unknown operation '%s'", name);
    return -1;
}

static PyObject *py_binop(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n != 3 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "binop(name: str, x, y) takes exactly 3 arguments");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (!name) return NULL;
    int op = op_by_name(name);
    return op < 0 ? NULL : binop_impl(op, args[1], args[2], true);
}

/* ---------------------------------------------------------------- jnp's binary ufuncs
 *
 * jnp.add and its kin are builtin functions made here (binary_ufunc), so an
 * eager call is one C call: the operands' dtypes are promoted and checked in
 * binop_impl (boolean add / multiply are or / and, boolean subtract a
 * TypeError, as NumPy), with no Python frame and no name lookup per call. A
 * function's self is an empty module, one per operation (so it prints as a
 * builtin function), and its position in op_selves is the operation. */

static PyObject *op_selves[OP_COUNT]; /* owned, for the life of the process */

static PyObject *ufunc_call(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    int op = -1;
    for (int i = 0; i < OP_COUNT && op < 0; i++)
        if (op_selves[i] == self) op = i;
    if (op < 0) {
        PyErr_SetString(PyExc_SystemError, "binary ufunc called with a foreign self");
        return NULL;
    }
    if (n != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly 2 positional arguments (%zd given)",
                     ops[op].name, n);
        return NULL;
    }
    return binop_impl((int)op, args[0], args[1], true);
}

/* binary_ufunc(name, doc, module): the builtin function `name`(x1, x2, /). Its
 * method record (name and doc copied) lives as long as the process, as the
 * functions hold it. */
static PyObject *py_binary_ufunc(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) ||
        !PyUnicode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "binary_ufunc(name: str, doc: str, module: str) takes exactly 3 arguments");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]), *doc = PyUnicode_AsUTF8(args[1]);
    if (!name || !doc) return NULL;
    int op = op_by_name(name);
    if (op < 0) return NULL;
    if (!op_selves[op] && !(op_selves[op] = PyModule_NewObject(args[2]))) return NULL;
    size_t ln = strlen(name) + 1, ld = strlen(doc) + 1;
    PyMethodDef *def = PyMem_RawMalloc(sizeof *def + ln + ld);
    if (!def) return PyErr_NoMemory();
    char *names = (char *)(def + 1);
    memcpy(names, name, ln);
    memcpy(names + ln, doc, ld);
    *def = (PyMethodDef){names, (PyCFunction)(void (*)(void))ufunc_call, METH_FASTCALL,
                         names + ln};
    PyObject *f = PyCFunction_NewEx(def, op_selves[op], args[2]);
    if (!f) PyMem_RawFree(def);
    return f;
}

/* Primitives of unop(), looked up once per name object (jnp passes the same
 * interned strings every call). */
static struct {
    PyObject *name;
    const oly_prim *p;
} unop_cache[64];

static const oly_prim *unop_prim(PyObject *name)
{
    size_t i = 0;
    for (; i < sizeof unop_cache / sizeof unop_cache[0] && unop_cache[i].name; i++)
        if (unop_cache[i].name == name) return unop_cache[i].p;
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return NULL;
    const oly_prim *p = oly_prim_lookup(s);
    if (!p) {
        PyErr_Format(PyExc_ValueError, "bind: unknown primitive '%s'", s);
        return NULL;
    }
    int nf = 0;
    size_t psize = 0;
    oly_prim_fields(p, &nf, &psize);
    if (psize > 0) {
        PyErr_Format(PyExc_ValueError, "unop: the primitive '%s' takes parameters", s);
        return NULL;
    }
    if (i < sizeof unop_cache / sizeof unop_cache[0]) {
        unop_cache[i].name = Py_NewRef(name);
        unop_cache[i].p = p;
    }
    return p;
}

/* unop(name, x, to_float): the unary primitive `name` on the Array or Tracer x
 * (ints and bools first converted to the default float when to_float), as
 * jnp's unary wrappers do; NotImplemented for other x (the caller converts). */
static PyObject *py_unop(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n != 3 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "unop(name: str, x, to_float) takes exactly 3 arguments");
        return NULL;
    }
    PyObject *x = args[1];
    oly_aval ax;
    oly_array *a = ext_array_get(x);
    if (a)
        ax = *oly_array_aval(a);
    else if (ext_is_tracer(x))
        ax = *ext_tracer_aval(x);
    else
        Py_RETURN_NOTIMPLEMENTED;
    const oly_prim *p = unop_prim(args[0]);
    if (!p) return NULL;
    PyObject *xv = Py_NewRef(x);
    if (args[2] == Py_True && !oly_dtype_is_inexact(ax.dtype)) {
        oly_params_convert cp = {.new_dtype = oly_default_float(), .weak = ax.weak};
        Py_SETREF(xv, bind1(P_convert_element_type, &cp, &x, 1));
        if (!xv) return NULL;
    }
    PyObject *res = ext_bind(p, NULL, &xv, 1, NULL, 0);
    Py_DECREF(xv);
    if (res && PyTuple_GET_SIZE(res) == 1) {
        PyObject *r = Py_NewRef(PyTuple_GET_ITEM(res, 0));
        Py_SETREF(res, r);
    }
    return res;
}

/* broadcast_shapes(*shapes): each a sequence of ints or an int. */
static PyObject *py_broadcast_shapes(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    oly_aval acc;
    memset(&acc, 0, sizeof acc);
    for (Py_ssize_t k = 0; k < n; k++) {
        oly_aval s;
        memset(&s, 0, sizeof s);
        PyObject *seq = PyIndex_Check(args[k]) ? PyTuple_Pack(1, args[k])
                                               : PySequence_Tuple(args[k]);
        if (!seq) return NULL;
        Py_ssize_t r = PyTuple_GET_SIZE(seq);
        if (r > OLY_MAX_RANK) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "broadcast_shapes: rank %zd exceeds %d", r,
                                OLY_MAX_RANK);
        }
        s.rank = (int)r;
        for (Py_ssize_t i = 0; i < r; i++) {
            s.dims[i] = PyNumber_AsSsize_t(PyTuple_GET_ITEM(seq, i), PyExc_OverflowError);
            if (s.dims[i] == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
        }
        Py_DECREF(seq);
        if (k == 0) {
            acc = s;
        } else if (!broadcast_fold(&acc, &s)) {
            PyObject *shapes = PyList_New(0);
            for (Py_ssize_t j = 0; shapes && j < n; j++) {
                PyObject *t = PyIndex_Check(args[j]) ? PyTuple_Pack(1, args[j])
                                                     : PySequence_Tuple(args[j]);
                if (!t || PyList_Append(shapes, t) < 0) Py_CLEAR(shapes);
                Py_XDECREF(t);
            }
            if (shapes)
                PyErr_Format(PyExc_ValueError,
                             "Incompatible shapes for broadcasting: shapes=%R", shapes);
            Py_XDECREF(shapes);
            return NULL;
        }
    }
    return ext_shape_tuple(&acc);
}

PyMethodDef ext_operator_methods[] = {
    {"broadcast_shapes", (PyCFunction)(void (*)(void))py_broadcast_shapes, METH_FASTCALL,
     "broadcast_shapes(*shapes) -> the NumPy broadcast shape (ValueError if they do not fit)"},
    {"result_type", (PyCFunction)(void (*)(void))py_result_type, METH_FASTCALL,
     "result_type(*xs) -> (numpy dtype, weak_type): promotion with weak types"},
    {"binop", (PyCFunction)(void (*)(void))py_binop, METH_FASTCALL,
     "binop(name, x, y): the NumPy-style binary operation (promotion, broadcasting)"},
    {"binary_ufunc", (PyCFunction)(void (*)(void))py_binary_ufunc, METH_FASTCALL,
     "binary_ufunc(name, doc, module) -> the builtin function name(x1, x2, /): binop(name, "
     "x1, x2) in one C call"},
    {"unop", (PyCFunction)(void (*)(void))py_unop, METH_FASTCALL,
     "unop(name, x, to_float): the unary primitive on an Array or Tracer (ints and bools in the "
     "default float when to_float); NotImplemented for other values"},
    {NULL, NULL, 0, NULL},
};

PyObject *ext_operand_type_new(const char *name, int basicsize, const PyType_Slot *own,
                               int n_own)
{
    enum { MAX_SLOTS = 96 };
    PyType_Slot slots[MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < n_own && n < MAX_SLOTS - 1; i++) slots[n++] = own[i];
    for (int i = 0; ext_operator_slots[i].slot && n < MAX_SLOTS - 1; i++)
        slots[n++] = ext_operator_slots[i];
    slots[n].slot = 0;
    slots[n].pfunc = NULL;
    /* Without a constructor of its own the type cannot be instantiated from
     * Python (a Tracer made by type(t)() would have no trace behind it). */
    bool has_new = false;
    for (int i = 0; i < n_own; i++) has_new |= own[i].slot == Py_tp_new;
    PyType_Spec spec = {
        .name = name,
        .basicsize = basicsize,
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | (has_new ? 0 : Py_TPFLAGS_DISALLOW_INSTANTIATION),
        .slots = slots,
    };
    PyObject *tp = PyType_FromSpec(&spec);
    if (!tp) return NULL;
    PyObject *prio = PyFloat_FromDouble(100.0);
    if (!prio || PyObject_SetAttrString(tp, "__array_priority__", prio) < 0) {
        Py_XDECREF(prio);
        Py_DECREF(tp);
        return NULL;
    }
    Py_DECREF(prio);
    return tp;
}
