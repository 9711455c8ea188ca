/* ffi.c — olympus.ffi in C: the registry of FFI targets (native C functions
 * with the host-function ABI), their bindings to a call's attributes, and
 * _core.ffi_call, which binds pure_callback (or io_callback, for
 * has_side_effect) with a binding as its host function.
 *
 * A target is what register_ffi_target registered: the C function, its user
 * data, and an oly_host_fn whose release runs the user's release hook when the
 * last reference goes (the registry's, or that of a binding a program still
 * holds). A binding is one target with one set of attributes: an oly_host_fn
 * whose user data holds the function, the user data and the attributes in one
 * block. Its call (binding_call) is the whole hot path: it points the frame at
 * the attributes and a stack buffer for the error message, and calls the
 * target. No Python, no GIL, no allocation. A failure becomes the status
 * OLY_ERR_CALLBACK with the message "ffi_call to target 'NAME' failed
 * (STATUS): TEXT", raised as CallbackError.
 *
 * Equal attributes give the same binding (cached, bounded), so eager calls
 * hit the eager executable cache and equal traces give equal programs.
 * Registry and cache are guarded by the GIL; a binding may be released on
 * any thread (it takes the GIL only to drop its Python references).
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <stdlib.h>
#include <string.h>

enum {
    CACHE_MAX = 256,          /* bindings kept for reuse */
    ARRAY_MAX = 1 << 20,      /* bytes an array attribute may have */
    ERROR_SIZE = 1024,        /* bytes of a kernel's error message */
};

static PyObject *registry; /* owned: name -> capsule "olympus.ffi_target" */
static PyObject *bindings; /* owned: (target capsule, attribute bytes) -> capsule "olympus.ffi_binding" */


/* ---------------------------------------------------------------- targets */

typedef struct target {
    oly_host_fn *hf;              /* owned: fn and user; releasing it runs the user's release */
    oly_host_call_fn fn;
    void *user;                   /* borrowed: the user's, kept valid by keep */
    void (*release)(void *user);
    PyObject *keep;               /* owned: the objects fn, user and release came from */
} target;

static void target_capsule_free(PyObject *cap)
{
    target *t = PyCapsule_GetPointer(cap, "olympus.ffi_target");
    if (!t) {
        PyErr_Clear();
        return;
    }
    oly_host_fn_release(t->hf); /* may run the user's release hook, which may need keep */
    Py_XDECREF(t->keep);
    free(t);
}

/* The address held by o: a capsule's pointer or an int; None is NULL when
 * allowed. 0, or -1 with an exception. */
static int address_of(PyObject *o, const char *what, int none_ok, void **out)
{
    if (o == Py_None && none_ok) {
        *out = NULL;
        return 0;
    }
    if (PyCapsule_CheckExact(o)) {
        void *p = PyCapsule_GetPointer(o, PyCapsule_GetName(o));
        if (!p) return -1;
        *out = p;
        return 0;
    }
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        void *p = PyLong_AsVoidPtr(o);
        if (!p && PyErr_Occurred()) return -1;
        *out = p;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "register_ffi_target: %s must be a PyCapsule or an address, got %.200s",
                 what, Py_TYPE(o)->tp_name);
    return -1;
}

typedef void (*release_fn)(void *);

/* Object pointer to function pointer: not a conversion ISO C has, hence memcpy. */
static oly_host_call_fn as_call(void *p)
{
    oly_host_call_fn f;
    _Static_assert(sizeof f == sizeof p, "function and object pointers differ in size");
    memcpy(&f, &p, sizeof f);
    return f;
}

static release_fn as_release(void *p)
{
    release_fn f;
    memcpy(&f, &p, sizeof f);
    return f;
}

/* _core.ffi_register(name, fn, user_data, release, keep): fn a capsule or an
 * address (not NULL); user_data and release a capsule, an address or None.
 * keep: the objects to keep alive as long as the target. Registering the
 * same name again is a no-op when fn, user_data and release are the same,
 * else a ValueError. */
