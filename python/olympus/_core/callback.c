/* callback.c — Python callables as olympus host functions, and _core.callback.
 *
 * A Python callable becomes an oly_host_fn whose user data owns the callable.
 * The trampoline takes the GIL, wraps the arguments as read-only NumPy arrays
 * over the argument arrays (zero-copy; the view keeps its array alive, so a
 * callback may keep it), calls the function and, except for debug_callback,
 * checks its results (count, np.asarray, x64 canonicalisation, shape, dtype:
 * CALLBACK_SEMANTICS §1.1 texts) and copies them into the result buffers.
 *
 * Any Python exception (from the function or the checks) leaves as the error
 * payload (the exception instance, with its traceback) and the message
 * "<kind> failed: <name>: <Type>: <text>"; module.c turns it into CallbackError
 * from that exception. No Python error is ever left set across the C boundary.
 *
 * The round trip is the hot path of every Python callback, so it does the
 * least a trampoline can (bench/profiles/README.md has the measurements):
 * argument views are made with the NumPy C API and handed over by vectorcall;
 * a view gets no reference to its core array unless the callback kept it (its
 * refcount is still above ours once the call returned: then the reference is
 * attached as the view's base, before the run can reuse the memory); a view
 * nobody kept, still exactly as made, is kept per host function and argument
 * position and re-pointed at the next call's argument (no view made or freed
 * per call); per host function the kind is decided once; a result
 * that is already a C-contiguous ndarray of the declared dtype and shape is
 * copied without any conversion. Everything else takes the general path
 * (pytree flattening, np.asarray semantics through PyArray_FromAny).
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <stdlib.h>
#include <string.h>

static PyObject *np_ascontiguousarray;  /* owned: numpy.ascontiguousarray */

/* ---------------------------------------------------------------- user data */

typedef struct pyfn {
    PyObject *fn;      /* owned (decref'd with the GIL) */
    PyObject *in_tree; /* owned; NULL: fn(*leaves), else fn(*args, **kwargs) with
                        * (args, kwargs) = in_tree.unflatten(leaves) */
    char *name;        /* owned (malloc) */
    /* Guarded by the GIL: the last frame kind seen (a primitive's name, a
     * constant per kernel) and whether it is debug_callback, so the kind costs
     * a pointer comparison per call. */
    const char *kind_seen;
    int kind_debug;    /* debug_callback: the result is ignored */
    int kind_outside;  /* outside_call: fn(device, transforms, *leaves) */
    /* A direct tap (outside_call from id_tap without a device): fn is the
     * user's tap function, called fn(arg, parsed transforms) with arg the one
     * leaf, or in_tree.unflatten(leaves) when in_tree is set. */
    int tap_direct;
    PyObject *transforms; /* owned: the last transforms text passed (taps repeat it) */
    PyObject *parsed;     /* owned: tap_parser(transforms), for direct taps */
    /* Guarded by the GIL: for the first N_SPARE argument positions, the view
     * of the last call when nobody kept it (refcount 1, base None, layout and
     * flags as made, no weak reference or buffer info): the next call
     * re-points it at its argument instead of making and freeing a view. Taken
     * out of the slot while in use, so a nested call makes its own. */
    PyObject *spare[4];
    oly_host_fn *hf; /* borrowed: the host function that owns this user data */
    bool is_tap;     /* an id_tap's function, called by the outfeed receiver */
} pyfn;

enum { N_SPARE = 4 };

/* True when this thread may take the GIL to drop references. After
 * finalization (or while another thread finalizes) the reference is leaked. */
static int python_alive(void)
{
    if (!Py_IsInitialized()) return 0;
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing() && !PyGILState_Check()) return 0;
#else
    if (_Py_IsFinalizing() && !PyGILState_Check()) return 0;
#endif
    return 1;
}

void ext_drop_with_gil(void *o)
{
    if (!o || !python_alive()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)o);
    PyGILState_Release(g);
}

void ext_payload_free(void *p) { ext_drop_with_gil(p); }

void ext_payload_free_reraise(void *p) { ext_payload_free(p); }

/* Host functions this module made -> their Python callable, so callback
 * statistics can name the function (int(address) -> callable; an entry goes
 * when its host function is released). Guarded by the GIL. */
static PyObject *hf_callables;

static void registry_forget(oly_host_fn *hf)
{
    if (!hf_callables || !hf) return;
    PyObject *key = PyLong_FromVoidPtr(hf);
    if (!key || PyDict_DelItem(hf_callables, key) < 0) PyErr_Clear();
    Py_XDECREF(key);
}

static void pyfn_release(void *user)
{
    pyfn *u = user;
    if (!u) return;
    if (python_alive()) {
        PyGILState_STATE g = PyGILState_Ensure();
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        registry_forget(u->hf);
        PyErr_Restore(t, v, tb);
        Py_XDECREF(u->fn);
        Py_XDECREF(u->in_tree);
        Py_XDECREF(u->transforms);
        Py_XDECREF(u->parsed);
        for (int i = 0; i < N_SPARE; i++) Py_XDECREF(u->spare[i]);
        PyGILState_Release(g);
    }
    free(u->name);
    free(u);
}

/* ---------------------------------------------------------------- result checks */

/* The olympus dtype of a NumPy dtype, or -1 when it has none. */
static int dtype_of_descr(PyArray_Descr *d)
{
    int sz = (int)PyDataType_ELSIZE(d);
    switch (d->kind) {
    case 'b': return sz == 1 ? OLY_BOOL : -1;
    case 'i':
        return sz == 1 ? OLY_INT8 : sz == 2 ? OLY_INT16 : sz == 4 ? OLY_INT32 : sz == 8 ? OLY_INT64 : -1;
    case 'u':
        return sz == 1 ? OLY_UINT8 : sz == 2 ? OLY_UINT16 : sz == 4 ? OLY_UINT32
             : sz == 8 ? OLY_UINT64 : -1;
    case 'f': return sz == 2 ? OLY_FLOAT16 : sz == 4 ? OLY_FLOAT32 : sz == 8 ? OLY_FLOAT64 : -1;
    case 'c': return sz == 8 ? OLY_COMPLEX64 : sz == 16 ? OLY_COMPLEX128 : -1;
    default: {
        /* e.g. bfloat16 from ml_dtypes */
        oly_dtype t;
        if (ext_dtype_from_py((PyObject *)d, &t) == 0) return (int)t;
        PyErr_Clear();
        return -1;
    }
    }
}

