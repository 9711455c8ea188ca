/* floor.c — the floors the benchmarks compare olympus against, as a tiny CPython
 * extension (_olybench_floor), built by bench/run.py.
 *
 * py_loop: the C->Python callback floor. A C loop calls a Python function n
 * times with the GIL held, doing the least any callback trampoline must do:
 * wrap the argument buffer zero-copy as a read-only ndarray, call, turn the
 * result into an ndarray of the declared dtype (np.asarray), check its shape,
 * copy it into the result buffer. Calls are chained (call i+1 gets the result of
 * call i), as in the olympus programs measured beside it.
 *
 * py_loop_inplace: the C->Python floor of an in-place callback (what
 * buffer_callback does): the C loop calls fn(None, out, arg) n times, with the
 * argument and the result buffer wrapped zero-copy as ndarrays (read-only and
 * writable) and the return value checked to be None. No result to convert or
 * copy. Calls are chained the same way.
 *
 * chain: the hand-written C loop for out = sin(x)**2 + cos(x)*y (f32), on
 * glibc's libmvec sinf/cosf (-ffast-math: 4-ULP functions, 16 lanes).
 *
 * chain_sleef: the same in one pass of AVX-512 registers on the functions
 * olympus guarantees (SLEEF's 1-ULP sinf16_u10 / cosf16_u10): the floor at
 * olympus's accuracy. None where the CPU or the build lacks AVX-512.
 *
 * affine: out = (x*2+1)*y - x (f32) in one pass: two reads and a write per
 * element, the memory-bandwidth floor of any evaluation of it.
 *
 * chain32: out = x, then out = out*a + b sixteen times (32 chained mul/add,
 * f32) in one pass over the data: what a fusing compiler could emit.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <math.h>
#include <string.h>

/* py_loop(fn, x, n, want_result=True) -> ndarray (the last value in the chain).
 * x: a C-contiguous ndarray giving the argument's shape, dtype and first value. */
static PyObject *py_loop(PyObject *self, PyObject *args)
{
    PyObject *fn, *x_obj;
    Py_ssize_t n;
    int want_result = 1;
    if (!PyArg_ParseTuple(args, "OOn|p", &fn, &x_obj, &n, &want_result)) return NULL;
    PyArrayObject *x = (PyArrayObject *)PyArray_FROMANY(x_obj, NPY_NOTYPE, 0, 0,
                                                        NPY_ARRAY_CARRAY_RO);
    if (!x) return NULL;
    PyArray_Descr *descr = PyArray_DESCR(x);
    int nd = PyArray_NDIM(x);
    npy_intp dims[NPY_MAXDIMS];
    memcpy(dims, PyArray_DIMS(x), (size_t)nd * sizeof(npy_intp));
    size_t nbytes = (size_t)PyArray_NBYTES(x);
    char *buf = PyMem_Malloc(2 * (nbytes ? nbytes : 1));
    if (!buf) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *cur = buf, *next = buf + (nbytes ? nbytes : 1);
    memcpy(cur, PyArray_DATA(x), nbytes);

    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(descr); /* stolen by NewFromDescr */
        PyObject *arg = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, cur,
                                             NPY_ARRAY_C_CONTIGUOUS, NULL);
        if (!arg) goto fail;
        PyObject *res = PyObject_CallOneArg(fn, arg);
        Py_DECREF(arg);
        if (!res) goto fail;
        if (!want_result) {
            Py_DECREF(res);
            continue;
        }
        Py_INCREF(descr); /* stolen by FromAny */
        PyArrayObject *r = (PyArrayObject *)PyArray_FromAny(res, descr, 0, 0,
                                                            NPY_ARRAY_CARRAY_RO, NULL);
        Py_DECREF(res);
        if (!r) goto fail;
        if (PyArray_NDIM(r) != nd ||
            memcmp(PyArray_DIMS(r), dims, (size_t)nd * sizeof(npy_intp)) != 0) {
            Py_DECREF(r);
            PyErr_SetString(PyExc_ValueError, "py_loop: result shape differs from the argument's");
            goto fail;
        }
        memcpy(next, PyArray_DATA(r), nbytes);
        Py_DECREF(r);
        char *t = cur;
        cur = next;
        next = t;
    }
    Py_INCREF(descr);
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0, NULL);
    if (out) memcpy(PyArray_DATA((PyArrayObject *)out), cur, nbytes);
    PyMem_Free(buf);
    Py_DECREF(x);
    return out;