static PyObject *py_ffi_register(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *name, *fn_o, *user_o, *release_o, *keep;
    if (!PyArg_ParseTuple(args, "UOOOO:ffi_register", &name, &fn_o, &user_o, &release_o, &keep))
        return NULL;
    const char *cname = PyUnicode_AsUTF8(name);
    if (!cname) return NULL;
    if (!*cname) {
        PyErr_SetString(PyExc_ValueError, "register_ffi_target: the name is empty");
        return NULL;
    }
    void *fp, *user, *rp;
    if (address_of(fn_o, "fn", 0, &fp) < 0 || address_of(user_o, "user_data", 1, &user) < 0 ||
        address_of(release_o, "release", 1, &rp) < 0)
        return NULL;
    if (!fp) {
        PyErr_Format(PyExc_ValueError, "register_ffi_target: fn for '%s' is a NULL function pointer",
                     cname);
        return NULL;
    }
    PyObject *old = PyDict_GetItemWithError(registry, name); /* borrowed */
    if (old) {
        target *t = PyCapsule_GetPointer(old, "olympus.ffi_target");
        if (!t) return NULL;
        if (t->fn == as_call(fp) && t->user == user && t->release == as_release(rp)) Py_RETURN_NONE;
        PyErr_Format(PyExc_ValueError,
                     "register_ffi_target: an FFI target named '%s' is already registered for "
                     "platform 'cpu' with another function or user data (targets are not "
                     "replaced: use another name, or unregister_ffi_target first)",
                     cname);
        return NULL;
    }
    if (PyErr_Occurred()) return NULL;
    target *t = calloc(1, sizeof *t);
    if (!t) return PyErr_NoMemory();
    t->fn = as_call(fp);
    t->user = user;
    t->release = as_release(rp);
    oly_status s = oly_host_fn_new(cname, t->fn, user, t->release, &t->hf);
    if (s != OLY_OK) {
        free(t);
        return ext_raise(s);
    }
    t->keep = Py_NewRef(keep);
    PyObject *cap = PyCapsule_New(t, "olympus.ffi_target", target_capsule_free);
    if (!cap) {
        /* not registered: the user's release hook must not run */
        Py_DECREF(t->keep);
        free(t);
        return NULL;
    }
    int r = PyDict_SetItem(registry, name, cap);
    Py_DECREF(cap);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

/* Drops the cached bindings of target capsule cap (all when cap is NULL). */
static int purge_bindings(PyObject *cap)
{
    PyObject *keys = PyDict_Keys(bindings);
    if (!keys) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (cap && PyTuple_GET_ITEM(k, 0) != cap) continue;
        if (PyDict_DelItem(bindings, k) < 0) {
            Py_DECREF(keys);
            return -1;
        }
    }
    Py_DECREF(keys);
    return 0;
}

/* _core.ffi_unregister(name): True if it was registered. Programs that use
 * the target keep it; its release hook runs when the last one goes. */