/* "(2, 3)", "(3,)", "()" — Python's tuple repr. */
static void format_shape(char *buf, size_t n, int rank, const int64_t *dims)
{
    size_t k = 0;
    int w = snprintf(buf, n, "(");
    k = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < rank && k < n; i++) {
        w = snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)dims[i]);
        if (w > 0) k += (size_t)w;
    }
    if (k < n) snprintf(buf + k, n - k, rank == 1 ? ",)" : ")");
}

/* Checks result leaf #i against the declared aval and copies it into dst.
 * 0, or -1 with a Python exception. */
static int store_result(PyObject *leaf, int i, const oly_aval *aval, void *dst)
{
    /* np.asarray(leaf): no copy for ndarrays, base class for subclasses. */
    PyObject *arr = PyArray_FromAny(leaf, NULL, 0, 0, NPY_ARRAY_ENSUREARRAY, NULL);
    if (!arr) return -1;
    if (!PyArray_Check(arr)) {
        PyErr_Format(PyExc_RuntimeError, "np.asarray returned %.200s for return value #%d",
                     Py_TYPE(arr)->tp_name, i);
        goto fail;
    }
    int t = dtype_of_descr(PyArray_DESCR((PyArrayObject *)arr));
    if (t >= 0) {
        oly_dtype c = oly_dtype_canonicalize((oly_dtype)t);
        if (c != (oly_dtype)t && ext_st->np_dtype[c]) {
            PyObject *conv = PyObject_CallMethod(arr, "astype", "O", ext_st->np_dtype[c]);
            if (!conv) goto fail;
            Py_SETREF(arr, conv);
            t = (int)c;
        }
    }
    PyArrayObject *a = (PyArrayObject *)arr;
    int rank = PyArray_NDIM(a);
    const npy_intp *dims = PyArray_DIMS(a);
    int same = rank == aval->rank;
    for (int d = 0; same && d < rank; d++) same = dims[d] == aval->dims[d];
    if (!same) {
        char want[512], got[512];
        int64_t gd[NPY_MAXDIMS];
        for (int d = 0; d < rank && d < NPY_MAXDIMS; d++) gd[d] = dims[d];
        format_shape(want, sizeof want, aval->rank, aval->dims);
        format_shape(got, sizeof got, rank, gd);
        PyErr_Format(PyExc_RuntimeError,
                     "Incorrect output shape for return value #%d: Expected: %s, Actual: %s", i,
                     want, got);
        goto fail;
    }
    if (t != (int)aval->dtype) {
        if (t >= 0) {
            PyErr_Format(PyExc_RuntimeError,
                         "Incorrect output dtype for return value #%d: Expected: %s, Actual: %s",
                         i, oly_dtype_name(aval->dtype), oly_dtype_name((oly_dtype)t));
        } else {
            PyErr_Format(PyExc_RuntimeError,
                         "Incorrect output dtype for return value #%d: Expected: %s, Actual: %S",
                         i, oly_dtype_name(aval->dtype), (PyObject *)PyArray_DESCR(a));
        }
        goto fail;
    }
    /* memcpy below copies bytes: alignment does not matter, only the layout. */
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISNOTSWAPPED(a)) {
        /* Fortran order, strided views, foreign byte order: relay out. */
        PyObject *dt = ext_st->np_dtype[aval->dtype];
        PyObject *c = dt ? PyObject_CallFunctionObjArgs(np_ascontiguousarray, arr, dt, NULL)
                         : PyObject_CallOneArg(np_ascontiguousarray, arr);
        if (!c) goto fail;
        Py_SETREF(arr, c);
        a = (PyArrayObject *)arr;
        if (!PyArray_Check(arr) || !PyArray_IS_C_CONTIGUOUS(a)) {
            PyErr_Format(PyExc_RuntimeError, "cannot lay out return value #%d contiguously", i);
            goto fail;
        }
    }
    size_t nbytes = oly_aval_nbytes(aval), have = (size_t)PyArray_ITEMSIZE(a);
    for (int d = 0; d < PyArray_NDIM(a); d++) have *= (size_t)PyArray_DIMS(a)[d];
    if (have != nbytes) {
        PyErr_Format(PyExc_RuntimeError, "return value #%d has %zu bytes, expected %zu", i, have,
                     nbytes);
        goto fail;
    }
    if (nbytes) memcpy(dst, PyArray_DATA(a), nbytes);
    Py_DECREF(arr);
    return 0;
fail:
    Py_DECREF(arr);
    return -1;
}

/* The common case in one step: res is exactly an ndarray (a pytree leaf) of
 * the declared dtype object, shape and C layout. 1: copied; 0: not this case. */
static int store_fast(PyObject *res, const oly_aval *aval, void *dst)
{
    if (!PyArray_CheckExact(res)) return 0;
    PyArrayObject *a = (PyArrayObject *)res;
    if ((PyObject *)PyArray_DESCR(a) != ext_st->np_dtype[aval->dtype] ||
        PyArray_NDIM(a) != aval->rank || !PyArray_ISCARRAY_RO(a))
        return 0;
    const npy_intp *dims = PyArray_DIMS(a);
    size_t nbytes = (size_t)PyArray_ITEMSIZE(a);
    for (int d = 0; d < aval->rank; d++) {
        if (dims[d] != aval->dims[d]) return 0;
        nbytes *= (size_t)dims[d];
    }
    if (nbytes) memcpy(dst, PyArray_DATA(a), nbytes);
    return 1;
}

/* The general path (pytree flattening, per-leaf checks); out of line so the
 * hot path keeps few registers. */
static __attribute__((noinline)) int store_results_slow(PyObject *res, oly_callback_frame *fr)
{
    PyObject *leaves, *td;
    if (ext_tree_flatten(res, NULL, &leaves, &td) < 0) return -1;
    Py_DECREF(td);
    Py_ssize_t n = PyList_GET_SIZE(leaves);
    if (n != fr->n_results) {
        PyErr_Format(PyExc_RuntimeError,
                     "Mismatched number of outputs from callback. Expected: %d, Actual: %zd",
                     fr->n_results, n);
        Py_DECREF(leaves);
        return -1;
    }
    for (int i = 0; i < fr->n_results; i++) {
        if (store_result(PyList_GET_ITEM(leaves, i), i, &fr->result_avals[i], fr->results[i]) < 0) {
            Py_DECREF(leaves);
            return -1;
        }
    }
    Py_DECREF(leaves);
    return 0;
}