fail:
    PyMem_Free(buf);
    Py_DECREF(x);
    return NULL;
}

/* py_loop_inplace(fn, x, n) -> ndarray (the last value in the chain). */
static PyObject *py_loop_inplace(PyObject *self, PyObject *args)
{
    PyObject *fn, *x_obj;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OOn", &fn, &x_obj, &n)) return NULL;
    PyArrayObject *x = (PyArrayObject *)PyArray_FROMANY(x_obj, NPY_NOTYPE, 0, 0,
                                                        NPY_ARRAY_CARRAY_RO);
    if (!x) return NULL;
    PyArray_Descr *descr = PyArray_DESCR(x);
    int nd = PyArray_NDIM(x);
    npy_intp dims[NPY_MAXDIMS];
    memcpy(dims, PyArray_DIMS(x), (size_t)nd * sizeof(npy_intp));
    size_t nbytes = (size_t)PyArray_NBYTES(x);
    char *buf = PyMem_Malloc(2 * (nbytes ? nbytes : 1));
    if (!buf) {
        Py_DECREF(x);
        return PyErr_NoMemory();
    }
    char *cur = buf, *next = buf + (nbytes ? nbytes : 1);
    memcpy(cur, PyArray_DATA(x), nbytes);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(descr);
        PyObject *arg = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, cur,
                                             NPY_ARRAY_C_CONTIGUOUS, NULL);
        Py_INCREF(descr);
        PyObject *out = arg ? PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, next,
                                                   NPY_ARRAY_CARRAY, NULL)
                            : NULL;
        PyObject *argv[3] = {Py_None, out, arg};
        PyObject *res = out ? PyObject_Vectorcall(fn, argv, 3, NULL) : NULL;
        Py_XDECREF(arg);
        Py_XDECREF(out);
        if (!res) goto fail;
        Py_DECREF(res);
        if (res != Py_None) {
            PyErr_SetString(PyExc_ValueError, "py_loop_inplace: fn must return None");
            goto fail;
        }
        char *t = cur;
        cur = next;
        next = t;
    }
    Py_INCREF(descr);
    PyObject *res = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0, NULL);
    if (res) memcpy(PyArray_DATA((PyArrayObject *)res), cur, nbytes);
    PyMem_Free(buf);
    Py_DECREF(x);
    return res;
fail:
    PyMem_Free(buf);
    Py_DECREF(x);
    return NULL;
}

/* chain(x, y, out): out = sin(x)**2 + cos(x)*y over float32 buffers of one size. */
static PyObject *chain(PyObject *self, PyObject *args)
{
    Py_buffer bx, by, bo;
    if (!PyArg_ParseTuple(args, "y*y*w*", &bx, &by, &bo)) return NULL;
    PyObject *ret = NULL;
    if (bx.len != by.len || bx.len != bo.len || bx.len % 4) {
        PyErr_SetString(PyExc_ValueError, "chain: x, y, out must be float32 of one size");
        goto done;
    }
    const float *x = bx.buf, *y = by.buf;
    float *o = bo.buf;
    Py_ssize_t n = bx.len / 4;
    /* Blocked in two loops so that gcc does not fuse sinf and cosf into a scalar
     * sincosf call: each loop then vectorises with libmvec's sinf/cosf. */
    Py_BEGIN_ALLOW_THREADS
    float s[1024];
    for (Py_ssize_t i0 = 0; i0 < n; i0 += 1024) {
        Py_ssize_t m = n - i0 < 1024 ? n - i0 : 1024;
        const float *xb = x + i0, *yb = y + i0;
        float *ob = o + i0;
        for (Py_ssize_t i = 0; i < m; i++) s[i] = sinf(xb[i]);
        for (Py_ssize_t i = 0; i < m; i++) ob[i] = s[i] * s[i] + cosf(xb[i]) * yb[i];
    }
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bo);
    return ret;
}

