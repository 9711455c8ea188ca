/* module.c — PyInit__core: the module state, the mapping from core status to
 * Python exceptions, the x64 switch and small module-level functions.
 *
 * The module collects the method tables of every file.
 */
/* NumPy's C-API (and import_array, defined in its header here) converts
 * between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"
#define EXT_NUMPY_IMPORT
#include "ext.h"


static ext_state state;
ext_state *ext_st = NULL;

/* ---------------------------------------------------------------- errors */

PyObject *ext_raise(oly_status s)
{
    void (*free_fn)(void *) = NULL;
    void *payload = oly_error_take_payload(&free_fn);
    const char *msg = oly_last_error();
    if (!msg || !*msg) msg = oly_status_name(s);
    PyObject *exc_type;
    switch (s) {
    case OLY_ERR_TYPE:
    case OLY_ERR_SHAPE: exc_type = PyExc_TypeError; break;
    case OLY_ERR_INVALID: exc_type = PyExc_ValueError; break;
    case OLY_ERR_UNSUPPORTED: exc_type = PyExc_NotImplementedError; break;
    case OLY_ERR_NOMEM: exc_type = PyExc_MemoryError; break;
    case OLY_ERR_CALLBACK:
        exc_type = ext_st && ext_st->CallbackError ? ext_st->CallbackError : PyExc_RuntimeError;
        break;
    default: exc_type = PyExc_RuntimeError; break;
    }
    PyObject *cause = NULL; /* owned */
    if (payload && free_fn == ext_payload_free_reraise) { /* a custom rule's exception */
        oly_error_clear();
        PyObject *e = payload; /* steal */
        PyObject *tb = PyException_GetTraceback(e);
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(e)), e, tb);
        return NULL;
    }
    if (payload) {
        if (free_fn == ext_payload_free)
            cause = (PyObject *)payload; /* steal the exception reference */
        else if (free_fn)
            free_fn(payload);
    }
    /* KeyboardInterrupt, SystemExit: not errors of the callback but requests to
     * stop; they reach the caller as themselves, so Ctrl-C ends a long run. */
    if (cause && PyExceptionInstance_Check(cause) &&
        !PyObject_IsInstance(cause, PyExc_Exception)) {
        oly_error_clear();
        PyObject *tb = PyException_GetTraceback(cause);
        PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(cause)), cause, tb);
        return NULL;
    }
    PyErr_SetString(exc_type, msg); /* msg lives in the error state: clear after */
    oly_error_clear();
    if (cause) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (value && PyExceptionInstance_Check(cause)) {
            Py_INCREF(cause);
            PyException_SetContext(value, cause); /* steals */
            PyException_SetCause(value, cause);   /* steals */
        } else {
            Py_DECREF(cause);
        }
        PyErr_Restore(type, value, tb);
    }
    return NULL;
}

/* ---------------------------------------------------------------- functions */

static PyObject *py_set_x64(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    oly_set_x64(on != 0);
    Py_RETURN_NONE;
}

static PyObject *py_x64_enabled(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(oly_x64_enabled());
}

PyObject *ext_call_nogil(oly_status (*fn)(void))
{
    oly_status s;
    Py_BEGIN_ALLOW_THREADS
    s = fn();
    Py_END_ALLOW_THREADS
    if (s != OLY_OK) return ext_raise(s);
    Py_RETURN_NONE;
}

static PyObject *py_effects_barrier(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return ext_call_nogil(oly_effects_barrier);
}

static const char *const dispatch_modes[] = {"auto", "async", "sync"};

static PyObject *py_set_dispatch_mode(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, dispatch_modes[i])) {
            oly_set_dispatch_mode((oly_dispatch_mode)i);
            Py_RETURN_NONE;
        }
    if (PyErr_Occurred()) return NULL;
    PyErr_Format(PyExc_ValueError,
                 "olympus_async_dispatch must be 'auto', 'async' or 'sync', got %R", arg);
    return NULL;
}

static PyObject *py_dispatch_mode(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyUnicode_FromString(dispatch_modes[oly_dispatch_mode_get()]);
}

