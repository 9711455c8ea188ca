/* array.c — the Array type (one core oly_array per object), NumPy interop
 * (zero-copy read-only views, the buffer protocol), asarray and the dtype
 * conversions between NumPy and olympus.
 *
 * Array is a mutable heap type: the Python package attaches methods
 * (__repr__, __getitem__, sum, ...) to it. The operators come from operators.c
 * (ext_operator_slots), shared with Tracer.
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

#include "structmember.h"

/* Function pointers in PyType_Slot (a void *): ISO C has no such conversion. */
#define FN_SLOT(f) (__extension__(void *)(f))

typedef struct ArrayObject {
    PyObject_HEAD
    oly_array *arr;        /* owned: the global value */
    PyObject *weakreflist; /* owned by the weakref machinery */
    PyObject *shards;      /* owned: NULL, or (sharding, tuple of per-device Arrays) for an
                              array laid out by a NamedSharding (sharded.c). Holds only
                              olympus-made objects, so no cycle runs through it and the
                              type stays out of the cycle collector (no cost per array). */
} ArrayObject;

#define ARR(o) (((ArrayObject *)(o))->arr)

/* ---------------------------------------------------------------- dtypes */

PyObject *ext_dtype_to_numpy(oly_dtype t)
{
    if ((unsigned)t >= OLY_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "invalid olympus dtype %d", (int)t);
        return NULL;
    }
    PyObject *d = ext_st->np_dtype[t];
    if (d) return Py_NewRef(d);
    /* NumPy has no bfloat16: the name stands in for the dtype. */
    return PyUnicode_FromString(oly_dtype_name(t));
}

/* The olympus dtype of a NumPy descriptor; -1 (no exception set) if none. */
static int dtype_from_descr(const PyArray_Descr *d, oly_dtype *out)
{
    int sz = (int)PyDataType_ELSIZE(d);
    switch (d->kind) {
    case 'b': *out = OLY_BOOL; return sz == 1 ? 0 : -1;
    case 'i':
        switch (sz) {
        case 1: *out = OLY_INT8; return 0;
        case 2: *out = OLY_INT16; return 0;
        case 4: *out = OLY_INT32; return 0;
        case 8: *out = OLY_INT64; return 0;
        }
        return -1;
    case 'u':
        switch (sz) {
        case 1: *out = OLY_UINT8; return 0;
        case 2: *out = OLY_UINT16; return 0;
        case 4: *out = OLY_UINT32; return 0;
        case 8: *out = OLY_UINT64; return 0;
        }
        return -1;
    case 'f':
        switch (sz) {
        case 2: *out = OLY_FLOAT16; return 0;
        case 4: *out = OLY_FLOAT32; return 0;
        case 8: *out = OLY_FLOAT64; return 0;
        }
        return -1;
    case 'c':
        switch (sz) {
        case 8: *out = OLY_COMPLEX64; return 0;
        case 16: *out = OLY_COMPLEX128; return 0;
        }
        return -1;
    }
    return -1;
}

int ext_dtype_from_py(PyObject *obj, oly_dtype *out)
{
    if (obj == Py_None) {
        PyErr_SetString(PyExc_TypeError, "expected a dtype (numpy dtype, type or name), got None");
        return -1;
    }
    if (PyUnicode_Check(obj)) {
        const char *s = PyUnicode_AsUTF8(obj);
        if (!s) return -1;
        if (oly_dtype_from_name(s, out) == OLY_OK) return 0;
        oly_error_clear();
    }
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(obj, &d)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "expected a dtype (numpy dtype, type or name), got %R", obj);
        return -1;
    }
    int r = dtype_from_descr(d, out);
    if (r < 0)
        PyErr_Format(PyExc_TypeError, "olympus does not support the dtype %R", (PyObject *)d);
    Py_DECREF(d);
    return r;
}

/* ---------------------------------------------------------------- NumPy views */

static void capsule_release(PyObject *cap)
{
    oly_array_release((oly_array *)PyCapsule_GetPointer(cap, "olympus.array"));
}