static PyObject *py_ffi_unregister(PyObject *Py_UNUSED(m), PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "unregister_ffi_target: the name must be a str, got %.200s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    PyObject *cap = PyDict_GetItemWithError(registry, name);
    if (!cap) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_FALSE;
    }
    Py_INCREF(cap);
    int r = purge_bindings(cap);
    if (r == 0) r = PyDict_DelItem(registry, name);
    Py_DECREF(cap);
    if (r < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *py_ffi_targets(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    PyObject *keys = PyDict_Keys(registry);
    if (keys && PyList_Sort(keys) < 0) Py_CLEAR(keys);
    return keys;
}

/* _core.ffi_capsule(address): a PyCapsule (no name) holding the address. */
static PyObject *py_ffi_capsule(PyObject *Py_UNUSED(m), PyObject *addr)
{
    void *p;
    if (address_of(addr, "the function pointer", 0, &p) < 0) return NULL;
    if (!p) {
        PyErr_SetString(PyExc_ValueError, "pycapsule: the function pointer is NULL");
        return NULL;
    }
    return PyCapsule_New(p, NULL, NULL);
}

/* ---------------------------------------------------------------- attributes */

/* One attribute as parsed, before it is copied into a binding. */
typedef struct pattr {
    PyObject *name;         /* borrowed (from the sorted items list) */
    const char *cname;
    Py_ssize_t name_len;
    oly_ffi_attr_kind kind;
    oly_scalar scalar;      /* zeroed, then set: compared bytewise */
    const char *str;        /* borrowed UTF-8 of the value */
    Py_ssize_t str_len;
    PyArrayObject *arr;     /* owned: C-contiguous, aligned, native byte order */
    oly_aval aval;
} pattr;

static int attr_error(PyObject *name, PyObject *value, const char *why)
{
    PyErr_Format(PyExc_TypeError, "ffi_call: attribute '%U' %s, got %.200s", name, why,
                 Py_TYPE(value)->tp_name);
    return -1;
}

/* The scalar in the 0-d array a. */
static void scalar_from_0d(PyArrayObject *a, oly_dtype t, oly_scalar *out)
{
    oly_scalar s = oly_scalar_load(t, PyArray_DATA(a));
    memset(out, 0, sizeof *out);
    out->dtype = t;
    switch (t) {
    case OLY_BOOL: case OLY_INT8: case OLY_INT16: case OLY_INT32: case OLY_INT64:
        out->v.i = s.v.i;
        break;
    case OLY_UINT8: case OLY_UINT16: case OLY_UINT32: case OLY_UINT64:
        out->v.u = s.v.u;
        break;
    case OLY_COMPLEX64: case OLY_COMPLEX128:
        out->v.c[0] = s.v.c[0];
        out->v.c[1] = s.v.c[1];
        break;
    default:
        out->v.f = s.v.f;
        break;
    }
}

/* Classifies value: 0, or -1 with an exception. */
static int parse_attr(PyObject *name, PyObject *value, pattr *p)
{
    memset(p, 0, sizeof *p);
    p->name = name;
    p->cname = PyUnicode_AsUTF8AndSize(name, &p->name_len);
    if (!p->cname) return -1;
    p->kind = OLY_FFI_ATTR_SCALAR;
    if (PyBool_Check(value)) {
        p->scalar.dtype = OLY_BOOL;
        p->scalar.v.i = value == Py_True;
    } else if (PyLong_Check(value)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow == 0) {
            p->scalar.dtype = OLY_INT64;
            p->scalar.v.i = v;
        } else {
            unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(value) : 0;
            if (overflow < 0 || (u == (unsigned long long)-1 && PyErr_Occurred())) {
                PyErr_Clear();
                PyErr_Format(PyExc_OverflowError,
                             "ffi_call: attribute '%U' = %R does not fit in 64 bits", name, value);
                return -1;
            }
            p->scalar.dtype = OLY_UINT64;
            p->scalar.v.u = u;
        }
    } else if (PyFloat_Check(value)) {
        p->scalar.dtype = OLY_FLOAT64;
        p->scalar.v.f = PyFloat_AS_DOUBLE(value);
    } else if (PyComplex_Check(value)) {
        p->scalar.dtype = OLY_COMPLEX128;
        p->scalar.v.c[0] = PyComplex_RealAsDouble(value);
        p->scalar.v.c[1] = PyComplex_ImagAsDouble(value);
    } else if (PyUnicode_Check(value)) {
        p->kind = OLY_FFI_ATTR_STRING;
        p->str = PyUnicode_AsUTF8AndSize(value, &p->str_len);
        if (!p->str) return -1;
        if ((Py_ssize_t)strlen(p->str) != p->str_len) {
            PyErr_Format(PyExc_ValueError, "ffi_call: attribute '%U' contains a NUL character",
                         name);
            return -1;
        }
    } else if (PyArray_IsScalar(value, Generic) || PyArray_Check(value)) {
        PyArray_Descr *d = PyArray_IsScalar(value, Generic)
                               ? PyArray_DescrFromScalar(value)
                               : (PyArray_Descr *)Py_NewRef(PyArray_DESCR((PyArrayObject *)value));
        if (!d) return -1;
        oly_dtype t;
        if (ext_dtype_from_py((PyObject *)d, &t) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "ffi_call: attribute '%U' has the dtype %R, which "
                         "olympus does not support", name, (PyObject *)d);
            Py_DECREF(d);
            return -1;
        }
        /* C order, aligned, native byte order: what the kernel reads. */
        PyArray_Descr *native = PyArray_DescrNewByteorder(d, NPY_NATIVE);
        Py_DECREF(d);
        if (!native) return -1;
        PyObject *a = PyArray_FromAny(value, native, 0, 0,
                                      NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
        if (!a) return -1;
        PyArrayObject *arr = (PyArrayObject *)a;
        int rank = PyArray_NDIM(arr);
        if (rank == 0) {
            scalar_from_0d(arr, t, &p->scalar);
            Py_DECREF(a);
        } else {
            if (rank > OLY_MAX_RANK || PyArray_NBYTES(arr) > ARRAY_MAX) {
                PyErr_Format(PyExc_ValueError,
                             "ffi_call: attribute '%U' is an array of %zd bytes and rank %d; "
                             "attributes are at most %d bytes and rank %d (pass big arrays as "
                             "arguments)",
                             name, (Py_ssize_t)PyArray_NBYTES(arr), rank, (int)ARRAY_MAX,
                             OLY_MAX_RANK);
                Py_DECREF(a);
                return -1;
            }
            int64_t dims[OLY_MAX_RANK];
            for (int k = 0; k < rank; k++) dims[k] = PyArray_DIMS(arr)[k];
            if (oly_aval_make(t, rank, dims, &p->aval) != OLY_OK) {
                PyErr_Format(PyExc_ValueError, "ffi_call: attribute '%U': %s", name,
                             oly_last_error());
                oly_error_clear();
                Py_DECREF(a);
                return -1;
            }
            p->kind = OLY_FFI_ATTR_ARRAY;
            p->arr = arr;
        }
    } else if (ext_is_tracer(value) || ext_array_get(value)) {
        return attr_error(name, value,
                          "is an array of the computation; attributes are static values "
                          "(Python or NumPy scalars, str, NumPy arrays): pass it as an argument, "
                          "or np.asarray(...) of a concrete value");
    } else {
        return attr_error(name, value,
                          "must be a Python or NumPy scalar, a str or a NumPy array "
                          "(np.asarray(...) makes one of a sequence)");
    }
    if (p->kind == OLY_FFI_ATTR_SCALAR) p->aval.dtype = p->scalar.dtype; /* rank 0 */
    return 0;
}

