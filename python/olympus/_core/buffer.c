/* buffer.c — the host side of olympus.experimental.buffer_callback: the Buffer
 * and ExecutionContext types, the trampoline that calls
 * callback(ctx, out, *args, **kwargs), and _core.buffer_callback (the bind).
 *
 * A Buffer is the program's own memory for one call, with no copy: an output
 * Buffer is the result buffer the program continues with (writable), an input
 * Buffer the argument (read-only; an aliased input is its output's memory).
 * It offers the buffer protocol (so np.asarray(buf) is a zero-copy view),
 * __array__ and __dlpack__ / __dlpack_device__ (CPU).
 *
 * That memory belongs to the run, so a Buffer is valid only while its
 * callback runs. When the callback returns, every Buffer of the call is
 * invalidated (using one raises ValueError; shape and dtype still answer), and
 * the trampoline checks that no view of one outlives the call: each
 * buffer-protocol export and DLPack tensor is counted, and a count still
 * above zero once the callback's frame is gone (after clearing the frames of
 * a failing callback's traceback and a garbage collection, which drop the
 * views only they hold) fails the call with BufferError naming the Buffer, so
 * a kept view is never silently left pointing at memory the program reuses.
 *
 * The round trip is a hot path: Buffers nobody kept are re-pointed at the next
 * call's memory instead of being freed and made again, the context is one
 * immutable object, and a flat call is one vectorcall.
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <stdlib.h>
#include <string.h>

#define FN_SLOT(f) (__extension__(void *)(f))

static PyTypeObject *Buffer_Type;
static PyTypeObject *Context_Type;
static PyObject *the_context;    /* owned: the one ExecutionContext (CPU has no stream) */
static PyObject *stage_enum;     /* owned: olympus.experimental.buffer_callback.ExecutionStage */
static PyObject *clear_frames;   /* owned: traceback.clear_frames, imported on first need */

enum { STAGE_EXECUTE = 3 };

/* ---------------------------------------------------------------- Buffer */

typedef struct BufferObject {
    PyObject_HEAD
    void *data;                 /* borrowed from the run while the callback runs; NULL after */
    oly_aval aval;
    int live;                   /* the callback is running: data may be used */
    int writeable;
    int index;                  /* position in the call: outputs, then inputs (messages) */
    int n_out;                  /* outputs in the call: index < n_out is an output */
    Py_ssize_t exports;         /* live buffer-protocol exports and DLPack tensors */
    Py_ssize_t shape[OLY_MAX_RANK], strides[OLY_MAX_RANK]; /* for exports */
} BufferObject;

#define BUF(o) ((BufferObject *)(o))

static const char INVALID[] =
    "buffer_callback: this Buffer is no longer valid: a Buffer (and any view of it) may only "
    "be used while its callback runs; copy what must outlive the call (np.array(buf))";

/* "output #k" or "argument #i" for messages. */
static void describe(const BufferObject *b, char *buf, size_t n)
{
    if (b->index < b->n_out)
        snprintf(buf, n, "output #%d", b->index);
    else
        snprintf(buf, n, "argument #%d", b->index - b->n_out);
}

static void Buffer_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static const char *const pep3118[OLY_DTYPE_COUNT] = {
    [OLY_BOOL] = "?",    [OLY_INT8] = "b",     [OLY_INT16] = "h",   [OLY_INT32] = "i",
    [OLY_INT64] = "q",   [OLY_UINT8] = "B",    [OLY_UINT16] = "H",  [OLY_UINT32] = "I",
    [OLY_UINT64] = "Q",  [OLY_FLOAT16] = "e",  [OLY_FLOAT32] = "f", [OLY_FLOAT64] = "d",
    [OLY_COMPLEX64] = "Zf", [OLY_COMPLEX128] = "Zd",
};

static int Buffer_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    BufferObject *b = BUF(self);
    view->obj = NULL;
    if (!b->live) {
        PyErr_SetString(PyExc_ValueError, INVALID);
        return -1;
    }
    const oly_aval *av = &b->aval;
    const char *fmt = pep3118[av->dtype];
    if (!fmt) {
        PyErr_Format(PyExc_BufferError,
                     "a %s Buffer has no buffer-protocol format; use __dlpack__",
                     oly_dtype_name(av->dtype));
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) && !b->writeable) {
        PyErr_SetString(PyExc_BufferError,
                        "buffer_callback: argument Buffers are read-only (write the outputs)");
        return -1;
    }
    Py_ssize_t item = (Py_ssize_t)oly_dtype_size(av->dtype), stride = item;
    int nontrivial = 0;
    for (int d = av->rank - 1; d >= 0; d--) {
        b->shape[d] = (Py_ssize_t)av->dims[d];
        b->strides[d] = stride;
        stride *= b->shape[d];
        nontrivial += av->dims[d] > 1;
    }
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && nontrivial > 1) {
        PyErr_SetString(PyExc_BufferError, "a Buffer is C-contiguous, not Fortran-contiguous");
        return -1;
    }
    view->buf = b->data;
    view->obj = Py_NewRef(self);
    view->len = (Py_ssize_t)oly_aval_nbytes(av);
    view->readonly = !b->writeable;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    if (flags & PyBUF_ND) {
        view->ndim = av->rank;
        view->shape = av->rank ? b->shape : NULL;
    } else {
        view->ndim = 1;
        view->shape = NULL;
    }
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES && av->rank ? b->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    b->exports++;
    return 0;
}