#if defined(__AVX512F__) && defined(OLY_BENCH_SLEEF)
#include <immintrin.h>
#include <sleef.h>
#endif

/* chain_sleef(x, y, out): chain's formula, SLEEF u10 in registers (f32). */
static PyObject *chain_sleef(PyObject *self, PyObject *args)
{
#if defined(__AVX512F__) && defined(OLY_BENCH_SLEEF)
    Py_buffer bx, by, bo;
    if (!PyArg_ParseTuple(args, "y*y*w*", &bx, &by, &bo)) return NULL;
    PyObject *ret = NULL;
    if (bx.len != by.len || bx.len != bo.len || bx.len % 64) {
        PyErr_SetString(PyExc_ValueError,
                        "chain_sleef: x, y, out must be float32 of one size, a multiple of 16");
        goto done;
    }
    const float *x = bx.buf, *y = by.buf;
    float *o = bo.buf;
    Py_ssize_t n = bx.len / 4;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 s = Sleef_sinf16_u10avx512f(v), c = Sleef_cosf16_u10avx512f(v);
        _mm512_storeu_ps(o + i, _mm512_add_ps(_mm512_mul_ps(s, s),
                                              _mm512_mul_ps(c, _mm512_loadu_ps(y + i))));
    }
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bo);
    return ret;
#else
    return Py_NewRef(Py_None);
#endif
}

/* affine(x, y, out): out = (x*2+1)*y - x over float32 buffers of one size. */
static PyObject *affine(PyObject *self, PyObject *args)
{
    Py_buffer bx, by, bo;
    if (!PyArg_ParseTuple(args, "y*y*w*", &bx, &by, &bo)) return NULL;
    PyObject *ret = NULL;
    if (bx.len != by.len || bx.len != bo.len || bx.len % 4) {
        PyErr_SetString(PyExc_ValueError, "affine: x, y, out must be float32 of one size");
        goto done;
    }
    const float *x = bx.buf, *y = by.buf;
    float *o = bo.buf;
    Py_ssize_t n = bx.len / 4;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) o[i] = (x[i] * 2.0f + 1.0f) * y[i] - x[i];
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bx);
    PyBuffer_Release(&by);
    PyBuffer_Release(&bo);
    return ret;
}

/* chain32(x, out, a, b): out = x; out = out*a + b, 16 times (float32). */
static PyObject *chain32(PyObject *self, PyObject *args)
{
    Py_buffer bx, bo;
    float a, b;
    if (!PyArg_ParseTuple(args, "y*w*ff", &bx, &bo, &a, &b)) return NULL;
    PyObject *ret = NULL;
    if (bx.len != bo.len || bx.len % 4) {
        PyErr_SetString(PyExc_ValueError, "chain32: x, out must be float32 of one size");
        goto done;
    }
    const float *x = bx.buf;
    float *o = bo.buf;
    Py_ssize_t n = bx.len / 4;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        float v = x[i];
        for (int k = 0; k < 16; k++) v = v * a + b;
        o[i] = v;
    }
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bo);
    return ret;
}

static PyMethodDef methods[] = {
    {"py_loop", py_loop, METH_VARARGS,
     "py_loop(fn, x, n, want_result=True): the C->Python callback floor (n chained calls)."},
    {"py_loop_inplace", py_loop_inplace, METH_VARARGS,
     "py_loop_inplace(fn, x, n): the C->Python floor of an in-place callback fn(None, out, x)."},
    {"chain", chain, METH_VARARGS, "chain(x, y, out): out = sin(x)**2 + cos(x)*y (f32)."},
    {"chain_sleef", chain_sleef, METH_VARARGS,
     "chain_sleef(x, y, out): chain on SLEEF's u10 sinf/cosf in AVX-512 registers (None: "
     "not built with them; out untouched)."},
    {"affine", affine, METH_VARARGS, "affine(x, y, out): out = (x*2+1)*y - x (f32)."},
    {"chain32", chain32, METH_VARARGS,
     "chain32(x, out, a, b): out = x, then out = out*a + b 16 times (f32)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_olybench_floor", "olympus benchmark floors", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__olybench_floor(void);
PyMODINIT_FUNC PyInit__olybench_floor(void)
{
    import_array();
    return PyModule_Create(&module);
}