/* Serialises the attributes into bytes that are equal exactly when the
 * attributes are (names, kinds, dtypes, shapes, bit patterns): the cache key. */
static PyObject *attrs_key(const pattr *ps, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const pattr *p = &ps[i];
        total += (size_t)p->name_len + 1 + 2 + sizeof p->aval.rank + (size_t)p->aval.rank * 8;
        total += p->kind == OLY_FFI_ATTR_SCALAR ? sizeof p->scalar.v
               : p->kind == OLY_FFI_ATTR_STRING ? (size_t)p->str_len + 1
                                                : (size_t)PyArray_NBYTES(p->arr);
    }
    PyObject *key = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!key) return NULL;
    char *w = PyBytes_AS_STRING(key);
    for (int i = 0; i < n; i++) {
        const pattr *p = &ps[i];
        memcpy(w, p->cname, (size_t)p->name_len + 1);
        w += p->name_len + 1;
        *w++ = (char)p->kind;
        *w++ = (char)p->aval.dtype;
        memcpy(w, &p->aval.rank, sizeof p->aval.rank);
        w += sizeof p->aval.rank;
        memcpy(w, p->aval.dims, (size_t)p->aval.rank * 8);
        w += (size_t)p->aval.rank * 8;
        if (p->kind == OLY_FFI_ATTR_SCALAR) {
            memcpy(w, &p->scalar.v, sizeof p->scalar.v);
            w += sizeof p->scalar.v;
        } else if (p->kind == OLY_FFI_ATTR_STRING) {
            memcpy(w, p->str, (size_t)p->str_len + 1);
            w += p->str_len + 1;
        } else {
            memcpy(w, PyArray_DATA(p->arr), (size_t)PyArray_NBYTES(p->arr));
            w += PyArray_NBYTES(p->arr);
        }
    }
    return key;
}