static inline int store_results(PyObject *res, oly_callback_frame *fr)
{
    if (fr->n_results == 1 && store_fast(res, &fr->result_avals[0], fr->results[0])) return 0;
    return store_results_slow(res, fr);
}

/* A read-only NumPy array for argument i. Over an argument array, the view's
 * base is None for now (so NumPy refuses to make it writeable): keep_args
 * gives it a reference to the array if the callback kept it. Without arrays
 * (or for bfloat16, shown as a float32 copy) the view owns what it shows. */
static __attribute__((noinline)) PyObject *arg_view_slow(oly_callback_frame *fr, int i)
{
    oly_array *a;
    oly_status s = oly_array_from_data(&fr->arg_avals[i], fr->args[i], &a);
    if (s != OLY_OK) {
        PyErr_SetString(PyExc_MemoryError, oly_last_error());
        return NULL;
    }
    PyObject *v = ext_numpy_view(a);
    oly_array_release(a);
    return v;
}

static inline PyObject *arg_view(pyfn *u, oly_callback_frame *fr, oly_array *arr, int i)
{
    if (arr) {
        const oly_aval *aval = oly_array_aval(arr);
        PyArray_Descr *descr = (PyArray_Descr *)ext_st->np_dtype[aval->dtype];
        npy_intp dims[OLY_MAX_RANK];
        int rank = aval->rank, empty = 0;
        for (int d = 0; d < rank; d++) {
            dims[d] = (npy_intp)aval->dims[d];
            empty |= dims[d] == 0;
        }
        if (aval->dtype == OLY_BFLOAT16 || !descr || empty) return ext_numpy_view(arr);
        void *data = (void *)oly_array_data(arr);
        PyArrayObject_fields *sp = i < N_SPARE ? (PyArrayObject_fields *)u->spare[i] : NULL;
        if (sp && sp->descr == descr && sp->nd == rank && ((uintptr_t)data & 15) == 0) {
            int same = 1;
            for (int d = 0; d < rank; d++) same &= sp->dimensions[d] == dims[d];
            if (same) {
                u->spare[i] = NULL;
                sp->data = data;
                return (PyObject *)sp;
            }
        }
        Py_INCREF(descr);
        PyObject *v = PyArray_NewFromDescr(&PyArray_Type, descr, rank, dims, NULL, data,
                                           NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
        if (!v) return NULL;
        /* What PyArray_SetBaseObject(v, None) does for a fresh view, without
         * its checks: release_args may replace the base later. */
        ((PyArrayObject_fields *)v)->base = Py_NewRef(Py_None);
        return v;
    }
    return arg_view_slow(fr, i);
}

static void capsule_release(PyObject *cap)
{
    oly_array_release((oly_array *)PyCapsule_GetPointer(cap, "olympus.array"));
}

/* After the call: a view that someone still references (the callback kept it,
 * or a view or buffer derived from it) takes a reference to its array as its
 * base, replacing None, so the array outlives the run. Derived views have the
 * view itself as their base (NumPy stops collapsing bases at None). Then our
 * references are dropped. Runs with an exception pending or not: a failure
 * here (out of memory) is written as unraisable, never lost silently. */
/* 1 when view v, which only we reference, is exactly as arg_view made it
 * (type, base None, C-contiguous strides, flags, no weak reference or cached
 * buffer info), so it can stand for the next call's argument. */
static inline int reusable(PyObject *v)
{
    PyArrayObject_fields *f = (PyArrayObject_fields *)v;
    if (Py_TYPE(v) != &PyArray_Type || f->base != Py_None || f->weakreflist || f->_buffer_info ||
        (f->flags & ~NPY_ARRAY_F_CONTIGUOUS) != (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED))
        return 0;
    npy_intp stride = PyDataType_ELSIZE(f->descr);
    for (int d = f->nd - 1; d >= 0; d--) {
        if (f->strides[d] != stride) return 0;
        stride *= f->dimensions[d];
    }
    return 1;
}

static inline void release_args(pyfn *u, oly_callback_frame *fr, PyObject **argv, int n)
{
    oly_array *const *arrays = fr->arg_arrays;
    for (int i = 0; i < n; i++) {
        PyObject *v = argv[i];
        /* Every argument is an ndarray (arg_view); only lazy views have None.
         * The refcount test first: a view nobody kept needs nothing more. */
        oly_array *arr;
        if (Py_REFCNT(v) > 1 && arrays && (arr = arrays[i]) &&
            PyArray_BASE((PyArrayObject *)v) == Py_None) {
            PyObject *cap = PyCapsule_New(oly_array_retain(arr), "olympus.array", capsule_release);
            if (cap) {
                PyArrayObject_fields *f = (PyArrayObject_fields *)v;
                f->base = cap;
                Py_DECREF(Py_None);
            } else {
                /* Cannot keep the array alive: leave the memory to the run
                 * and say so (the callback's copy may change later). */
                oly_array_release(arr);
                PyObject *t, *e, *tb;
                PyErr_Fetch(&t, &e, &tb);
                PyErr_WriteUnraisable(v);
                PyErr_Restore(t, e, tb);
            }
        } else if (i < N_SPARE && Py_REFCNT(v) == 1 && arrays && arrays[i] && reusable(v)) {
            /* Our reference moves to the slot; a spare there (from a nested
             * call, or of another shape) goes. */
            PyObject *old = u->spare[i];
            u->spare[i] = v;
            Py_XDECREF(old);
            continue;
        }
        Py_DECREF(v);
    }
}

/* u->in_tree.unflatten(argv[0..n)). New reference or NULL. */
static PyObject *unflatten_args(pyfn *u, PyObject **argv, int n)
{
    PyObject *leaves = PyList_New(n);
    if (!leaves) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(leaves, i, Py_NewRef(argv[i]));
    PyObject *tree = ext_tree_unflatten(u->in_tree, leaves);
    Py_DECREF(leaves);
    return tree;
}

/* Calls the function through in_tree (fn(*args, **kwargs)). */
static __attribute__((noinline)) PyObject *call_tree(pyfn *u, PyObject **argv, int n)
{
    PyObject *res = NULL;
    PyObject *ak = unflatten_args(u, argv, n);
    if (ak && (!PyTuple_Check(ak) || PyTuple_GET_SIZE(ak) != 2 ||
               !PyTuple_Check(PyTuple_GET_ITEM(ak, 0)) || !PyDict_Check(PyTuple_GET_ITEM(ak, 1)))) {
        PyErr_SetString(PyExc_SystemError, "callback: in_tree must describe (args, kwargs)");
        Py_CLEAR(ak);
    }
    if (ak) {
        PyObject *kw = PyTuple_GET_ITEM(ak, 1);
        res = PyObject_Call(u->fn, PyTuple_GET_ITEM(ak, 0), PyDict_GET_SIZE(kw) ? kw : NULL);
        Py_DECREF(ak);
    }
    return res;
}

/* outside_call: fn(device, transforms, *leaves), all positional (no keyword
 * names to match per tap). The transforms text of the last call is kept as a
 * str: a tap passes the same object each time, so the receiver can tell it
 * unchanged by identity. */
static PyObject *tap_parser; /* owned: text -> the transforms a tap function gets */

/* A direct tap: fn(arg, transforms), the transforms parsed once per text. */
static PyObject *call_tap(pyfn *u, PyObject **argv, int n)
{
    if (!u->parsed) {
        if (!tap_parser) {
            PyErr_SetString(PyExc_SystemError, "outside_call: no tap transforms parser is set");
            return NULL;
        }
        if (!(u->parsed = PyObject_CallOneArg(tap_parser, u->transforms))) return NULL;
    }
    PyObject *arg = u->in_tree ? unflatten_args(u, argv, n) : Py_NewRef(argv[0]);
    if (!arg) return NULL;
    PyObject *call[2] = {arg, Py_NewRef(u->parsed)}; /* a nested call may replace u's */
    PyObject *res = PyObject_Vectorcall(u->fn, call, 2, NULL);
    Py_DECREF(call[0]);
    Py_DECREF(call[1]);
    return res;
}

static __attribute__((noinline)) PyObject *call_outside(pyfn *u, oly_callback_frame *fr,
                                                        PyObject **argv, int n)
{
    const char *text = fr->transforms ? fr->transforms : "";
    if (!u->transforms || strcmp(PyUnicode_AsUTF8(u->transforms), text) != 0) {
        PyObject *t = PyUnicode_FromString(text);
        if (!t) return NULL;
        Py_XSETREF(u->transforms, t);
        Py_CLEAR(u->parsed);
    }
    if (u->tap_direct) return call_tap(u, argv, n);
    enum { SMALL = 8 };
    PyObject *small[SMALL + 2];
    PyObject **all = n <= SMALL ? small : PyMem_Malloc(((size_t)n + 2) * sizeof *all);
    PyObject *dev = PyLong_FromLong(fr->device);
    PyObject *tr = Py_NewRef(u->transforms); /* a nested call may replace u's */
    PyObject *res = NULL;
    if (!all) PyErr_NoMemory();
    if (all && dev) {
        all[0] = dev;
        all[1] = tr;
        for (int i = 0; i < n; i++) all[i + 2] = argv[i];
        res = PyObject_Vectorcall(u->fn, all, (size_t)n + 2, NULL);
    }
    if (all && all != small) PyMem_Free(all);
    Py_XDECREF(dev);
    Py_DECREF(tr);
    return res;
}

/* Calls the function and stores its results. 0, or -1 with a Python exception. */
static inline __attribute__((always_inline)) int call_python(pyfn *u, oly_callback_frame *fr, int is_debug)
{
    enum { SMALL = 8 };
    PyObject *small[SMALL];
    int n = fr->n_args;
    PyObject **argv = n <= SMALL ? small : PyMem_Malloc((size_t)n * sizeof *argv);
    if (!argv) {
        PyErr_NoMemory();
        return -1;
    }
    int made = 0, rc = -1;
    PyObject *res = NULL;
    oly_array *const *arrays = fr->arg_arrays;
    for (; made < n; made++)
        if (!(argv[made] = arg_view(u, fr, arrays ? arrays[made] : NULL, made))) goto done;
    if (__builtin_expect(u->kind_outside, 0))
        res = call_outside(u, fr, argv, n);
    else
        res = !u->in_tree ? PyObject_Vectorcall(u->fn, argv, (size_t)n, NULL) : call_tree(u, argv, n);
    if (!res) goto done;
    /* debug_callback has no results and ignores what the function returns. */
    rc = is_debug ? 0 : store_results(res, fr);
    Py_DECREF(res);
done:
    release_args(u, fr, argv, made);
    if (argv != small) PyMem_Free(argv);
    return rc;
}

/* As the reference does, a failing callback is also logged: an ERROR record
 * "olympus.<api> failed" with the exception's traceback, on the logger
 * olympus._src.callback (pure and io callbacks) or olympus._src.debugging
 * (debug callbacks). KeyboardInterrupt and SystemExit are not logged. A
 * failure of logging itself is reported as unraisable, never raised. */
static void log_failure(const char *kind, PyObject *exc)
{
    if (!PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_Exception)) return;
    bool debug = strcmp(kind, "debug_callback") == 0;
    bool outside = strcmp(kind, "outside_call") == 0;
    const char *msg = debug                                  ? "olympus.debug.callback failed"
                      : strcmp(kind, "io_callback") == 0     ? "olympus.io_callback failed"
                      : strcmp(kind, "pure_callback") == 0   ? "olympus.pure_callback failed"
                      : strcmp(kind, "buffer_callback") == 0
                          ? "olympus.experimental.buffer_callback failed"
                      : outside ? "olympus.experimental.host_callback function failed"
                                : "olympus callback failed";
    PyObject *logging = PyImport_ImportModule("logging");
    PyObject *logger = logging ? PyObject_CallMethod(logging, "getLogger", "s",
                                                     debug     ? "olympus._src.debugging"
                                                     : outside ? "olympus.experimental.host_callback"
                                                               : "olympus._src.callback")
                               : NULL;
    PyObject *error = logger ? PyObject_GetAttrString(logger, "error") : NULL;
    PyObject *args = error ? Py_BuildValue("(s)", msg) : NULL;
    PyObject *kw = args ? Py_BuildValue("{sO}", "exc_info", exc) : NULL;
    PyObject *r = kw ? PyObject_Call(error, args, kw) : NULL;
    if (!r) PyErr_WriteUnraisable(exc);
    Py_XDECREF(r);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(error);
    Py_XDECREF(logger);
    Py_XDECREF(logging);
}

