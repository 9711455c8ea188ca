/* distributed.c — olympus.distributed's bindings: joining the processes of an
 * mpirun job, their index and count, failure notices, and one collective on a
 * NumPy buffer for tests and benchmarks (the transport of src/rt/mpi.c). Each
 * call that may wait for other processes releases the GIL. */
/* NumPy's C-API converts between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"
#include "ext.h"

static PyObject *py_mpi_available(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(oly_distributed_available());
}

static PyObject *py_distributed_initialize(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return ext_call_nogil(oly_distributed_initialize);
}

static PyObject *py_distributed_shutdown(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return ext_call_nogil(oly_distributed_shutdown);
}

static PyObject *py_distributed_is_initialized(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyBool_FromLong(oly_distributed_is_initialized());
}

static PyObject *py_process_index(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(oly_process_index());
}

static PyObject *py_process_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromLong(oly_process_count());
}

static PyObject *py_distributed_fail(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *msg = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!msg) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "distributed_fail: expected a str, got %.100s",
                         Py_TYPE(arg)->tp_name);
        return NULL;
    }
    oly_distributed_fail(msg);
    Py_RETURN_NONE;
}

/* distributed_allreduce(x, op) -> a new NumPy array: op ("sum" | "max" | "min")
 * over every process's x, through the transport. */
static PyObject *py_distributed_allreduce(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *obj;
    const char *opname;
    if (!PyArg_ParseTuple(args, "Os:distributed_allreduce", &obj, &opname)) return NULL;
    static const char *const ops[] = {"sum", "max", "min"};
    int op = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(opname, ops[i])) op = i;
    if (op < 0) {
        PyErr_Format(PyExc_ValueError, "allreduce: op must be 'sum', 'max' or 'min', got '%s'",
                     opname);
        return NULL;
    }
    PyArrayObject *x = (PyArrayObject *)PyArray_FROMANY(obj, NPY_NOTYPE, 0, 0,
                                                        NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (!x) return NULL;
    oly_dtype t;
    if (ext_dtype_from_py((PyObject *)PyArray_DESCR(x), &t) < 0) {
        Py_DECREF(x);
        return NULL;
    }
    PyArrayObject *y = (PyArrayObject *)PyArray_NewLikeArray(x, NPY_CORDER, NULL, 0);
    if (!y) {
        Py_DECREF(x);
        return NULL;
    }
    oly_status s;
    const void *src = PyArray_DATA(x);
    void *dst = PyArray_DATA(y);
    int64_t n = (int64_t)PyArray_SIZE(x);
    Py_BEGIN_ALLOW_THREADS
    s = oly_distributed_allreduce(src, dst, n, t, (oly_collective_op)op);
    Py_END_ALLOW_THREADS
    Py_DECREF(x);
    if (s != OLY_OK) {
        Py_DECREF(y);
        return ext_raise(s);
    }
    return (PyObject *)y;
}

PyMethodDef ext_distributed_methods[] = {
    {"mpi_available", py_mpi_available, METH_NOARGS,
     "mpi_available() -> True when olympus was built with MPI"},
    {"distributed_initialize", py_distributed_initialize, METH_NOARGS,
     "distributed_initialize(): join the processes of an mpirun job"},
    {"distributed_shutdown", py_distributed_shutdown, METH_NOARGS,
     "distributed_shutdown(): leave the job (also done at exit)"},
    {"distributed_is_initialized", py_distributed_is_initialized, METH_NOARGS,
     "distributed_is_initialized() -> bool"},
    {"process_index", py_process_index, METH_NOARGS, "process_index() -> this process's index"},
    {"process_count", py_process_count, METH_NOARGS, "process_count() -> number of processes"},
    {"distributed_fail", py_distributed_fail, METH_O,
     "distributed_fail(message): this process failed; peers' collectives fail with message"},
    {"distributed_allreduce", py_distributed_allreduce, METH_VARARGS,
     "distributed_allreduce(x, op) -> op ('sum' | 'max' | 'min') of x over every process"},
    {NULL, NULL, 0, NULL},
};