static PyObject *py_set_device_count(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || n > 1024) {
        PyErr_Format(PyExc_ValueError, "olympus_num_cpu_devices must be in [1, 1024], got %ld", n);
        return NULL;
    }
    oly_status s = oly_set_device_count((int)n);
    if (s != OLY_OK) return ext_raise(s);
    Py_RETURN_NONE;
}

static PyObject *py_device_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(oly_device_count());
}

/* {"level": the CPU kernels' level, "max_level": the best supported, "levels":
 * every supported level, lowest first}. */
static PyObject *py_cpu_info(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    oly_cpu_level max = oly_cpu_level_max();
    PyObject *levels = PyList_New(0);
    for (int l = 0; levels && l <= (int)max; l++) {
        PyObject *name = PyUnicode_FromString(oly_cpu_level_name((oly_cpu_level)l));
        if (!name || PyList_Append(levels, name) < 0) Py_CLEAR(levels);
        Py_XDECREF(name);
    }
    if (!levels) return NULL;
    return Py_BuildValue("{s:s,s:s,s:N}", "level", oly_cpu_level_name(oly_cpu_level_get()),
                         "max_level", oly_cpu_level_name(max), "levels", levels);
}

static PyObject *py_is_tracer(PyObject *Py_UNUSED(m), PyObject *arg)
{
    return PyBool_FromLong(ext_is_tracer(arg));
}

static PyObject *py_tracing(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(ext_trace_current() != NULL);
}

/* Fault injection for tests (oly_fault_inject_alloc): the allocation n+1 from
 * now inside the library fails; n < 0 disarms. */
static PyObject *py_fault_inject_alloc(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    oly_fault_inject_alloc(n);
    Py_RETURN_NONE;
}

static PyObject *py_fault_inject_left(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(oly_fault_inject_left());
}

static PyMethodDef module_methods[] = {
    {"_fault_inject_alloc", py_fault_inject_alloc, METH_O,
     "_fault_inject_alloc(n): make the library's allocation n+1 from now fail (n < 0: off)"},
    {"_fault_inject_left", py_fault_inject_left, METH_NOARGS,
     "_fault_inject_left() -> allocations left before the injected failure"},
    {"tracing", py_tracing, METH_NOARGS,
     "tracing() -> True while a trace is open on this thread (operations are staged)"},
    {"set_x64", py_set_x64, METH_O, "set_x64(on): switch 64-bit default types on or off"},
    {"x64_enabled", py_x64_enabled, METH_NOARGS, "x64_enabled() -> bool"},
    {"effects_barrier", py_effects_barrier, METH_NOARGS,
     "effects_barrier(): wait until every computation queued on a device stream has run;\n"
     "raise the first failure of one that had no outputs to carry it"},
    {"set_dispatch_mode", py_set_dispatch_mode, METH_O,
     "set_dispatch_mode('auto' | 'async' | 'sync'): see olympus.config's olympus_async_dispatch"},
    {"dispatch_mode", py_dispatch_mode, METH_NOARGS, "dispatch_mode() -> 'auto' | 'async' | 'sync'"},
    {"device_count", py_device_count, METH_NOARGS, "device_count() -> number of CPU devices"},
    {"set_device_count", py_set_device_count, METH_O,
     "set_device_count(n): the number of CPU devices, before they are first used"},
    {"is_tracer", py_is_tracer, METH_O, "is_tracer(x) -> True if x is a Tracer"},
    {"cpu_info", py_cpu_info, METH_NOARGS,
     "cpu_info() -> {'level', 'max_level', 'levels'}: the CPU kernels' instruction level\n"
     "(portable | avx2 | avx512; OLYMPUS_CPU_LEVEL lowers it), the best this CPU supports,\n"
     "and every supported level"},
    {NULL, NULL, 0, NULL},
};

/* ---------------------------------------------------------------- init */

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "olympus._core",
    .m_doc = "olympus._core: arrays, tracing, jit and callbacks of olympus, in C.",
    .m_size = -1,
    .m_methods = NULL, /* filled by PyInit__core */
};