/* A new float32 NumPy array holding a bfloat16 buffer's values (read-only). */
static PyObject *bf16_as_float32(const oly_aval *aval, const void *data)
{
    npy_intp dims[OLY_MAX_RANK];
    for (int i = 0; i < aval->rank; i++) dims[i] = (npy_intp)aval->dims[i];
    PyObject *r = PyArray_SimpleNew(aval->rank, dims, NPY_FLOAT32);
    if (!r) return NULL;
    float *dst = PyArray_DATA((PyArrayObject *)r);
    int64_t n = oly_aval_size(aval);
    for (int64_t i = 0; i < n; i++) {
        oly_scalar s = oly_scalar_load(OLY_BFLOAT16, (const char *)data + 2 * i);
        oly_scalar_store(&s, OLY_FLOAT32, &dst[i]);
    }
    PyArray_CLEARFLAGS((PyArrayObject *)r, NPY_ARRAY_WRITEABLE);
    return r;
}

/* base: a new reference, stolen (NULL: none). */
static PyObject *view_with_base(const oly_aval *aval, const void *data, PyObject *base)
{
    if (aval->dtype == OLY_BFLOAT16) {
        Py_XDECREF(base);
        return bf16_as_float32(aval, data);
    }
    npy_intp dims[OLY_MAX_RANK];
    for (int i = 0; i < aval->rank; i++) dims[i] = (npy_intp)aval->dims[i];
    PyArray_Descr *descr = (PyArray_Descr *)ext_st->np_dtype[aval->dtype];
    Py_INCREF(descr);
    int64_t n = oly_aval_size(aval);
    PyObject *r = PyArray_NewFromDescr(&PyArray_Type, descr, aval->rank, dims, NULL,
                                       n ? (void *)data : NULL,
                                       NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
    if (!r) {
        Py_XDECREF(base);
        return NULL;
    }
    PyArray_CLEARFLAGS((PyArrayObject *)r, NPY_ARRAY_WRITEABLE);
    if (n && base) {
        if (PyArray_SetBaseObject((PyArrayObject *)r, base) < 0) { /* steals base */
            Py_DECREF(r);
            return NULL;
        }
    } else {
        Py_XDECREF(base);
    }
    return r;
}

PyObject *ext_numpy_view(oly_array *a)
{
    const oly_aval *aval = oly_array_aval(a);
    PyObject *cap = NULL;
    if (aval->dtype != OLY_BFLOAT16 && oly_aval_size(aval) > 0) {
        cap = PyCapsule_New(oly_array_retain(a), "olympus.array", capsule_release);
        if (!cap) {
            oly_array_release(a);
            return NULL;
        }
    }
    return view_with_base(aval, oly_array_data(a), cap);
}

PyObject *ext_numpy_from_raw(const oly_aval *aval, const void *data, PyObject *owner)
{
    Py_XINCREF(owner);
    return view_with_base(aval, data, owner);
}

/* ---------------------------------------------------------------- conversions */

/* New array holding the n elements at src (dtype from) converted to aval->dtype. */
static int convert_copy(const oly_aval *src_aval, const void *src, oly_dtype to, bool weak,
                        oly_array **out)
{
    oly_aval aval = *src_aval;
    aval.dtype = to;
    aval.weak = weak;
    oly_array *r = NULL;
    oly_status s;
    if (src_aval->dtype == to) {
        s = oly_array_from_data(&aval, src, &r);
        if (s != OLY_OK) return ext_raise(s), -1;
        *out = r;
        return 0;
    }
    if (src_aval->dtype == OLY_BFLOAT16 || to == OLY_BFLOAT16) {
        s = oly_array_new(&aval, &r);
        if (s != OLY_OK) return ext_raise(s), -1;
        char *dst = oly_array_mutable_data(r);
        size_t is = oly_dtype_size(src_aval->dtype), os = oly_dtype_size(to);
        int64_t n = oly_aval_size(&aval);
        for (int64_t i = 0; i < n; i++) {
            oly_scalar v = oly_scalar_load(src_aval->dtype, (const char *)src + is * (size_t)i);
            oly_scalar_store(&v, to, dst + os * (size_t)i);
        }
        *out = r;
        return 0;
    }
    /* NumPy's casts (unsafe casting, as astype). */
    PyObject *v = ext_numpy_from_raw(src_aval, src, NULL);
    if (!v) return -1;
    PyArray_Descr *d = (PyArray_Descr *)ext_st->np_dtype[to];
    Py_INCREF(d);
    PyObject *c = PyArray_CastToType((PyArrayObject *)v, d, 0);
    Py_DECREF(v);
    if (!c) return -1;
    s = oly_array_from_data(&aval, PyArray_DATA((PyArrayObject *)c), &r);
    Py_DECREF(c);
    if (s != OLY_OK) return ext_raise(s), -1;
    *out = r;
    return 0;
}

static int scalar_array(const oly_scalar *v, oly_dtype t, bool weak, oly_array **out)
{
    oly_aval aval;
    memset(&aval, 0, sizeof aval);
    aval.dtype = t;
    aval.weak = weak;
    oly_array *r = NULL;
    oly_status s = oly_array_new(&aval, &r);
    if (s != OLY_OK) return ext_raise(s), -1;
    oly_scalar_store(v, t, oly_array_mutable_data(r));
    *out = r;
    return 0;
}

/* Range check of a Python int for integer dtype t. */
static int int_fits(PyObject *o, oly_dtype t, oly_scalar *v)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0 && t == OLY_UINT64) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (!(u == (unsigned long long)-1 && PyErr_Occurred())) {
            v->dtype = OLY_UINT64;
            v->v.u = u;
            return 0;
        }
        PyErr_Clear();
    }
    bool ok = !overflow;
    if (ok) {
        switch (t) {
        case OLY_INT8: ok = x >= INT8_MIN && x <= INT8_MAX; break;
        case OLY_INT16: ok = x >= INT16_MIN && x <= INT16_MAX; break;
        case OLY_INT32: ok = x >= INT32_MIN && x <= INT32_MAX; break;
        case OLY_INT64: break;
        case OLY_UINT8: ok = x >= 0 && x <= UINT8_MAX; break;
        case OLY_UINT16: ok = x >= 0 && x <= UINT16_MAX; break;
        case OLY_UINT32: ok = x >= 0 && x <= (long long)UINT32_MAX; break;
        case OLY_UINT64: ok = x >= 0; break;
        default: break;
        }
    }
    if (!ok) {
        PyErr_Format(PyExc_OverflowError, "Python int %S too large to convert to %s", o,
                     oly_dtype_name(t));
        return -1;
    }
    if (oly_dtype_is_unsigned_int(t)) {
        v->dtype = OLY_UINT64;
        v->v.u = (uint64_t)x;
    } else {
        v->dtype = OLY_INT64;
        v->v.i = x;
    }
    return 0;
}