static void Buffer_releasebuffer(PyObject *self, Py_buffer *view)
{
    BUF(self)->exports--;
}

static PyObject *Buffer_get_shape(PyObject *self, void *Py_UNUSED(c))
{
    return ext_shape_tuple(&BUF(self)->aval);
}

static PyObject *Buffer_get_dtype(PyObject *self, void *Py_UNUSED(c))
{
    return ext_dtype_to_numpy(BUF(self)->aval.dtype);
}

static PyObject *Buffer_get_ndim(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(BUF(self)->aval.rank);
}

static PyObject *Buffer_get_size(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(oly_aval_size(&BUF(self)->aval));
}

static PyObject *Buffer_get_writeable(PyObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(BUF(self)->writeable);
}

static PyObject *Buffer_get_valid(PyObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(BUF(self)->live);
}

static PyObject *Buffer_repr(PyObject *self)
{
    BufferObject *b = BUF(self);
    PyObject *shape = ext_shape_tuple(&b->aval);
    if (!shape) return NULL;
    PyObject *r = PyUnicode_FromFormat("Buffer(shape=%R, dtype=%s, writeable=%s%s)", shape,
                                       oly_dtype_name(b->aval.dtype),
                                       b->writeable ? "True" : "False",
                                       b->live ? "" : ", released");
    Py_DECREF(shape);
    return r;
}

/* __array__(dtype=None, copy=None): a NumPy view over the Buffer (writeable
 * for outputs), through a memoryview so the export is counted. */
static PyObject *Buffer_array(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"dtype", "copy", NULL};
    PyObject *dtype = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:__array__", kwlist, &dtype, &copy))
        return NULL;
    BufferObject *b = BUF(self);
    if (!b->live) {
        PyErr_SetString(PyExc_ValueError, INVALID);
        return NULL;
    }
    if (!pep3118[b->aval.dtype]) {
        PyErr_Format(PyExc_TypeError, "a %s Buffer has no NumPy dtype; use __dlpack__",
                     oly_dtype_name(b->aval.dtype));
        return NULL;
    }
    PyObject *mv = PyMemoryView_FromObject(self);
    if (!mv) return NULL;
    PyArray_Descr *descr = (PyArray_Descr *)Py_NewRef(ext_st->np_dtype[b->aval.dtype]);
    npy_intp dims[OLY_MAX_RANK];
    for (int d = 0; d < b->aval.rank; d++) dims[d] = (npy_intp)b->aval.dims[d];
    int flags = NPY_ARRAY_C_CONTIGUOUS | (b->writeable ? NPY_ARRAY_WRITEABLE : 0);
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, b->aval.rank, dims, NULL, b->data,
                                         flags, NULL);
    if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, mv) < 0) { /* steals mv */
        if (!arr) Py_DECREF(mv);
        Py_XDECREF(arr);
        return NULL;
    }
    int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
    if (want_copy < 0) goto fail;
    if (dtype != Py_None) {
        PyArray_Descr *to = NULL;
        if (!PyArray_DescrConverter(dtype, &to)) goto fail;
        int same = PyArray_EquivTypes(to, PyArray_DESCR((PyArrayObject *)arr));
        if (!same && copy != Py_None && !want_copy) {
            Py_DECREF(to);
            PyErr_SetString(PyExc_ValueError,
                            "Buffer.__array__: converting the dtype needs a copy (copy=False)");
            goto fail;
        }
        if (!same) {
            PyObject *c = PyArray_CastToType((PyArrayObject *)arr, to, 0); /* steals to */
            Py_DECREF(arr);
            return c;
        }
        Py_DECREF(to);
    }
    if (want_copy) {
        PyObject *c = PyArray_NewCopy((PyArrayObject *)arr, NPY_CORDER);
        Py_DECREF(arr);
        return c;
    }
    return arr;
fail:
    Py_DECREF(arr);
    return NULL;
}

/* ---------------------------------------------------------------- DLPack (CPU, legacy capsule) */

typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

enum { DL_CPU = 1 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_COMPLEX = 5, DL_BOOL = 6 };

/* One allocation: the managed tensor, then its shape and strides. */
typedef struct dl_export {
    dl_managed m;
    int64_t shape[OLY_MAX_RANK], strides[OLY_MAX_RANK];
} dl_export;