/* Turns the pending Python exception into the error payload and message. */
static __attribute__((noinline)) oly_status fail_with_exception(const char *name, const char *kind)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (!value) { /* cannot happen after a failure; be safe */
        Py_XDECREF(type);
        Py_XDECREF(tb);
        return oly_host_fail(OLY_ERR_CALLBACK, "%s failed: %s: unknown error", kind, name);
    }
    if (tb) PyException_SetTraceback(value, tb);
    log_failure(kind, value);
    const char *tname = PyExceptionInstance_Check(value) ? Py_TYPE(value)->tp_name : "Exception";
    const char *dot = strrchr(tname, '.');
    if (dot && strncmp(tname, "builtins.", 9) == 0) tname = dot + 1;
    PyObject *text = PyObject_Str(value);
    const char *ctext = text ? PyUnicode_AsUTF8(text) : NULL;
    if (!ctext) {
        PyErr_Clear();
        ctext = "<str() of the exception failed>";
    }
    oly_status s = *ctext
        ? oly_host_fail(OLY_ERR_CALLBACK, "%s failed: %s: %s: %s", kind, name, tname, ctext)
        : oly_host_fail(OLY_ERR_CALLBACK, "%s failed: %s: %s", kind, name, tname);
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    oly_error_set_payload(value, ext_payload_free); /* takes the reference */
    return s;
}