/* Python bool/int/float/complex: *handled = 1 and *out set, or -1. */
static int python_scalar(PyObject *obj, int want, oly_array **out, int *handled)
{
    oly_scalar v;
    memset(&v, 0, sizeof v);
    oly_dtype t;
    bool weak = want < 0;
    *handled = 1;
    if (PyArray_IsScalar(obj, Generic)) { /* np.float64 subclasses float: not weak */
        *handled = 0;
        return 0;
    }
    if (PyBool_Check(obj)) {
        v.dtype = OLY_BOOL;
        v.v.i = obj == Py_True;
        t = want < 0 ? OLY_BOOL : (oly_dtype)want;
        weak = false;
    } else if (PyLong_Check(obj)) {
        t = want < 0 ? oly_default_int() : (oly_dtype)want;
        if (oly_dtype_is_int(t)) {
            if (int_fits(obj, t, &v) < 0) return -1;
        } else if (t == OLY_BOOL) {
            int b = PyObject_IsTrue(obj);
            if (b < 0) return -1;
            v.dtype = OLY_BOOL;
            v.v.i = b;
        } else {
            double d = PyLong_AsDouble(obj);
            if (d == -1.0 && PyErr_Occurred()) return -1;
            v.dtype = OLY_FLOAT64;
            v.v.f = d;
        }
    } else if (PyFloat_Check(obj)) {
        t = want < 0 ? oly_default_float() : (oly_dtype)want;
        v.dtype = OLY_FLOAT64;
        v.v.f = PyFloat_AS_DOUBLE(obj);
    } else if (PyComplex_Check(obj)) {
        t = want < 0 ? (oly_x64_enabled() ? OLY_COMPLEX128 : OLY_COMPLEX64) : (oly_dtype)want;
        v.dtype = OLY_COMPLEX128;
        v.v.c[0] = PyComplex_RealAsDouble(obj);
        v.v.c[1] = PyComplex_ImagAsDouble(obj);
    } else {
        *handled = 0;
        return 0;
    }
    return scalar_array(&v, t, weak, out);
}