/* The consumer's (or the unused capsule's) release: one export less, and the
 * Buffer reference dropped. May run on any thread. */
static void dl_deleter(dl_managed *m)
{
    if (!m) return;
    PyObject *owner = m->manager_ctx;
    if (owner && ext_python_alive()) {
        PyGILState_STATE g = PyGILState_Ensure();
        BUF(owner)->exports--;
        Py_DECREF(owner);
        PyGILState_Release(g);
    }
    free(m);
}

static void dl_capsule_free(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "used_dltensor")) return; /* the consumer owns it now */
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter) m->deleter(m);
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

static int dl_dtype_of(oly_dtype t, dl_dtype *out)
{
    uint8_t bits = (uint8_t)(8 * oly_dtype_size(t));
    uint8_t code = oly_dtype_is_bool(t)           ? DL_BOOL
                 : oly_dtype_is_signed_int(t)     ? DL_INT
                 : oly_dtype_is_unsigned_int(t)   ? DL_UINT
                 : t == OLY_BFLOAT16              ? DL_BFLOAT
                 : oly_dtype_is_complex(t)        ? DL_COMPLEX
                                                  : DL_FLOAT;
    *out = (dl_dtype){code, bits, 1};
    return 0;
}

static PyObject *Buffer_dlpack(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_dev = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &stream,
                                     &max_version, &dl_dev, &copy))
        return NULL;
    BufferObject *b = BUF(self);
    if (!b->live) {
        PyErr_SetString(PyExc_ValueError, INVALID);
        return NULL;
    }
    if (stream != Py_None) {
        PyErr_Format(PyExc_BufferError,
                     "Buffer.__dlpack__: a CPU Buffer has no stream; stream must be None, "
                     "got %R", stream);
        return NULL;
    }
    if (copy != Py_None && PyObject_IsTrue(copy) == 1) {
        PyErr_SetString(PyExc_BufferError,
                        "Buffer.__dlpack__: copy=True is not supported (a Buffer is shared "
                        "in place; copy the consumer's array instead)");
        return NULL;
    }
    if (dl_dev != Py_None) {
        int dt = -1, id = -1;
        if (!PyArg_ParseTuple(dl_dev, "ii:dl_device", &dt, &id)) return NULL;
        if (dt != DL_CPU) {
            PyErr_Format(PyExc_BufferError,
                         "Buffer.__dlpack__: the Buffer is on the CPU (device type %d), not "
                         "on device type %d", DL_CPU, dt);
            return NULL;
        }
    }
    dl_export *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    const oly_aval *av = &b->aval;
    int64_t stride = 1;
    for (int d = av->rank - 1; d >= 0; d--) {
        e->shape[d] = av->dims[d];
        e->strides[d] = stride;
        stride *= av->dims[d];
    }
    e->m.dl_tensor = (dl_tensor){
        .data = b->data,
        .device = {DL_CPU, 0},
        .ndim = av->rank,
        .shape = e->shape,
        .strides = e->strides,
        .byte_offset = 0,
    };
    dl_dtype_of(av->dtype, &e->m.dl_tensor.dtype);
    e->m.manager_ctx = Py_NewRef(self);
    e->m.deleter = dl_deleter;
    b->exports++;
    PyObject *cap = PyCapsule_New(&e->m, "dltensor", dl_capsule_free);
    if (!cap) {
        b->exports--;
        Py_DECREF(self);
        free(e);
    }
    return cap;
}

static PyObject *Buffer_dlpack_device(PyObject *self, PyObject *Py_UNUSED(a))
{
    return Py_BuildValue("(ii)", DL_CPU, 0);
}

static PyGetSetDef Buffer_getset[] = {
    {"shape", Buffer_get_shape, NULL, "the shape, a tuple of ints", NULL},
    {"dtype", Buffer_get_dtype, NULL, "the NumPy dtype", NULL},
    {"ndim", Buffer_get_ndim, NULL, "the rank", NULL},
    {"size", Buffer_get_size, NULL, "the number of elements", NULL},
    {"writeable", Buffer_get_writeable, NULL,
     "True for an output (write it in place), False for an argument", NULL},
    {"valid", Buffer_get_valid, NULL,
     "True while the callback that received the Buffer runs", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Buffer_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))Buffer_array, METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None) -> a NumPy view (writeable for outputs), or a copy"},
    {"__dlpack__", (PyCFunction)(void (*)(void))Buffer_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> a DLPack\n"
     "capsule over the Buffer's memory (no copy; stream must be None on the CPU)"},
    {"__dlpack_device__", Buffer_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (1, 0): the CPU"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Buffer_slots[] = {
    {Py_tp_dealloc, FN_SLOT(Buffer_dealloc)},
    {Py_tp_repr, FN_SLOT(Buffer_repr)},
    {Py_tp_getset, Buffer_getset},
    {Py_tp_methods, Buffer_methods},
    {Py_bf_getbuffer, FN_SLOT(Buffer_getbuffer)},
    {Py_bf_releasebuffer, FN_SLOT(Buffer_releasebuffer)},
    {Py_tp_doc,
     (void *)"One of the program's buffers, handed to a buffer_callback for the length of "
             "the call:\noutputs are written in place (np.asarray(out)[...] = ...), arguments "
             "are read-only.\nBuffer protocol, __array__ and __dlpack__ give zero-copy views, "
             "valid only while the\ncallback runs."},
    {0, NULL},
};