/* ---------------------------------------------------------------- bindings */

typedef struct binding {
    oly_host_call_fn fn;    /* the target's function and user data, copied */
    void *user;             /* borrowed: valid while target and keep are held */
    oly_ffi_ctx proto;      /* target name and attributes (pointing into block) */
    oly_host_fn *target;    /* owned reference */
    PyObject *keep;         /* owned: the target's keep-alive objects */
    void *block;            /* owned: attrs, names, strings, array data, the target name */
} binding;

static __attribute__((noinline)) oly_status binding_failed(const binding *b, oly_status st,
                                                           const char *msg)
{
    char status[32];
    if ((unsigned)st < OLY_STATUS_COUNT)
        snprintf(status, sizeof status, "%s", oly_status_name(st));
    else
        snprintf(status, sizeof status, "status %d", (int)st);
    if (!*msg)
        return oly_host_fail(OLY_ERR_CALLBACK,
                             "ffi_call to target '%s' failed (%s) and gave no message (report "
                             "failures with oly_ffi_fail)",
                             b->proto.target, status);
    return oly_host_fail(OLY_ERR_CALLBACK, "ffi_call to target '%s' failed (%s): %s",
                         b->proto.target, status, msg);
}

/* The hot path: the kernel gets the attributes and an error buffer through
 * the frame, and is called directly. */
static oly_status binding_call(void *user, oly_callback_frame *fr)
{
    const binding *b = user;
    char err[ERROR_SIZE];
    err[0] = '\0';
    oly_ffi_ctx ctx = b->proto;
    ctx.error = err;
    ctx.error_size = sizeof err;
    fr->ffi = &ctx;
    oly_status st = b->fn(b->user, fr);
    fr->ffi = NULL;
    if (__builtin_expect(st != OLY_OK, 0)) {
        err[sizeof err - 1] = '\0';
        return binding_failed(b, st, err);
    }
    return OLY_OK;
}

static void binding_release(void *user)
{
    binding *b = user;
    if (!b) return;
    oly_host_fn_release(b->target); /* may run the user's release hook, which may need keep */
    ext_drop_with_gil(b->keep);
    free(b->block);
    free(b);
}

static void binding_capsule_free(PyObject *cap)
{
    oly_host_fn_release(PyCapsule_GetPointer(cap, "olympus.ffi_binding"));
}

/* "ffi_call:NAME" or "ffi_call:NAME{a=1,eps=1e-05,w=float32[3]}": the host
 * function's name, printed in programs and error messages. New reference. */