_Thread_local const oly_callback_frame *ext_current_frame;

static oly_status trampoline(void *user, oly_callback_frame *fr)
{
    pyfn *u = user;
    const char *kind = fr->kind ? fr->kind : "callback";
    if (!Py_IsInitialized())
        return oly_host_fail(OLY_ERR_CALLBACK, "%s failed: %s: the Python interpreter is not running",
                             kind, u->name);
    /* Short programs run with the GIL held: then PyGILState_Check is all the
     * GIL work a call needs (Ensure and Release cost twice as much). */
    bool held = PyGILState_Check();
    PyGILState_STATE g = held ? PyGILState_LOCKED : PyGILState_Ensure();
    /* The kind is a primitive's name, a constant per kernel: decided once per
     * host function and kind (u's cache is guarded by the GIL). */
    if (kind != u->kind_seen) {
        u->kind_outside = strcmp(kind, "outside_call") == 0;
        u->kind_debug = strcmp(kind, "debug_callback") == 0;
        u->kind_seen = kind;
    }
    /* A tap (no results) ignores what the function returns, like debug_callback. */
    int is_debug = u->kind_debug || (u->kind_outside && fr->n_results == 0);
    /* Keep whatever the caller had pending (a pending error has a type). */
    PyObject *st = NULL, *sv = NULL, *stb = NULL;
    if (__builtin_expect(PyErr_Occurred() != NULL, 0)) PyErr_Fetch(&st, &sv, &stb);
    oly_status s = OLY_OK;
    const oly_callback_frame *outer = ext_current_frame;
    ext_current_frame = fr;
    if (__builtin_expect(u->is_tap, 0) && oly_callback_stats_enabled()) {
        /* Taps reach here from the outfeed receiver, not a kernel: count them. */
        uint64_t t0 = oly_callback_stats_now();
        int rc = call_python(u, fr, is_debug);
        uint64_t dt = oly_callback_stats_now() - t0;
        uint64_t bytes = 0;
        for (int i = 0; i < fr->n_args; i++) bytes += oly_aval_nbytes(&fr->arg_avals[i]);
        oly_callback_stats_record(u->hf, "id_tap", fr->device, dt, rc == 0, bytes, 0);
        if (rc < 0) s = fail_with_exception(u->name, kind);
    } else if (call_python(u, fr, is_debug) < 0) {
        s = fail_with_exception(u->name, kind);
    }
    ext_current_frame = outer;
    if (__builtin_expect(st != NULL, 0)) PyErr_Restore(st, sv, stb);
    if (!held) PyGILState_Release(g);
    return s;
}

/* ---------------------------------------------------------------- host fn cache
 * Eager calls reuse the host function of the same callable, so the eager
 * executable cache (keyed by params, hence by host function) hits. Entries hold
 * a reference to the callable (so its identity stays valid) and to the host
 * function; replaced round-robin. Guarded by the GIL. */

#define CACHE_SIZE 64

typedef struct cache_entry {
    PyObject *fn;      /* owned */
    PyObject *in_tree; /* owned; NULL for flat calls */
    const oly_prim *prim;
    bool tap_direct;
    bool is_tap;
    oly_host_fn *hf;   /* owned reference */
} cache_entry;

static cache_entry cache[CACHE_SIZE];
static int cache_next;

/* 1 when two argument structures (NULL: flat) are the same, else 0. */
static int same_tree(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    int eq = PyObject_RichCompareBool(a, b, Py_EQ);
    if (eq < 0) PyErr_Clear(); /* node data that do not compare: no reuse */
    return eq > 0;
}

/* A new reference to a host function calling fn (through in_tree when not
 * NULL), or NULL with an exception. */