static PyType_Spec Buffer_spec = {
    .name = "olympus._core.Buffer",
    .basicsize = sizeof(BufferObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Buffer_slots,
};

/* ---------------------------------------------------------------- ExecutionContext */

static PyObject *Context_get_stage(PyObject *self, void *Py_UNUSED(c))
{
    if (stage_enum) return PyObject_CallFunction(stage_enum, "i", STAGE_EXECUTE);
    return PyLong_FromLong(STAGE_EXECUTE);
}

static PyObject *Context_get_stream(PyObject *self, void *Py_UNUSED(c)) { Py_RETURN_NONE; }

static PyObject *Context_repr(PyObject *self)
{
    return PyUnicode_FromString("ExecutionContext(stage=ExecutionStage.EXECUTE, stream=None)");
}

static PyGetSetDef Context_getset[] = {
    {"stage", Context_get_stage, NULL,
     "the ExecutionStage: EXECUTE while the program runs (the only stage on the CPU)", NULL},
    {"stream", Context_get_stream, NULL, "the device stream: None on the CPU", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static void Context_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot Context_slots[] = {
    {Py_tp_dealloc, FN_SLOT(Context_dealloc)},
    {Py_tp_repr, FN_SLOT(Context_repr)},
    {Py_tp_getset, Context_getset},
    {Py_tp_doc, (void *)"What a buffer_callback learns about its call: the stage and the "
                        "device stream\n(None on the CPU)."},
    {0, NULL},
};

static PyType_Spec Context_spec = {
    .name = "olympus._core.ExecutionContext",
    .basicsize = sizeof(PyObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Context_slots,
};

/* ---------------------------------------------------------------- the host function */

enum { N_SPARE = 8 };

typedef struct bcfn {
    PyObject *fn;       /* owned (decref'd with the GIL) */
    PyObject *in_tree;  /* owned; NULL: fn(ctx, out, *leaves) */
    PyObject *out_tree; /* owned; NULL: out is the single output Buffer */
    char *name;         /* owned (malloc) */
    /* Guarded by the GIL: per position in the call, a Buffer of the last call
     * that nobody kept (refcount 1, no export), re-pointed at the next call's
     * memory. Taken out of the slot while in use, so a nested call makes its own. */
    PyObject *spare[N_SPARE];
} bcfn;

static void bcfn_release(void *user)
{
    bcfn *u = user;
    if (!u) return;
    if (ext_python_alive()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_XDECREF(u->fn);
        Py_XDECREF(u->in_tree);
        Py_XDECREF(u->out_tree);
        for (int i = 0; i < N_SPARE; i++) Py_XDECREF(u->spare[i]);
        PyGILState_Release(g);
    }
    free(u->name);
    free(u);
}

/* A Buffer for position k of the call over data. New reference or NULL. */
static inline PyObject *buffer_take(bcfn *u, int k, int n_out, void *data, const oly_aval *aval)
{
    PyObject *o = NULL;
    if (k < N_SPARE && u->spare[k]) {
        o = u->spare[k];
        u->spare[k] = NULL;
    } else {
        o = Buffer_Type->tp_alloc(Buffer_Type, 0);
        if (!o) return NULL;
    }
    BufferObject *b = BUF(o);
    b->data = data;
    b->live = 1;
    b->aval = *aval;
    b->writeable = k < n_out;
    b->index = k;
    b->n_out = n_out;
    b->exports = 0;
    return o;
}

/* Drops the views a failing callback's traceback holds (its finished frames'
 * locals) and runs a collection, so views that died with the call stop
 * counting. Keeps the pending exception. */
static void drop_dead_views(void)
{
    if (PyErr_Occurred()) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        PyErr_NormalizeException(&t, &v, &tb);
        if (tb) {
            if (!clear_frames) {
                PyObject *mod = PyImport_ImportModule("traceback");
                clear_frames = mod ? PyObject_GetAttrString(mod, "clear_frames") : NULL;
                Py_XDECREF(mod);
            }
            PyObject *r = clear_frames ? PyObject_CallOneArg(clear_frames, tb) : NULL;
            Py_XDECREF(r);
            PyErr_Clear();
        }
        PyErr_Restore(t, v, tb);
    }
    PyGC_Collect();
}

/* After the call: every Buffer invalidated; a view still alive fails the call
 * (BufferError, chained to the callback's own exception if it failed); the
 * Buffers nobody kept go back to the spare slots. Returns rc, or -1 when a
 * view escaped. */
static int release_buffers(bcfn *u, PyObject **bufs, int n, int rc)
{
    int escaped = -1;
    for (int k = 0; k < n; k++) {
        BUF(bufs[k])->live = 0;
        BUF(bufs[k])->data = NULL;
        if (escaped < 0 && BUF(bufs[k])->exports > 0) escaped = k;
    }
    if (escaped >= 0) {
        drop_dead_views();
        escaped = -1;
        for (int k = 0; k < n && escaped < 0; k++)
            if (BUF(bufs[k])->exports > 0) escaped = k;
    }
    if (escaped >= 0) {
        char what[64];
        describe(BUF(bufs[escaped]), what, sizeof what);
        PyObject *t = NULL, *v = NULL, *tb = NULL;
        if (PyErr_Occurred()) {
            PyErr_Fetch(&t, &v, &tb);
            PyErr_NormalizeException(&t, &v, &tb);
            if (v && tb) PyException_SetTraceback(v, tb);
        }
        PyErr_Format(PyExc_BufferError,
                     "buffer_callback: the callback kept a view of its %s (a NumPy array, "
                     "memoryview or DLPack tensor) after it returned; the program reuses that "
                     "memory, so views of a Buffer are valid only while the callback runs: "
                     "keep a copy instead (np.array(buf))",
                     what);
        if (v) { /* the callback's own failure becomes the context */
            PyObject *nt, *nv, *ntb;
            PyErr_Fetch(&nt, &nv, &ntb);
            PyErr_NormalizeException(&nt, &nv, &ntb);
            PyException_SetContext(nv, v); /* steals v */
            PyErr_Restore(nt, nv, ntb);
            Py_XDECREF(t);
            Py_XDECREF(tb);
        }
        rc = -1;
    }
    for (int k = 0; k < n; k++) {
        PyObject *o = bufs[k];
        if (k < N_SPARE && !u->spare[k] && Py_REFCNT(o) == 1 && BUF(o)->exports == 0) {
            u->spare[k] = o;
            continue;
        }
        Py_DECREF(o);
    }
    return rc;
}

/* The out argument: the single Buffer, or the result tree of Buffers. */
static PyObject *out_tree_of(bcfn *u, PyObject **outs, int n_out)
{
    if (!u->out_tree) return Py_NewRef(outs[0]);
    PyObject *leaves = PyList_New(n_out);
    if (!leaves) return NULL;
    for (int k = 0; k < n_out; k++) PyList_SET_ITEM(leaves, k, Py_NewRef(outs[k]));
    PyObject *t = ext_tree_unflatten(u->out_tree, leaves);
    Py_DECREF(leaves);
    return t;
}

/* fn(ctx, out, *args, **kwargs) with (args, kwargs) = in_tree.unflatten(ins). */
static __attribute__((noinline)) PyObject *call_tree(bcfn *u, PyObject *out, PyObject **ins,
                                                     int n_in)
{
    PyObject *leaves = PyList_New(n_in), *ak = NULL, *res = NULL;
    if (!leaves) return NULL;
    for (int i = 0; i < n_in; i++) PyList_SET_ITEM(leaves, i, Py_NewRef(ins[i]));
    ak = ext_tree_unflatten(u->in_tree, leaves);
    Py_DECREF(leaves);
    if (ak && (!PyTuple_Check(ak) || PyTuple_GET_SIZE(ak) != 2 ||
               !PyTuple_Check(PyTuple_GET_ITEM(ak, 0)) || !PyDict_Check(PyTuple_GET_ITEM(ak, 1)))) {
        PyErr_SetString(PyExc_SystemError, "buffer_callback: in_tree must describe (args, kwargs)");
        Py_CLEAR(ak);
    }
    if (!ak) return NULL;
    PyObject *pos = PyTuple_GET_ITEM(ak, 0), *kw = PyTuple_GET_ITEM(ak, 1);
    Py_ssize_t np_ = PyTuple_GET_SIZE(pos);
    PyObject *all = PyTuple_New(np_ + 2);
    if (all) {
        PyTuple_SET_ITEM(all, 0, Py_NewRef(the_context));
        PyTuple_SET_ITEM(all, 1, Py_NewRef(out));
        for (Py_ssize_t i = 0; i < np_; i++)
            PyTuple_SET_ITEM(all, i + 2, Py_NewRef(PyTuple_GET_ITEM(pos, i)));
        res = PyObject_Call(u->fn, all, PyDict_GET_SIZE(kw) ? kw : NULL);
        Py_DECREF(all);
    }
    Py_DECREF(ak);
    return res;
}

/* One call: Buffers over the results and arguments, the function, its return
 * value checked, the Buffers released. 0, or -1 with a Python exception. */
static int call_python(bcfn *u, oly_callback_frame *fr)
{
    enum { SMALL = 8 };
    int n_out = fr->n_results, n_in = fr->n_args, n = n_out + n_in;
    PyObject *small[SMALL + 2];
    /* argv: [ctx, out, arg Buffers...]; bufs: the outputs, then the arguments */
    PyObject **argv = n + 2 <= SMALL + 2 ? small : PyMem_Malloc(((size_t)n + 2) * sizeof *argv);
    if (!argv) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *outs_small[SMALL];
    PyObject **outs = n_out <= SMALL ? outs_small : PyMem_Malloc((size_t)n_out * sizeof *outs);
    int made = 0, rc = -1;
    PyObject *out = NULL, *res = NULL;
    if (!outs) {
        PyErr_NoMemory();
        goto done_args;
    }
    for (; made < n_out; made++)
        if (!(outs[made] = buffer_take(u, made, n_out, fr->results[made], &fr->result_avals[made])))
            goto done;
    for (int i = 0; i < n_in; i++, made++)
        if (!(argv[2 + i] = buffer_take(u, made, n_out, (void *)fr->args[i], &fr->arg_avals[i])))
            goto done;
    if (!(out = out_tree_of(u, outs, n_out))) goto done;
    if (!u->in_tree) {
        argv[0] = the_context;
        argv[1] = out;
        res = PyObject_Vectorcall(u->fn, argv, (size_t)n_in + 2, NULL);
    } else {
        res = call_tree(u, out, argv + 2, n_in);
    }
    Py_CLEAR(out);
    if (res) {
        if (res == Py_None)
            rc = 0;
        else
            PyErr_SetString(PyExc_ValueError,
                            "buffer_callback callback must not return any values.");
        Py_DECREF(res);
    }
done:
    Py_XDECREF(out);
    {
        /* release everything made, outputs first (positions 0..made-1) */
        PyObject *all_small[2 * SMALL];
        PyObject **all = made <= 2 * SMALL ? all_small : PyMem_Malloc((size_t)made * sizeof *all);
        if (!all) {
            /* cannot batch the check: release one by one (still invalidated) */
            for (int k = 0; k < made; k++) {
                PyObject *o = k < n_out ? outs[k] : argv[2 + k - n_out];
                rc = release_buffers(u, &o, 1, rc);
            }
        } else {
            for (int k = 0; k < made; k++) all[k] = k < n_out ? outs[k] : argv[2 + k - n_out];
            rc = release_buffers(u, all, made, rc);
            if (all != all_small) PyMem_Free(all);
        }
    }
    if (outs != outs_small) PyMem_Free(outs);
done_args:
    if (argv != small) PyMem_Free(argv);
    return rc;
}

static oly_status trampoline(void *user, oly_callback_frame *fr)
{
    bcfn *u = user;
    if (!Py_IsInitialized())
        return oly_host_fail(OLY_ERR_CALLBACK,
                             "buffer_callback failed: %s: the Python interpreter is not running",
                             u->name);
    /* Short programs run with the GIL held: then PyGILState_Check is all the
     * GIL work a call needs. */
    bool held = PyGILState_Check();
    PyGILState_STATE g = held ? PyGILState_LOCKED : PyGILState_Ensure();
    PyObject *st = NULL, *sv = NULL, *stb = NULL;
    if (__builtin_expect(PyErr_Occurred() != NULL, 0)) PyErr_Fetch(&st, &sv, &stb);
    oly_status s = OLY_OK;
    const oly_callback_frame *outer = ext_current_frame;
    ext_current_frame = fr;
    if (call_python(u, fr) < 0) s = ext_callback_fail("buffer_callback", u->name);
    ext_current_frame = outer;
    if (__builtin_expect(st != NULL, 0)) PyErr_Restore(st, sv, stb);
    if (!held) PyGILState_Release(g);
    return s;
}

/* ---------------------------------------------------------------- host fn cache
 * Eager calls reuse the host function of the same callable and trees, so the
 * eager executable cache (keyed by params, hence by host function) hits.
 * Replaced round-robin; guarded by the GIL. */

enum { CACHE_SIZE = 32 };

typedef struct cache_entry {
    PyObject *fn, *in_tree, *out_tree; /* owned; trees may be NULL */
    oly_host_fn *hf;                   /* owned reference */
} cache_entry;

static cache_entry cache[CACHE_SIZE];
static int cache_next;

static int same_tree(PyObject *a, PyObject *b)
{
    if (a == b) return 1;
    if (!a || !b) return 0;
    int eq = PyObject_RichCompareBool(a, b, Py_EQ);
    if (eq < 0) PyErr_Clear();
    return eq > 0;
}

static oly_host_fn *host_fn_for(PyObject *fn, PyObject *in_tree, PyObject *out_tree,
                                const char *name)
{
    for (int i = 0; i < CACHE_SIZE; i++) {
        cache_entry *e = &cache[i];
        if (e->fn == fn && strcmp(oly_host_fn_name(e->hf), name) == 0 &&
            same_tree(e->in_tree, in_tree) && same_tree(e->out_tree, out_tree))
            return oly_host_fn_retain(e->hf);
    }
    bcfn *u = calloc(1, sizeof *u);
    char *nm = strdup(name);
    if (!u || !nm) {
        free(u);
        free(nm);
        PyErr_NoMemory();
        return NULL;
    }
    u->fn = Py_NewRef(fn);
    u->in_tree = Py_XNewRef(in_tree);
    u->out_tree = Py_XNewRef(out_tree);
    u->name = nm;
    oly_host_fn *hf;
    oly_status s = oly_host_fn_new(name, trampoline, u, bcfn_release, &hf);
    if (s != OLY_OK) {
        Py_DECREF(fn);
        Py_XDECREF(in_tree);
        Py_XDECREF(out_tree);
        free(nm);
        free(u);
        ext_raise(s);
        return NULL;
    }
    cache_entry *e = &cache[cache_next];
    cache_next = (cache_next + 1) % CACHE_SIZE;
    cache_entry old = *e;
    e->fn = Py_NewRef(fn);
    e->in_tree = Py_XNewRef(in_tree);
    e->out_tree = Py_XNewRef(out_tree);
    e->hf = oly_host_fn_retain(hf);
    if (old.hf) oly_host_fn_release(old.hf);
    Py_XDECREF(old.fn);
    Py_XDECREF(old.in_tree);
    Py_XDECREF(old.out_tree);
    return hf;
}

/* ---------------------------------------------------------------- _core.buffer_callback */

/* The aliases as (input, output) pairs, checked against the K flattened
 * arguments and the result avals with the reference's messages; the same
 * output twice is refused too. *out is PyMem-allocated. 0 or -1. */
int ext_parse_aliases(PyObject *obj, PyObject *const *args, Py_ssize_t K,
                         const oly_aval *res, int M, oly_io_alias **out, int *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (obj == Py_None) return 0;
    PyObject *seq = PySequence_Fast(obj, "input_output_aliases must be a sequence of pairs");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    oly_io_alias *al = PyMem_Calloc((size_t)(n ? n : 1), sizeof *al);
    if (!al) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        long long i, o;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, k), "LL;input_output_aliases "
                                                                "entries are (input, output) "
                                                                "pairs of ints", &i, &o))
            goto fail;
        if (i < 0 || i >= K) {
            PyErr_Format(PyExc_ValueError,
                         "input_output_aliases contains the mapping '%lld:%lld' with input "
                         "index %lld outside the range [0, %zd).",
                         i, o, i, K);
            goto fail;
        }
        if (o < 0 || o >= M) {
            PyErr_Format(PyExc_ValueError,
                         "input_output_aliases contains the mapping '%lld:%lld' with output "
                         "index %lld outside the range [0, %d).",
                         i, o, o, M);
            goto fail;
        }
        oly_aval in_aval;
        if (ext_aval_of(args[i], &in_aval) < 0) goto fail;
        if (!oly_aval_equal(&in_aval, &res[o])) {
            char a[256], b[256];
            oly_aval_format(a, sizeof a, &in_aval);
            oly_aval_format(b, sizeof b, &res[o]);
            PyErr_Format(PyExc_ValueError,
                         "input_output_aliases contains the mapping '%lld:%lld' referring to an "
                         "input with abstract value %s and an output with a different abstract "
                         "value %s.",
                         i, o, a, b);
            goto fail;
        }
        for (Py_ssize_t e = 0; e < k; e++) {
            if (al[e].output == o) {
                PyErr_Format(PyExc_ValueError,
                             "input_output_aliases contains the mappings '%d:%lld' and "
                             "'%lld:%lld': output %lld can alias only one input.",
                             al[e].input, o, i, o, o);
                goto fail;
            }
        }
        al[k] = (oly_io_alias){(int)i, (int)o};
    }
    Py_DECREF(seq);
    *out = al;
    *n_out = (int)n;
    return 0;