static PyObject *binding_name(const char *target_name, const pattr *ps, int n, PyObject *items)
{
    PyObject *parts = PyList_New(0);
    if (!parts) return NULL;
    for (int i = 0; i < n; i++) {
        const pattr *p = &ps[i];
        PyObject *s;
        if (p->kind == OLY_FFI_ATTR_ARRAY) {
            char shape[32 + 24 * OLY_MAX_RANK];
            ext_format_shaped(shape, sizeof shape, &p->aval);
            s = PyUnicode_FromFormat("%U=%s", p->name, shape);
        } else {
            PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
            /* NumPy scalars show their dtype: float32(2.0) is not 2.0 */
            PyObject *r = PyArray_IsScalar(v, Generic) || PyArray_Check(v)
                              ? PyUnicode_FromFormat("%s(%S)", oly_dtype_name(p->scalar.dtype), v)
                              : PyObject_Repr(v);
            if (r && PyUnicode_GET_LENGTH(r) > 24) {
                PyObject *cut = PyUnicode_Substring(r, 0, 21);
                Py_SETREF(r, cut ? PyUnicode_FromFormat("%U...", cut) : NULL);
                Py_XDECREF(cut);
            }
            s = r ? PyUnicode_FromFormat("%U=%U", p->name, r) : NULL;
            Py_XDECREF(r);
        }
        if (!s || PyList_Append(parts, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(parts);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *name;
    if (n == 0) {
        name = PyUnicode_FromFormat("ffi_call:%s", target_name);
    } else {
        PyObject *sep = PyUnicode_FromString(",");
        PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
        name = joined ? PyUnicode_FromFormat("ffi_call:%s{%U}", target_name, joined) : NULL;
        Py_XDECREF(sep);
        Py_XDECREF(joined);
    }
    Py_DECREF(parts);
    return name;
}

/* A new binding of target t (registered as target_name) to the attributes:
 * a new reference to its host function, or NULL with an exception. */
static oly_host_fn *binding_new(const target *t, const char *target_name, const pattr *ps, int n,
                                PyObject *items)
{
    size_t tn = strlen(target_name) + 1;
    size_t size = (size_t)n * sizeof(oly_ffi_attr) + tn;
    for (int i = 0; i < n; i++) {
        size += (size_t)ps[i].name_len + 1;
        if (ps[i].kind == OLY_FFI_ATTR_STRING) size += (size_t)ps[i].str_len + 1;
        if (ps[i].kind == OLY_FFI_ATTR_ARRAY) size += (size_t)PyArray_NBYTES(ps[i].arr) + 15;
    }
    PyObject *pyname = binding_name(target_name, ps, n, items);
    const char *hname = pyname ? PyUnicode_AsUTF8(pyname) : NULL;
    if (!hname) {
        Py_XDECREF(pyname);
        return NULL;
    }
    binding *b = calloc(1, sizeof *b);
    char *block = malloc(size ? size : 1);
    if (!b || !block) {
        free(b);
        free(block);
        Py_DECREF(pyname);
        PyErr_NoMemory();
        return NULL;
    }
    /* The attribute records first (malloc's alignment), then bytes. */
    oly_ffi_attr *attrs = (oly_ffi_attr *)block;
    char *w = block + (size_t)n * sizeof(oly_ffi_attr);
    for (int i = 0; i < n; i++) {
        const pattr *p = &ps[i];
        oly_ffi_attr *a = &attrs[i];
        memset(a, 0, sizeof *a);
        a->kind = p->kind;
        a->aval = p->aval;
        a->scalar = p->scalar;
        memcpy(w, p->cname, (size_t)p->name_len + 1);
        a->name = w;
        w += p->name_len + 1;
        if (p->kind == OLY_FFI_ATTR_STRING) {
            memcpy(w, p->str, (size_t)p->str_len + 1);
            a->string = w;
            a->size = p->str_len;
            w += p->str_len + 1;
        }
    }
    for (int i = 0; i < n; i++) { /* array data, each 16-byte aligned */
        const pattr *p = &ps[i];
        if (p->kind != OLY_FFI_ATTR_ARRAY) continue;
        uintptr_t at = ((uintptr_t)w + 15) & ~(uintptr_t)15;
        w = (char *)at;
        memcpy(w, PyArray_DATA(p->arr), (size_t)PyArray_NBYTES(p->arr));
        attrs[i].data = w;
        attrs[i].size = oly_aval_size(&p->aval);
        w += PyArray_NBYTES(p->arr);
    }
    memcpy(w, target_name, tn);
    b->fn = t->fn;
    b->user = t->user;
    b->proto.target = w;
    b->proto.n_attrs = n;
    b->proto.attrs = n ? attrs : NULL;
    b->block = block;
    b->target = oly_host_fn_retain(t->hf);
    b->keep = Py_NewRef(t->keep);
    oly_host_fn *hf;
    oly_status s = oly_host_fn_new(hname, binding_call, b, binding_release, &hf);
    Py_DECREF(pyname);
    if (s != OLY_OK) {
        binding_release(b);
        ext_raise(s);
        return NULL;
    }
    /* A kernel reads its arguments during the call only (it has no API to
     * keep an array), so programs pass them as plain buffers. */
    oly_host_fn_borrow_args(hf);
    return hf;
}

/* The cached binding of target capsule cap to these attributes, or a new one
 * (cached). A new reference, or NULL with an exception. */
static oly_host_fn *binding_for(PyObject *cap, const char *target_name, PyObject *items)
{
    target *t = PyCapsule_GetPointer(cap, "olympus.ffi_target");
    if (!t) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    if (n > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "ffi_call: too many attributes");
        return NULL;
    }
    pattr *ps = PyMem_Calloc((size_t)n + 1, sizeof *ps);
    if (!ps) return (oly_host_fn *)PyErr_NoMemory();
    oly_host_fn *hf = NULL;
    PyObject *key = NULL, *ck = NULL;
    int parsed = 0;
    for (; parsed < n; parsed++) {
        PyObject *item = PyList_GET_ITEM(items, parsed);
        if (parse_attr(PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1), &ps[parsed]) < 0)
            goto done;
    }
    key = attrs_key(ps, (int)n);
    ck = key ? PyTuple_Pack(2, cap, key) : NULL;
    if (!ck) goto done;
    PyObject *hit = PyDict_GetItemWithError(bindings, ck); /* borrowed */
    if (hit) {
        hf = oly_host_fn_retain(PyCapsule_GetPointer(hit, "olympus.ffi_binding"));
        goto done;
    }
    if (PyErr_Occurred()) goto done;
    hf = binding_new(t, target_name, ps, (int)n, items);
    if (!hf) goto done;
    if (PyDict_GET_SIZE(bindings) >= CACHE_MAX) { /* the oldest goes */
        Py_ssize_t pos = 0;
        PyObject *k0, *v0;
        if (PyDict_Next(bindings, &pos, &k0, &v0)) {
            Py_INCREF(k0);
            int r = PyDict_DelItem(bindings, k0);
            Py_DECREF(k0);
            if (r < 0) PyErr_Clear();
        }
    }
    PyObject *c = PyCapsule_New(oly_host_fn_retain(hf), "olympus.ffi_binding", binding_capsule_free);
    if (!c) {
        oly_host_fn_release(hf); /* the capsule's reference */
        PyErr_Clear();           /* not cached: still usable */
    } else {
        if (PyDict_SetItem(bindings, ck, c) < 0) PyErr_Clear();
        Py_DECREF(c);
    }
done:
    for (int i = 0; i < parsed; i++) Py_XDECREF(ps[i].arr);
    PyMem_Free(ps);
    Py_XDECREF(key);
    Py_XDECREF(ck);
    return hf;
}

/* ---------------------------------------------------------------- _core.ffi_call */

/* _core.ffi_call(name, result_avals, args, attrs, has_side_effect=False,
 * vmap_method=None, input_output_aliases=None) -> list of results. attrs: a
 * dict of attribute values. Without aliases the call binds pure_callback (or
 * io_callback with has_side_effect); with (input, output) pairs it binds
 * buffer_callback, whose buffer plan makes each aliased result start as its
 * input (in place when nothing else reads the input, else as a copy). */
static PyObject *py_ffi_call(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "result_avals", "args", "attrs", "has_side_effect",
                             "vmap_method", "input_output_aliases", NULL};
    PyObject *name, *ravals, *cargs, *attrs, *vm = Py_None, *aliases = Py_None;
    int side = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UOOO!|pOO:ffi_call", kwlist, &name, &ravals,
                                     &cargs, &PyDict_Type, &attrs, &side, &vm, &aliases))
        return NULL;
    const char *cname = PyUnicode_AsUTF8(name);
    if (!cname) return NULL;
    PyObject *cap = PyDict_GetItemWithError(registry, name); /* borrowed */
    if (!cap) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError,
                         "ffi_call: no FFI target named '%s' is registered for platform 'cpu' "
                         "(olympus.ffi.register_ffi_target registers one)",
                         cname);
        return NULL;
    }
    int vmap_method;
    if (ext_parse_vmap_method(vm, &vmap_method) < 0) return NULL;
    bool aliased = aliases != Py_None && PyObject_IsTrue(aliases) == 1;
    const oly_prim *prim = oly_prim_lookup(aliased ? "buffer_callback"
                                           : side  ? "io_callback"
                                                   : "pure_callback");
    if (!prim) {
        PyErr_SetString(PyExc_NotImplementedError, "ffi_call: the callback primitive is missing");
        return NULL;
    }
    oly_aval *avals = NULL;
    int n_res = 0;
    PyObject *items = NULL, *seq = NULL, *result = NULL;
    oly_host_fn *hf = NULL;
    oly_io_alias *al = NULL;
    int n_al = 0;
    Py_INCREF(cap);
    if (ext_parse_result_avals(ravals, &avals, &n_res) < 0) goto done;
    seq = PySequence_Fast(cargs, "ffi_call: args must be a sequence");
    if (!seq) goto done;
    if (aliased && ext_parse_aliases(aliases, PySequence_Fast_ITEMS(seq),
                                     PySequence_Fast_GET_SIZE(seq), avals, n_res, &al, &n_al) < 0)
        goto done;
    items = PyDict_Items(attrs);
    if (!items || PyList_Sort(items) < 0) goto done; /* names are unique: sorted by name */
    hf = binding_for(cap, cname, items);
    if (!hf) goto done;
    oly_params_callback params = {
        .callback = hf,
        .result_avals = n_res ? avals : NULL,
        .n_results = n_res,
        .vmap_method = vmap_method,
        .ordered = false,
        .has_side_effect = aliased && side,
        .aliases = al,
        .n_aliases = n_al,
    };
    PyObject *tuple = ext_bind(prim, &params, PySequence_Fast_ITEMS(seq),
                               PySequence_Fast_GET_SIZE(seq), NULL, 0);
    if (!tuple) goto done;
    result = PySequence_List(tuple);
    Py_DECREF(tuple);