static oly_host_fn *host_fn_for(PyObject *fn, PyObject *in_tree, const oly_prim *prim,
                                const char *name, bool tap_direct, bool is_tap)
{
    for (int i = 0; i < CACHE_SIZE; i++) {
        cache_entry *e = &cache[i];
        if (e->fn == fn && e->prim == prim && e->tap_direct == tap_direct &&
            e->is_tap == is_tap &&
            strcmp(oly_host_fn_name(e->hf), name) == 0 && same_tree(e->in_tree, in_tree))
            return oly_host_fn_retain(e->hf);
    }
    pyfn *u = malloc(sizeof *u);
    char *nm = strdup(name);
    if (!u || !nm) {
        free(u);
        free(nm);
        PyErr_NoMemory();
        return NULL;
    }
    Py_INCREF(fn);
    u->fn = fn;
    u->in_tree = Py_XNewRef(in_tree);
    u->name = nm;
    u->kind_seen = NULL;
    u->kind_debug = 0;
    u->kind_outside = 0;
    u->tap_direct = tap_direct;
    u->transforms = NULL;
    u->parsed = NULL;
    for (int i = 0; i < N_SPARE; i++) u->spare[i] = NULL;
    u->hf = NULL;
    u->is_tap = is_tap;
    oly_host_fn *hf;
    oly_status s = oly_host_fn_new(name, trampoline, u, pyfn_release, &hf);
    if (s != OLY_OK) {
        Py_DECREF(fn);
        Py_XDECREF(in_tree);
        free(nm);
        free(u);
        ext_raise(s);
        return NULL;
    }
    u->hf = hf;
    if (!hf_callables) hf_callables = PyDict_New();
    PyObject *key = hf_callables ? PyLong_FromVoidPtr(hf) : NULL;
    if (!key || PyDict_SetItem(hf_callables, key, fn) < 0) PyErr_Clear(); /* unnamed in stats */
    Py_XDECREF(key);
    cache_entry *e = &cache[cache_next];
    cache_next = (cache_next + 1) % CACHE_SIZE;
    PyObject *old_fn = e->fn, *old_tree = e->in_tree;
    oly_host_fn *old_hf = e->hf;
    Py_INCREF(fn);
    e->fn = fn;
    e->in_tree = Py_XNewRef(in_tree);
    e->prim = prim;
    e->tap_direct = tap_direct;
    e->is_tap = is_tap;
    e->hf = oly_host_fn_retain(hf);
    if (old_hf) oly_host_fn_release(old_hf);
    Py_XDECREF(old_fn);
    Py_XDECREF(old_tree);
    return hf;
}

/* ---------------------------------------------------------------- _core.callback */

static const char *const vmap_method_names[] = {
    "sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized",
};

/* vmap_method: None or one of the names; with sig non-NULL (pure_callback)
 * also "signature:<gufunc signature>", whose text (borrowed from o, valid
 * while o lives) goes to *sig. */
static int parse_vmap_method_sig(PyObject *o, int *out, const char **sig)
{
    if (o == Py_None) {
        *out = OLY_VMAP_NONE;
        return 0;
    }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return -1;
        for (int i = 0; i < (int)(sizeof vmap_method_names / sizeof vmap_method_names[0]); i++) {
            if (strcmp(s, vmap_method_names[i]) == 0) {
                *out = OLY_VMAP_SEQUENTIAL + i;
                return 0;
            }
        }
        if (sig && strncmp(s, "signature:", 10) == 0) {
            *out = OLY_VMAP_SIGNATURE;
            *sig = s + 10;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "vmap_method must be one of the allowed methods [None, 'sequential', "
                 "'sequential_unrolled', 'expand_dims', 'broadcast_all', 'legacy_vectorized'%s], "
                 "but got: %S",
                 sig ? ", 'signature:<gufunc signature>'" : "", o);
    return -1;
}

static int parse_vmap_method(PyObject *o, int *out) { return parse_vmap_method_sig(o, out, NULL); }

/* result_avals: a sequence of (shape, dtype). *out is PyMem-allocated. */
static int parse_result_avals(PyObject *obj, oly_aval **out, int *n_out)
{
    PyObject *seq = PySequence_Fast(obj, "callback: result_avals must be a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > INT32_MAX / 2) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "callback: too many results");
        return -1;
    }
    oly_aval *avals = PyMem_Calloc((size_t)(n ? n : 1), sizeof *avals);
    if (!avals) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_Format(PyExc_TypeError,
                         "callback: result_avals[%zd] must be a (shape, dtype) pair, got %.200R",
                         i, item);
            goto fail;
        }
        PyObject *shape = PySequence_Fast(PyTuple_GET_ITEM(item, 0),
                                          "callback: a result shape must be a sequence of ints");
        if (!shape) goto fail;
        Py_ssize_t rank = PySequence_Fast_GET_SIZE(shape);
        if (rank > OLY_MAX_RANK) {
            Py_DECREF(shape);
            PyErr_Format(PyExc_ValueError, "callback: result rank %zd exceeds the maximum %d",
                         rank, OLY_MAX_RANK);
            goto fail;
        }
        int64_t dims[OLY_MAX_RANK];
        for (Py_ssize_t d = 0; d < rank; d++) {
            long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(shape, d));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(shape);
                goto fail;
            }
            dims[d] = v;
        }
        Py_DECREF(shape);
        oly_dtype t;
        if (ext_dtype_from_py(PyTuple_GET_ITEM(item, 1), &t) < 0) goto fail;
        if (oly_aval_make(t, (int)rank, dims, &avals[i]) != OLY_OK) {
            PyErr_Format(PyExc_ValueError, "callback: result_avals[%zd]: %s", i, oly_last_error());
            goto fail;
        }
    }
    Py_DECREF(seq);
    *out = avals;
    *n_out = (int)n;
    return 0;
fail:
    Py_DECREF(seq);
    PyMem_Free(avals);
    return -1;
}

/* The name used in error messages: name if given, else fn.__name__, else repr. */
static PyObject *callable_name(PyObject *fn, PyObject *name)
{
    if (name && name != Py_None) return PyObject_Str(name);
    PyObject *n = PyObject_GetAttrString(fn, "__name__");
    if (!n) PyErr_Clear();
    if (n && PyUnicode_Check(n)) return n;
    Py_XDECREF(n);
    return PyObject_Repr(fn);
}