fail:
    Py_DECREF(seq);
    PyMem_Free(al);
    return -1;
}

static PyObject *py_buffer_callback(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fn", "result_avals", "args", "in_tree", "out_tree", "vmap_method",
                             "has_side_effect", "input_output_aliases", "name", NULL};
    PyObject *fn, *ravals, *cargs, *in_tree = Py_None, *out_tree = Py_None, *vm = Py_None;
    PyObject *aliases = Py_None;
    int side = 0;
    const char *name = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OOOpOs:buffer_callback", kwlist, &fn,
                                     &ravals, &cargs, &in_tree, &out_tree, &vm, &side, &aliases,
                                     &name))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "buffer_callback: the callback must be callable, got %.200s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    PyObject *trees[2] = {in_tree, out_tree};
    for (int t = 0; t < 2; t++) {
        if (trees[t] != Py_None && !PyObject_TypeCheck(trees[t], ext_st->PyTreeDef_Type)) {
            PyErr_Format(PyExc_TypeError,
                         "buffer_callback: %s must be a PyTreeDef or None, got %.200s",
                         t ? "out_tree" : "in_tree", Py_TYPE(trees[t])->tp_name);
            return NULL;
        }
    }
    int vmap_method;
    if (ext_parse_vmap_method(vm, &vmap_method) < 0) return NULL;
    oly_aval *avals = NULL;
    int n_res = 0;
    if (ext_parse_result_avals(ravals, &avals, &n_res) < 0) return NULL;
    PyObject *seq = NULL, *result = NULL;
    oly_io_alias *al = NULL;
    int n_al = 0;
    oly_host_fn *hf = NULL;
    seq = PySequence_Fast(cargs, "buffer_callback: args must be a sequence");
    if (!seq) goto done;
    Py_ssize_t K = PySequence_Fast_GET_SIZE(seq);
    if (K > INT32_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "buffer_callback: too many arguments");
        goto done;
    }
    if (in_tree != Py_None && ext_treedef_num_leaves(in_tree) != K) {
        PyErr_Format(PyExc_ValueError,
                     "buffer_callback: in_tree has %zd leaves, %zd arguments given",
                     ext_treedef_num_leaves(in_tree), K);
        goto done;
    }
    if (out_tree == Py_None ? n_res != 1 : ext_treedef_num_leaves(out_tree) != n_res) {
        PyErr_Format(PyExc_ValueError, "buffer_callback: out_tree does not describe %d results",
                     n_res);
        goto done;
    }
    if (ext_parse_aliases(aliases, PySequence_Fast_ITEMS(seq), K, avals, n_res, &al, &n_al) < 0)
        goto done;
    hf = host_fn_for(fn, in_tree == Py_None ? NULL : in_tree,
                     out_tree == Py_None ? NULL : out_tree, name ? name : "callback");
    if (!hf) goto done;
    oly_params_callback params = {
        .callback = hf,
        .result_avals = n_res ? avals : NULL,
        .n_results = n_res,
        .vmap_method = vmap_method,
        .has_side_effect = side != 0,
        .aliases = n_al ? al : NULL,
        .n_aliases = n_al,
    };
    PyObject *tuple = ext_bind(oly_prim_lookup("buffer_callback"), &params,
                               PySequence_Fast_ITEMS(seq), K, NULL, 0);
    if (!tuple) goto done;
    result = PySequence_List(tuple);
    Py_DECREF(tuple);