done:
    if (hf) oly_host_fn_release(hf);
    PyMem_Free(al);
    Py_DECREF(cap);
    Py_XDECREF(items);
    Py_XDECREF(seq);
    PyMem_Free(avals);
    return result;
}

static PyObject *py_ffi_cache_clear(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    if (purge_bindings(NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

PyMethodDef ext_ffi_methods[] = {
    {"ffi_register", py_ffi_register, METH_VARARGS,
     "ffi_register(name, fn, user_data, release, keep): register an FFI target; fn a PyCapsule\n"
     "or an address of an oly_host_call_fn; user_data, release a PyCapsule, an address or None;\n"
     "keep: objects kept alive with the target."},
    {"ffi_unregister", py_ffi_unregister, METH_O,
     "ffi_unregister(name) -> bool: forget a target (programs that use it keep it)."},
    {"ffi_targets", py_ffi_targets, METH_NOARGS, "ffi_targets() -> sorted list of target names"},
    {"ffi_capsule", py_ffi_capsule, METH_O, "ffi_capsule(address) -> PyCapsule holding it"},
    {"ffi_cache_clear", py_ffi_cache_clear, METH_NOARGS,
     "ffi_cache_clear(): drop the cached bindings of targets to attributes"},
    {"ffi_call", (PyCFunction)(void (*)(void))py_ffi_call, METH_VARARGS | METH_KEYWORDS,
     "ffi_call(name, result_avals, args, attrs, has_side_effect=False, vmap_method=None) -> list\n"
     "Bind pure_callback (io_callback when has_side_effect) calling the FFI target name with\n"
     "the attributes attrs (a dict); result_avals is a list of (shape, dtype)."},
    {NULL, NULL, 0, NULL},
};

int ext_ffi_init(PyObject *module)
{
    if (!registry && !(registry = PyDict_New())) return -1;
    if (!bindings && !(bindings = PyDict_New())) return -1;
    return 0;
}