int ext_to_array(PyObject *obj, int want, oly_array **out)
{
    if (want >= OLY_DTYPE_COUNT) {
        PyErr_Format(PyExc_ValueError, "invalid olympus dtype %d", want);
        return -1;
    }
    oly_array *a = ext_array_get(obj);
    if (a) {
        const oly_aval *av = oly_array_aval(a);
        if (want < 0 || (oly_dtype)want == av->dtype) {
            *out = oly_array_retain(a);
            return 0;
        }
        return convert_copy(av, oly_array_data(a), (oly_dtype)want, false, out);
    }
    if (ext_is_tracer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "expected a concrete array, got the traced value %R (a Tracer cannot be "
                     "converted to a concrete array)",
                     obj);
        return -1;
    }
    int handled = 0;
    if (python_scalar(obj, want, out, &handled) < 0) return -1;
    if (handled) return 0;

    /* NumPy arrays, NumPy scalars, nested sequences, objects with __array__. */
    PyObject *np = PyArray_FromAny(obj, NULL, 0, 0, 0, NULL);
    if (!np) return -1;
    PyArrayObject *npa = (PyArrayObject *)np;
    oly_dtype src;
    if (dtype_from_descr(PyArray_DESCR(npa), &src) < 0) {
        PyErr_Format(PyExc_TypeError,
                     "cannot convert a value of type %s to an olympus array: its NumPy dtype "
                     "%R is not supported",
                     Py_TYPE(obj)->tp_name, (PyObject *)PyArray_DESCR(npa));
        Py_DECREF(np);
        return -1;
    }
    if (PyArray_NDIM(npa) > OLY_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "olympus arrays have rank at most %d, got rank %d",
                     OLY_MAX_RANK, PyArray_NDIM(npa));
        Py_DECREF(np);
        return -1;
    }
    oly_dtype t = want >= 0 ? (oly_dtype)want : oly_dtype_canonicalize(src);
    oly_dtype npt = t == OLY_BFLOAT16 ? OLY_FLOAT32 : t;
    PyArray_Descr *d = (PyArray_Descr *)ext_st->np_dtype[npt];
    Py_INCREF(d);
    PyObject *c = PyArray_FromAny(np, d, 0, 0,
                                  NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST,
                                  NULL);
    Py_DECREF(np);
    if (!c) return -1;
    PyArrayObject *ca = (PyArrayObject *)c;
    int64_t dims[OLY_MAX_RANK];
    for (int i = 0; i < PyArray_NDIM(ca); i++) dims[i] = (int64_t)PyArray_DIM(ca, i);
    oly_aval aval;
    oly_status s = oly_aval_make(npt, PyArray_NDIM(ca), dims, &aval);
    if (s != OLY_OK) {
        Py_DECREF(c);
        return ext_raise(s), -1;
    }
    int r;
    if (t == OLY_BFLOAT16) {
        r = convert_copy(&aval, PyArray_DATA(ca), OLY_BFLOAT16, false, out);
    } else {
        s = oly_array_from_data(&aval, PyArray_DATA(ca), out);
        r = s == OLY_OK ? 0 : (ext_raise(s), -1);
    }
    Py_DECREF(c);
    return r;
}

/* ---------------------------------------------------------------- the type */

oly_array *ext_array_get(PyObject *o)
{
    if (ext_st && ext_st->Array_Type && Py_IS_TYPE(o, ext_st->Array_Type)) return ARR(o);
    return NULL;
}