static PyObject *py_callback(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"kind", "fn", "result_avals", "args", "ordered", "vmap_method",
                             "name", "in_tree", "identity", "device_index", "tap", "every",
                             "start", "stop", NULL};
    const char *kind;
    PyObject *fn, *ravals, *cargs, *vm = Py_None, *name = Py_None, *in_tree = Py_None;
    int ordered = 0, identity = 0, tap = 0;
    long long device_index = 0, every = 0, gstart = 0, gstop = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sOOO|pOOOpLpLLL:callback", kwlist, &kind, &fn,
                                     &ravals, &cargs, &ordered, &vm, &name, &in_tree, &identity,
                                     &device_index, &tap, &every, &gstart, &gstop))
        return NULL;
    bool outside = strcmp(kind, "outside_call") == 0;
    if (strcmp(kind, "pure_callback") != 0 && strcmp(kind, "io_callback") != 0 &&
        strcmp(kind, "debug_callback") != 0 && !outside) {
        PyErr_Format(PyExc_ValueError,
                     "callback: kind must be 'pure_callback', 'io_callback', "
                     "'debug_callback' or 'outside_call', got '%s'",
                     kind);
        return NULL;
    }
    const oly_prim *prim = oly_prim_lookup(kind);
    if (!prim) {
        PyErr_Format(PyExc_NotImplementedError, "callback: the primitive %s is not available", kind);
        return NULL;
    }
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "callback: fn must be callable, got %.200s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (tap && !(outside && identity)) {
        PyErr_SetString(PyExc_ValueError, "callback: tap=True is for outside_call with identity");
        return NULL;
    }
    if (in_tree == Py_None) {
        in_tree = NULL;
    } else if (outside && !tap) {
        PyErr_SetString(PyExc_ValueError, "callback: outside_call takes an in_tree only as a tap");
        return NULL;
    } else if (!PyObject_TypeCheck(in_tree, ext_st->PyTreeDef_Type)) {
        PyErr_Format(PyExc_TypeError, "callback: in_tree must be a PyTreeDef or None, got %.200s",
                     Py_TYPE(in_tree)->tp_name);
        return NULL;
    }
    int vmap_method;
    const char *signature = NULL;
    if (parse_vmap_method_sig(vm, &vmap_method,
                              strcmp(kind, "pure_callback") == 0 ? &signature : NULL) < 0)
        return NULL;
    oly_aval *avals;
    int n_res;
    if (parse_result_avals(ravals, &avals, &n_res) < 0) return NULL;
    PyObject *result = NULL, *seq = NULL, *nm = NULL;
    oly_host_fn *hf = NULL;
    if (n_res && strcmp(kind, "debug_callback") == 0) {
        PyErr_SetString(PyExc_ValueError, "callback: debug_callback has no results");
        goto done;
    }
    seq = PySequence_Fast(cargs, "callback: args must be a sequence");
    if (!seq) goto done;
    if (PySequence_Fast_GET_SIZE(seq) > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "callback: too many arguments");
        goto done;
    }
    nm = callable_name(fn, name);
    if (!nm) goto done;
    const char *cname = PyUnicode_AsUTF8(nm);
    if (!cname) goto done;
    if (in_tree && ext_treedef_num_leaves(in_tree) != PySequence_Fast_GET_SIZE(seq)) {
        PyErr_Format(PyExc_ValueError, "callback: in_tree has %zd leaves, %zd arguments given",
                     ext_treedef_num_leaves(in_tree), PySequence_Fast_GET_SIZE(seq));
        goto done;
    }
    if (tap && !in_tree && PySequence_Fast_GET_SIZE(seq) != 1) {
        PyErr_SetString(PyExc_ValueError, "callback: a tap of several leaves needs its in_tree");
        goto done;
    }
    hf = host_fn_for(fn, in_tree, prim, cname, tap != 0, outside && identity);
    if (!hf) goto done;
    oly_params_callback params = {
        .callback = hf,
        .result_avals = n_res ? avals : NULL,
        .n_results = n_res,
        .vmap_method = vmap_method,
        .ordered = ordered != 0,
        .signature = signature,
    };
    oly_params_outside_call oparams = {
        .callback = hf,
        .result_avals = n_res ? avals : NULL,
        .n_results = identity ? 0 : n_res,
        .identity = identity != 0,
        .device_index = device_index,
        .transforms = "",
        .every = every,
        .start = gstart,
        .stop = gstop,
    };
    PyObject *tuple = ext_bind(prim, outside ? (const void *)&oparams : (const void *)&params,
                               PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq), NULL, 0);
    if (!tuple) goto done;
    result = PySequence_List(tuple);
    Py_DECREF(tuple);
done:
    if (hf) oly_host_fn_release(hf);
    Py_XDECREF(nm);
    Py_XDECREF(seq);
    PyMem_Free(avals);
    return result;
}

/* ---------------------------------------------------------------- the outfeed */

static PyObject *py_outfeed_barrier(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    oly_status s = oly_outfeed_barrier(); /* the blocking hooks release the GIL */
    if (s != OLY_OK) return ext_raise(s);
    Py_RETURN_NONE;
}

static PyObject *py_outfeed_stop(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    oly_outfeed_stop();
    Py_RETURN_NONE;
}

static PyObject *py_outfeed_set_capacity(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1) {
        PyErr_Format(PyExc_ValueError,
                     "the outfeed queue size must be a positive number of bytes, got %lld", n);
        return NULL;
    }
    oly_status s = oly_outfeed_set_capacity((size_t)n);
    if (s != OLY_OK) return ext_raise(s);
    Py_RETURN_NONE;
}

static PyObject *py_outfeed_capacity(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromSize_t(oly_outfeed_capacity());
}

static PyObject *py_outfeed_peak_bytes(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromSize_t(oly_outfeed_peak_bytes((int)d));
}

/* Senders and barriers that wait release the GIL the receivers need. */
static void *blocking_enter(void)
{
    if (!Py_IsInitialized() || !PyGILState_Check()) return NULL;
    return PyEval_SaveThread();
}

static void blocking_leave(void *token)
{
    if (token) PyEval_RestoreThread(token);
}

/* A receiver holds the GIL across a batch of taps. */
static void *host_acquire(void)
{
    if (!Py_IsInitialized()) return NULL;
    return (void *)((intptr_t)PyGILState_Ensure() + 1); /* never NULL when taken */
}

static void host_release(void *token)
{
    if (token) PyGILState_Release((PyGILState_STATE)((intptr_t)token - 1));
}