done:
    if (hf) oly_host_fn_release(hf);
    Py_XDECREF(seq);
    PyMem_Free(al);
    PyMem_Free(avals);
    return result;
}

static PyObject *py_buffer_set_stage(PyObject *Py_UNUSED(m), PyObject *arg)
{
    Py_XSETREF(stage_enum, Py_NewRef(arg));
    Py_RETURN_NONE;
}

PyMethodDef ext_buffer_methods[] = {
    {"buffer_callback", (PyCFunction)(void (*)(void))py_buffer_callback,
     METH_VARARGS | METH_KEYWORDS,
     "buffer_callback(fn, result_avals, args, *, in_tree=None, out_tree=None, vmap_method=None,\n"
     "                has_side_effect=False, input_output_aliases=None, name=None) -> list\n"
     "Bind buffer_callback: fn(ctx, out, *leaves) (or fn(ctx, out, *a, **k) with (a, k) =\n"
     "in_tree.unflatten(leaves)) writes the results in place; out is the one output Buffer,\n"
     "or out_tree.unflatten(output Buffers). input_output_aliases: (input, output) pairs."},
    {"_buffer_set_stage", py_buffer_set_stage, METH_O,
     "_buffer_set_stage(ExecutionStage): the enum ExecutionContext.stage answers with"},
    {NULL, NULL, 0, NULL},
};

int ext_buffer_init(PyObject *module)
{
    Buffer_Type = (PyTypeObject *)PyType_FromSpec(&Buffer_spec);
    if (!Buffer_Type) return -1;
    Context_Type = (PyTypeObject *)PyType_FromSpec(&Context_spec);
    if (!Context_Type) return -1;
    the_context = Context_Type->tp_alloc(Context_Type, 0);
    if (!the_context) return -1;
    if (PyModule_AddObjectRef(module, "Buffer", (PyObject *)Buffer_Type) < 0) return -1;
    if (PyModule_AddObjectRef(module, "ExecutionContext", (PyObject *)Context_Type) < 0) return -1;
    return 0;
}