static Py_ssize_t count_methods(const PyMethodDef *t)
{
    Py_ssize_t n = 0;
    if (t)
        while (t[n].ml_name) n++;
    return n;
}

/* The union of every file's table; allocated once, lives as long as the process. */
static PyMethodDef *collect_methods(void)
{
    const PyMethodDef *tables[] = {module_methods, ext_array_methods, ext_tracer_methods,
                                   ext_operator_methods,
                                   ext_jit_methods, ext_transform_methods,
                                   ext_pytree_methods, ext_callback_methods,
                                   ext_buffer_methods, ext_ffi_methods,
                                   ext_distributed_methods,
                                   ext_sharded_methods};
    Py_ssize_t total = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) total += count_methods(tables[i]);
    PyMethodDef *all = PyMem_Calloc((size_t)total + 1, sizeof *all);
    if (!all) return NULL;
    Py_ssize_t k = 0;
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        Py_ssize_t n = count_methods(tables[i]);
        for (Py_ssize_t j = 0; j < n; j++) all[k++] = tables[i][j];
    }
    return all; /* all[total] is the zeroed sentinel */
}

static int init_dtypes(void)
{
    static const struct { oly_dtype t; int npy; } map[] = {
        {OLY_BOOL, NPY_BOOL},       {OLY_INT8, NPY_INT8},       {OLY_INT16, NPY_INT16},
        {OLY_INT32, NPY_INT32},     {OLY_INT64, NPY_INT64},     {OLY_UINT8, NPY_UINT8},
        {OLY_UINT16, NPY_UINT16},   {OLY_UINT32, NPY_UINT32},   {OLY_UINT64, NPY_UINT64},
        {OLY_FLOAT16, NPY_FLOAT16}, {OLY_FLOAT32, NPY_FLOAT32}, {OLY_FLOAT64, NPY_FLOAT64},
        {OLY_COMPLEX64, NPY_COMPLEX64}, {OLY_COMPLEX128, NPY_COMPLEX128},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        PyArray_Descr *d = PyArray_DescrFromType(map[i].npy);
        if (!d) return -1;
        state.np_dtype[map[i].t] = (PyObject *)d; /* owned by the state for life */
    }
    return 0;
}

PyMODINIT_FUNC PyInit__core(void);

PyMODINIT_FUNC PyInit__core(void)
{
    import_array();
    if (ext_st) {
        PyErr_SetString(PyExc_ImportError, "olympus._core cannot be initialised twice");
        return NULL;
    }
    if (init_dtypes() < 0) return NULL;
    state.CallbackError = PyErr_NewExceptionWithDoc(
        "olympus._core.CallbackError",
        "A host callback failed while a program ran; __cause__ is the original exception.",
        PyExc_RuntimeError, NULL);
    if (!state.CallbackError) return NULL;
    state.ConcretizationTypeError = PyErr_NewExceptionWithDoc(
        "olympus._core.ConcretizationTypeError",
        "A traced (abstract) value was used where a concrete value is needed.",
        PyExc_TypeError, NULL);
    if (!state.ConcretizationTypeError) return NULL;
    ext_st = &state;

    if (!module_def.m_methods) {
        module_def.m_methods = collect_methods();
        if (!module_def.m_methods) return PyErr_NoMemory();
    }
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "CallbackError", state.CallbackError) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "ConcretizationTypeError", state.ConcretizationTypeError) < 0)
        goto fail;
    if (ext_array_init(m) < 0) goto fail;
    if (ext_tracer_init(m) < 0) goto fail;
    if (ext_program_init(m) < 0) goto fail;
    if (ext_jit_init(m) < 0) goto fail;
    if (ext_pytree_init(m) < 0) goto fail;
    if (ext_callback_init(m) < 0) goto fail;
    if (ext_buffer_init(m) < 0) goto fail;
    if (ext_ffi_init(m) < 0) goto fail;
    return m;

fail:
    Py_DECREF(m);
    ext_st = NULL;
    return NULL;
}