PyObject *ext_array_wrap(oly_array *a)
{
    if (!a) {
        PyErr_SetString(PyExc_SystemError, "ext_array_wrap: NULL array");
        return NULL;
    }
    ArrayObject *o = PyObject_New(ArrayObject, ext_st->Array_Type);
    if (!o) {
        oly_array_release(a);
        return NULL;
    }
    o->arr = a;
    o->weakreflist = NULL;
    o->shards = NULL;
    return (PyObject *)o;
}

PyObject *ext_array_wrap_sharded(oly_array *a, PyObject *shards)
{
    PyObject *o = ext_array_wrap(a);
    if (o) ((ArrayObject *)o)->shards = Py_NewRef(shards);
    return o;
}

PyObject *ext_array_shards(PyObject *o)
{
    return ((ArrayObject *)o)->shards;
}

static void Array_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    ArrayObject *o = (ArrayObject *)self;
    if (o->weakreflist) PyObject_ClearWeakRefs(self);
    oly_array_release(o->arr);
    o->arr = NULL;
    Py_CLEAR(o->shards);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Array_new(PyTypeObject *Py_UNUSED(tp), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"obj", "dtype", NULL};
    PyObject *obj, *dt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:Array", kwlist, &obj, &dt)) return NULL;
    int want = -1;
    if (dt != Py_None) {
        oly_dtype t;
        if (ext_dtype_from_py(dt, &t) < 0) return NULL;
        want = (int)oly_dtype_canonicalize(t);
    }
    oly_array *a = NULL;
    if (ext_to_array(obj, want, &a) < 0) return NULL;
    return ext_array_wrap(a);
}

PyObject *ext_shape_tuple(const oly_aval *av)
{
    PyObject *t = PyTuple_New(av->rank);
    if (!t) return NULL;
    for (int i = 0; i < av->rank; i++) {
        PyObject *d = PyLong_FromLongLong(av->dims[i]);
        if (!d) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

static PyObject *Array_get_shape(PyObject *self, void *Py_UNUSED(c))
{
    return ext_shape_tuple(oly_array_aval(ARR(self)));
}

static PyObject *Array_get_dtype(PyObject *self, void *Py_UNUSED(c))
{
    return ext_dtype_to_numpy(oly_array_aval(ARR(self))->dtype);
}

static PyObject *Array_get_ndim(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(oly_array_aval(ARR(self))->rank);
}

static PyObject *Array_get_size(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(oly_aval_size(oly_array_aval(ARR(self))));
}

static PyObject *Array_get_weak(PyObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(oly_array_aval(ARR(self))->weak);
}

static PyObject *Array_get_nbytes(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(oly_aval_nbytes(oly_array_aval(ARR(self))));
}

static PyObject *Array_get_itemsize(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(oly_dtype_size(oly_array_aval(ARR(self))->dtype));
}

static PyObject *Array_get_device_id(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(oly_array_device(ARR(self)));
}

static PyObject *Array_get_committed(PyObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(oly_array_committed(ARR(self)));
}

static PyObject *Array_get_shards(PyObject *self, void *Py_UNUSED(c))
{
    PyObject *sh = ((ArrayObject *)self)->shards;
    return Py_NewRef(sh ? sh : Py_None);
}

static PyGetSetDef Array_getset[] = {
    {"_shards", Array_get_shards, NULL,
     "(sharding, per-device Arrays) of an array laid out by a NamedSharding, else None", NULL},
    {"_device_id", Array_get_device_id, NULL, "the number of the array's device", NULL},
    {"committed", Array_get_committed, NULL,
     "True when placed on its device by device_put (or computed from such arrays)", NULL},
    {"shape", Array_get_shape, NULL, "tuple of dimensions", NULL},
    {"dtype", Array_get_dtype, NULL, "numpy dtype of the elements", NULL},
    {"ndim", Array_get_ndim, NULL, "rank", NULL},
    {"size", Array_get_size, NULL, "number of elements", NULL},
    {"weak_type", Array_get_weak, NULL, "True if the value came from a Python scalar", NULL},
    {"nbytes", Array_get_nbytes, NULL, "bytes of data", NULL},
    {"itemsize", Array_get_itemsize, NULL, "bytes per element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *Array_array(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dt = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", kwlist, &dt, &copy)) return NULL;
    oly_status s = oly_array_wait(ARR(self));
    if (s != OLY_OK) return ext_raise(s);
    PyObject *v = ext_numpy_view(ARR(self));
    if (!v) return NULL;
    if (dt != Py_None) {
        PyArray_Descr *d = NULL;
        if (!PyArray_DescrConverter(dt, &d)) {
            Py_DECREF(v);
            return NULL;
        }
        if (!PyArray_EquivTypes(d, PyArray_DESCR((PyArrayObject *)v))) {
            if (copy == Py_False) {
                Py_DECREF(d);
                Py_DECREF(v);
                PyErr_SetString(PyExc_ValueError,
                                "__array__: converting to another dtype needs a copy, but "
                                "copy=False was given");
                return NULL;
            }
            PyObject *c = PyArray_CastToType((PyArrayObject *)v, d, 0); /* steals d */
            Py_DECREF(v);
            return c;
        }
        Py_DECREF(d);
    }
    if (copy == Py_True) {
        PyObject *c = PyArray_NewCopy((PyArrayObject *)v, NPY_CORDER);
        Py_DECREF(v);
        return c;
    }
    return v;
}

static PyObject *Array_block_until_ready(PyObject *self, PyObject *Py_UNUSED(a))
{
    oly_status s;
    oly_array *arr = ARR(self);
    Py_BEGIN_ALLOW_THREADS
    s = oly_array_wait(arr);
    Py_END_ALLOW_THREADS
    if (s != OLY_OK) return ext_raise(s);
    return Py_NewRef(self);
}

static PyObject *Array_is_ready(PyObject *self, PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(oly_array_ready(ARR(self)));
}

/* The single element of a size-1 array (what converts to a Python scalar). */
static int single_value(PyObject *self, const char *what, oly_scalar *out)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    if (oly_aval_size(av) != 1) {
        PyErr_Format(PyExc_TypeError,
                     "only size-1 arrays can be converted to Python scalars (%s() of an "
                     "array with %lld elements)",
                     what, (long long)oly_aval_size(av));
        return -1;
    }
    oly_status s = oly_array_wait(ARR(self));
    if (s != OLY_OK) return ext_raise(s), -1;
    *out = oly_scalar_load(av->dtype, oly_array_data(ARR(self)));
    return 0;
}