static PyObject *py_set_tap_parser(PyObject *Py_UNUSED(m), PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "set_tap_parser: expected a callable, got %.200s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Py_XSETREF(tap_parser, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- callback statistics */

static PyObject *py_callback_stats_enable(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    bool was = oly_callback_stats_enabled();
    oly_callback_stats_enable(on != 0);
    return PyBool_FromLong(was);
}

static PyObject *py_callback_stats_enabled(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(oly_callback_stats_enabled());
}

/* [(name, flavour, device, calls, errors, total_ns, max_ns, bytes_in,
 *   bytes_out, callable or None), ...]; reset empties the table. */
static PyObject *py_callback_stats(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"reset", NULL};
    int reset = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|p:callback_stats", kwlist, &reset)) return NULL;
    oly_callback_stat *st = NULL;
    int n = 0;
    oly_status s = oly_callback_stats_snapshot(reset != 0, &st, &n);
    if (s != OLY_OK) return ext_raise(s);
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        PyObject *fn = NULL;
        if (hf_callables) {
            PyObject *key = PyLong_FromVoidPtr(st[i].fn);
            fn = key ? PyDict_GetItemWithError(hf_callables, key) : NULL;
            Py_XDECREF(key);
            if (PyErr_Occurred()) PyErr_Clear();
        }
        PyObject *row = Py_BuildValue("(ssiKKKKKKO)", oly_host_fn_name(st[i].fn), st[i].flavour,
                                      st[i].device, (unsigned long long)st[i].calls,
                                      (unsigned long long)st[i].errors,
                                      (unsigned long long)st[i].total_ns,
                                      (unsigned long long)st[i].max_ns,
                                      (unsigned long long)st[i].bytes_in,
                                      (unsigned long long)st[i].bytes_out, fn ? fn : Py_None);
        if (!row) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, row);
    }
    oly_callback_stats_free(st, n); /* may release host functions: the GIL is held, re-entrant */
    return out;
}

static PyObject *py_callback_stats_dropped(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromUnsignedLongLong(oly_callback_stats_dropped());
}

/* callback_context() -> None outside a host call, else (kind, device,
 * batch_index tuple (outermost vmap first), {axis name: index}). */
static PyObject *py_callback_context(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    const oly_callback_frame *fr = ext_current_frame;
    if (!fr) Py_RETURN_NONE;
    PyObject *batch = PyTuple_New(fr->n_batch), *axes = PyDict_New();
    if (!batch || !axes) goto fail;
    for (int j = 0; j < fr->n_batch; j++) {
        PyObject *v = PyLong_FromLongLong(fr->batch_index[j]);
        if (!v) goto fail;
        PyTuple_SET_ITEM(batch, j, v);
    }
    for (int j = 0; j < fr->n_axes; j++) {
        PyObject *v = PyLong_FromLongLong(fr->axis_index[j]);
        int rc = v ? PyDict_SetItemString(axes, fr->axis_names[j], v) : -1;
        Py_XDECREF(v);
        if (rc < 0) goto fail;
    }
    return Py_BuildValue("(siNN)", fr->kind ? fr->kind : "callback", fr->device, batch, axes);
fail:
    Py_XDECREF(batch);
    Py_XDECREF(axes);
    return NULL;
}

PyMethodDef ext_callback_methods[] = {
    {"callback_context", py_callback_context, METH_NOARGS,
     "callback_context() -> None outside a host call, else (kind, device, batch_index,\n"
     "{axis name: index}) of the innermost host call running on this thread"},
    {"callback_stats_enable", py_callback_stats_enable, METH_O,
     "callback_stats_enable(on) -> bool: switch callback statistics; returns the old state"},
    {"callback_stats_enabled", py_callback_stats_enabled, METH_NOARGS,
     "callback_stats_enabled() -> bool"},
    {"callback_stats", (PyCFunction)(void (*)(void))py_callback_stats,
     METH_VARARGS | METH_KEYWORDS,
     "callback_stats(reset=False) -> [(name, flavour, device, calls, errors, total_ns, max_ns,\n"
     "bytes_in, bytes_out, callable or None)]; reset empties the table in the same step"},
    {"callback_stats_dropped", py_callback_stats_dropped, METH_NOARGS,
     "calls not counted because a row could not be allocated"},
    {"set_tap_parser", py_set_tap_parser, METH_O,
     "set_tap_parser(fn): fn(transforms_text) -> what a direct tap function gets as transforms"},
    {"outfeed_barrier", py_outfeed_barrier, METH_NOARGS,
     "Wait until every tap sent so far was consumed; raise the last tap failure since the\n"
     "previous barrier (CallbackError from the tap's exception)."},
    {"outfeed_stop", py_outfeed_stop, METH_NOARGS, "Drain the outfeed and stop its receivers."},
    {"outfeed_set_capacity", py_outfeed_set_capacity, METH_O,
     "Bytes each device's outfeed queue may hold."},
    {"outfeed_capacity", py_outfeed_capacity, METH_NOARGS, "Bytes each outfeed queue may hold."},
    {"outfeed_peak_bytes", py_outfeed_peak_bytes, METH_O,
     "The most bytes a device's outfeed queue ever held."},
    {"callback", (PyCFunction)(void (*)(void))py_callback, METH_VARARGS | METH_KEYWORDS,
     "callback(kind, fn, result_avals, args, ordered=False, vmap_method=None, name=None,\n"
     "         in_tree=None, identity=False, device_index=0) -> list\n"
     "Bind a host callback primitive ('pure_callback', 'io_callback', 'debug_callback') that\n"
     "calls fn(*numpy_arrays), or fn(*a, **k) with (a, k) = in_tree.unflatten(numpy_arrays)\n"
     "when in_tree is given; result_avals is a list of (shape, dtype). 'outside_call'\n"
     "(host_callback) calls fn(device_id, transforms_text, *numpy_arrays); with identity\n"
     "it is a tap whose outputs are args, run on the device's outfeed receiver. With tap=True\n"
     "(identity only) fn is the tap function itself, called fn(arg, transforms): arg the one\n"
     "leaf or in_tree.unflatten(leaves), transforms set_tap_parser's fn of the text.\n"
     "every/start/stop (taps): a gated tap, sent only when the first element v of the\n"
     "first (integer) argument has start <= v < stop (stop <= start: no bound) and\n"
     "(v - start) % every == 0 or v == stop - 1."},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------- shared with buffer.c */

int ext_python_alive(void) { return python_alive(); }

int ext_parse_vmap_method(PyObject *o, int *out) { return parse_vmap_method(o, out); }

int ext_parse_result_avals(PyObject *obj, oly_aval **out, int *n_out)
{
    return parse_result_avals(obj, out, n_out);
}

oly_status ext_callback_fail(const char *kind, const char *name)
{
    return fail_with_exception(name, kind);
}

int ext_callback_init(PyObject *module)
{
    if (np_ascontiguousarray) return 0;
    oly_set_blocking_hooks(blocking_enter, blocking_leave);
    oly_set_host_lock_hooks(host_acquire, host_release);
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return -1;
    np_ascontiguousarray = PyObject_GetAttrString(np, "ascontiguousarray");
    Py_DECREF(np);
    return np_ascontiguousarray ? 0 : -1;
}