static double scalar_real(const oly_scalar *v)
{
    if (oly_dtype_is_complex(v->dtype)) return v->v.c[0];
    if (oly_dtype_is_float(v->dtype)) return v->v.f;
    if (oly_dtype_is_unsigned_int(v->dtype)) return (double)v->v.u;
    return (double)v->v.i;
}

static PyObject *Array_float(PyObject *self)
{
    oly_scalar v;
    if (single_value(self, "float", &v) < 0) return NULL;
    return PyFloat_FromDouble(scalar_real(&v));
}

static PyObject *Array_int(PyObject *self)
{
    oly_scalar v;
    if (single_value(self, "int", &v) < 0) return NULL;
    if (oly_dtype_is_inexact(v.dtype)) return PyLong_FromDouble(scalar_real(&v));
    if (oly_dtype_is_unsigned_int(v.dtype)) return PyLong_FromUnsignedLongLong(v.v.u);
    return PyLong_FromLongLong(v.v.i);
}

static PyObject *Array_index(PyObject *self)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    if (av->rank != 0 || !oly_dtype_is_int(av->dtype)) {
        PyErr_Format(PyExc_TypeError,
                     "only integer scalar arrays can be converted to a scalar index (got an "
                     "array of dtype %s and rank %d)",
                     oly_dtype_name(av->dtype), av->rank);
        return NULL;
    }
    return Array_int(self);
}

static int Array_bool(PyObject *self)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    int64_t n = oly_aval_size(av);
    if (n > 1) {
        PyErr_SetString(PyExc_ValueError,
                        "The truth value of an array with more than one element is ambiguous. "
                        "Use a.any() or a.all()");
        return -1;
    }
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "The truth value of an empty array is ambiguous. Use a.size > 0 to check "
                        "that an array is not empty.");
        return -1;
    }
    oly_scalar v;
    if (single_value(self, "bool", &v) < 0) return -1;
    if (oly_dtype_is_complex(v.dtype)) return v.v.c[0] != 0 || v.v.c[1] != 0;
    if (oly_dtype_is_float(v.dtype)) return v.v.f != 0;
    return v.v.i != 0;
}

static PyObject *Array_complex(PyObject *self, PyObject *Py_UNUSED(a))
{
    oly_scalar v;
    if (single_value(self, "complex", &v) < 0) return NULL;
    if (oly_dtype_is_complex(v.dtype)) return PyComplex_FromDoubles(v.v.c[0], v.v.c[1]);
    return PyComplex_FromDoubles(scalar_real(&v), 0.0);
}

static Py_ssize_t Array_len(PyObject *self)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    if (av->rank == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized object");
        return -1;
    }
    return (Py_ssize_t)av->dims[0];
}

static PyObject *Array_repr(PyObject *self)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    PyObject *v = ext_numpy_view(ARR(self));
    if (!v) return NULL;
    PyObject *body = PyObject_Str(v);
    Py_DECREF(v);
    if (!body) return NULL;
    PyObject *r = PyUnicode_FromFormat("Array(%U, dtype=%s%s)", body, oly_dtype_name(av->dtype),
                                       av->weak ? ", weak_type=True" : "");
    Py_DECREF(body);
    return r;
}

static PyObject *Array_self(PyObject *self, PyObject *Py_UNUSED(a))
{
    return Py_NewRef(self); /* immutable: copies are the object itself */
}

static int Array_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    const oly_aval *av = oly_array_aval(ARR(self));
    if (flags & PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "olympus arrays are read-only");
        return -1;
    }
    static const char *const fmt[OLY_DTYPE_COUNT] = {
        [OLY_BOOL] = "?",    [OLY_INT8] = "b",     [OLY_INT16] = "h",   [OLY_INT32] = "i",
        [OLY_INT64] = "q",   [OLY_UINT8] = "B",    [OLY_UINT16] = "H",  [OLY_UINT32] = "I",
        [OLY_UINT64] = "Q",  [OLY_FLOAT16] = "e",  [OLY_FLOAT32] = "f", [OLY_FLOAT64] = "d",
        [OLY_COMPLEX64] = "Zf", [OLY_COMPLEX128] = "Zd",
    };
    if (!fmt[av->dtype]) {
        PyErr_Format(PyExc_BufferError, "%s arrays do not support the buffer protocol",
                     oly_dtype_name(av->dtype));
        return -1;
    }
    oly_status s = oly_array_wait(ARR(self));
    if (s != OLY_OK) return ext_raise(s), -1;
    Py_ssize_t *ss = PyMem_Malloc(sizeof(Py_ssize_t) * (2 * (size_t)av->rank + 1));
    if (!ss) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t item = (Py_ssize_t)oly_dtype_size(av->dtype);
    Py_ssize_t stride = item;
    for (int i = av->rank - 1; i >= 0; i--) {
        ss[i] = (Py_ssize_t)av->dims[i];
        ss[av->rank + i] = stride;
        stride *= (Py_ssize_t)av->dims[i];
    }
    view->buf = (void *)oly_array_data(ARR(self));
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)oly_aval_nbytes(av);
    view->readonly = 1;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt[av->dtype] : NULL;
    view->ndim = av->rank;
    view->shape = (flags & PyBUF_ND) ? ss : NULL;
    view->strides = ((flags & PyBUF_STRIDES) == PyBUF_STRIDES) ? ss + av->rank : NULL;
    view->suboffsets = NULL;
    view->internal = ss;
    return 0;
}

static void Array_releasebuffer(PyObject *Py_UNUSED(self), Py_buffer *view)
{
    PyMem_Free(view->internal);
    view->internal = NULL;
}

static PyMethodDef Array_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))Array_array, METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None): a read-only NumPy view (zero-copy)"},
    {"block_until_ready", Array_block_until_ready, METH_NOARGS,
     "block_until_ready(): wait until the value is computed; returns self"},
    {"is_ready", Array_is_ready, METH_NOARGS,
     "is_ready(): whether the value is computed (False while its computation is queued)"},
    {"__complex__", Array_complex, METH_NOARGS, "complex(a) of a size-1 array"},
    {"__copy__", Array_self, METH_NOARGS, "arrays are immutable: returns self"},
    {"__deepcopy__", (PyCFunction)(void (*)(void))Array_self, METH_O,
     "arrays are immutable: returns self"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Array_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ArrayObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* ---------------------------------------------------------------- module functions */

static PyObject *py_asarray(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"obj", "dtype", NULL};
    PyObject *obj, *dt = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:asarray", kwlist, &obj, &dt)) return NULL;
    int want = -1;
    if (dt != Py_None) {
        oly_dtype t;
        if (ext_dtype_from_py(dt, &t) < 0) return NULL;
        want = (int)oly_dtype_canonicalize(t);
    }
    oly_array *a = ext_array_get(obj);
    if (a && (want < 0 || (oly_dtype)want == oly_array_aval(a)->dtype)) return Py_NewRef(obj);
    a = NULL;
    if (ext_to_array(obj, want, &a) < 0) return NULL;
    return ext_array_wrap(a);
}

static PyObject *py_canonicalize_dtype(PyObject *Py_UNUSED(m), PyObject *arg)
{
    oly_dtype t;
    if (ext_dtype_from_py(arg, &t) < 0) return NULL;
    return ext_dtype_to_numpy(oly_dtype_canonicalize(t));
}

static PyObject *py_device_put(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *obj;
    int device;
    if (!PyArg_ParseTuple(args, "O!i:device_put", ext_st->Array_Type, &obj, &device)) return NULL;
    oly_array *out;
    oly_status s = oly_array_put(ARR(obj), device, &out);
    if (s != OLY_OK) return ext_raise(s);
    return ext_array_wrap(out);
}

PyMethodDef ext_array_methods[] = {
    {"device_put", py_device_put, METH_VARARGS,
     "device_put(array, device_id) -> the array committed to that CPU device (no copy)"},
    {"asarray", (PyCFunction)(void (*)(void))py_asarray, METH_VARARGS | METH_KEYWORDS,
     "asarray(obj, dtype=None) -> Array (Python scalars give weak arrays; copies NumPy data)"},
    {"canonicalize_dtype", py_canonicalize_dtype, METH_O,
     "canonicalize_dtype(dtype) -> numpy dtype after the x64 switch"},
    {NULL, NULL, 0, NULL},
};

int ext_array_init(PyObject *module)
{
    /* Array's own slots followed by the operators shared with Tracer. */
    PyType_Slot own[] = {
        {Py_tp_dealloc, FN_SLOT(Array_dealloc)},
        {Py_tp_new, FN_SLOT(Array_new)},
        {Py_tp_repr, FN_SLOT(Array_repr)},
        {Py_tp_hash, FN_SLOT(PyObject_HashNotImplemented)},
        {Py_tp_getset, Array_getset},
        {Py_tp_methods, Array_methods},
        {Py_tp_members, Array_members},
        {Py_tp_doc, (void *)"An immutable array of olympus (one device buffer)."},
        {Py_nb_bool, FN_SLOT(Array_bool)},
        {Py_nb_float, FN_SLOT(Array_float)},
        {Py_nb_int, FN_SLOT(Array_int)},
        {Py_nb_index, FN_SLOT(Array_index)},
        {Py_mp_length, FN_SLOT(Array_len)},
        {Py_bf_getbuffer, FN_SLOT(Array_getbuffer)},
        {Py_bf_releasebuffer, FN_SLOT(Array_releasebuffer)},
    };
    PyObject *tp = ext_operand_type_new("olympus._core.Array", (int)sizeof(ArrayObject), own,
                                        (int)(sizeof own / sizeof own[0]));
    if (!tp) return -1;
    ext_st->Array_Type = (PyTypeObject *)tp;
    if (PyModule_AddObjectRef(module, "Array", tp) < 0) return -1;
    return 0;
}
