/* tracer.c — the Tracer type, the thread-local trace stack, bind (eager or
 * staged), type promotion, params parsing, and the operators shared by Array
 * and Tracer.
 *
 * Tracing is "omnistaging": while a trace is open on this thread, every bind
 * goes into the innermost trace (the top of the stack) — concrete arrays become
 * constants, Python scalars literals — so effects met while tracing run when
 * the program runs, not at trace time. A Tracer of an enclosing trace used in
 * an inner trace is lifted into an extra trailing input of the inner program
 * (closure capture); the finished trace reports those outer values.
 *
 * A trace is refcounted: the stack holds one reference and every Tracer one, so
 * a Tracer that leaks out of its trace stays safe to touch (its var is never
 * read once the trace is closed; using it raises UnexpectedTracerError).
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

#include "structmember.h"

#define FN_SLOT(f) (__extension__(void *)(f))

/* ---------------------------------------------------------------- traces */

struct ext_trace {
    long refcnt;            /* the stack's reference + one per Tracer */
    oly_builder *b;         /* owned; NULL once the trace is closed */
    ext_trace *parent;      /* borrowed: the enclosing trace while on the stack */
    int level;              /* depth on the stack: 0 is the outermost */
    bool active;            /* on the stack */
    PyObject *captured;     /* owned list: outer values lifted into inputs */
    oly_var **cap_var;      /* owned (PyMem): the input var of each captured value */
    Py_ssize_t cap_cap;
    oly_array **const_arr;  /* owned (PyMem) array of borrowed keys (the builder retains) */
    oly_var **const_var;    /* owned (PyMem) */
    Py_ssize_t n_const, const_cap;
};

static _Thread_local ext_trace *top; /* borrowed: the innermost open trace */

typedef struct TracerObject {
    PyObject_HEAD
    ext_trace *trace;       /* owned reference */
    oly_var *var;           /* borrowed from trace->b: read only while trace->active */
    oly_aval aval;
    PyObject *weakreflist;
} TracerObject;

static PyObject *UnexpectedTracerError; /* owned */
static PyTypeObject *ShapedArray_Type;  /* owned */

#define TR(o) ((TracerObject *)(o))

static void trace_decref(ext_trace *t)
{
    if (--t->refcnt > 0) return;
    oly_builder_free(t->b);
    Py_XDECREF(t->captured);
    PyMem_Free(t->cap_var);
    PyMem_Free(t->const_arr);
    PyMem_Free(t->const_var);
    PyMem_Free(t);
}

ext_trace *ext_trace_push(void)
{
    ext_trace *t = PyMem_Calloc(1, sizeof *t);
    if (!t) return (ext_trace *)PyErr_NoMemory();
    t->captured = PyList_New(0);
    if (!t->captured) {
        PyMem_Free(t);
        return NULL;
    }
    oly_status s = oly_builder_new(&t->b);
    if (s != OLY_OK) {
        Py_DECREF(t->captured);
        PyMem_Free(t);
        return (ext_trace *)ext_raise(s);
    }
    t->refcnt = 1;
    t->parent = top;
    t->level = top ? top->level + 1 : 0;
    t->active = true;
    top = t;
    return t;
}

/* Take t off the stack (normally the top) and close it. Drops the stack's reference. */
static void trace_close(ext_trace *t)
{
    if (top == t) {
        top = t->parent;
    } else {
        for (ext_trace *c = top; c; c = c->parent)
            if (c->parent == t) {
                c->parent = t->parent;
                break;
            }
    }
    t->parent = NULL;
    t->active = false;
    oly_builder_free(t->b);
    t->b = NULL;
    Py_CLEAR(t->captured);
    trace_decref(t);
}

void ext_trace_discard(ext_trace *t)
{
    if (t) trace_close(t);
}

ext_trace *ext_trace_current(void) { return top; }

static bool on_this_stack(const ext_trace *t)
{
    for (const ext_trace *c = top; c; c = c->parent)
        if (c == t) return true;
    return false;
}

/* ---------------------------------------------------------------- Tracer objects */

static PyObject *tracer_new(ext_trace *t, oly_var *v)
{
    TracerObject *o = PyObject_New(TracerObject, ext_st->Tracer_Type);
    if (!o) return NULL;
    t->refcnt++;
    o->trace = t;
    o->var = v;
    o->aval = *oly_var_aval(v);
    o->weakreflist = NULL;
    return (PyObject *)o;
}

PyObject *ext_trace_new_input(ext_trace *t, const oly_aval *aval)
{
    if (!t || !t->active) {
        PyErr_SetString(PyExc_RuntimeError, "ext_trace_new_input: the trace is closed");
        return NULL;
    }
    oly_var *v;
    oly_status s = oly_builder_add_input(t->b, aval, &v);
    if (s != OLY_OK) return ext_raise(s);
    return tracer_new(t, v);
}

int ext_is_tracer(PyObject *o)
{
    return ext_st && ext_st->Tracer_Type && Py_IS_TYPE(o, ext_st->Tracer_Type);
}

/* "float32[5,3]" (NumPy names, like JAX's ShapedArray). */
static void format_shape(char *buf, size_t n, const oly_aval *a)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", oly_dtype_name(a->dtype));
    for (int i = 0; i < a->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)a->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static PyObject *Tracer_repr(PyObject *self)
{
    char shape[512];
    format_shape(shape, sizeof shape, &TR(self)->aval);
    return PyUnicode_FromFormat("Traced<ShapedArray(%s%s)>with<DynamicJaxprTrace>", shape,
                                TR(self)->aval.weak ? ", weak_type=True" : "");
}

static PyObject *leaked_error(PyObject *tracer)
{
    PyObject *r = Tracer_repr(tracer);
    if (!r) return NULL;
    PyErr_Format(UnexpectedTracerError,
                 "Encountered an unexpected tracer. A function transformed by olympus had a side "
                 "effect that let a traced value escape its trace (for example, stored it in a "
                 "global or an enclosing scope), and the value was used after the trace had "
                 "finished: %U. Return traced values from the transformed function instead.",
                 r);
    Py_DECREF(r);
    return NULL;
}

static PyObject *concretization_error(PyObject *self, const char *fn)
{
    char shape[512];
    format_shape(shape, sizeof shape, &TR(self)->aval);
    PyErr_Format(ext_st->ConcretizationTypeError,
                 "Abstract tracer value encountered where concrete value is expected: traced "
                 "array with shape %s.\nThe problem arose with the `%s` function. If trying to "
                 "convert the traced value to a concrete value (Python control flow, a NumPy "
                 "conversion), either mark the argument it depends on as static "
                 "(static_argnums / static_argnames of jit) or use olympus.lax control flow "
                 "(cond, while_loop) or olympus.numpy.where instead.",
                 shape, fn);
    return NULL;
}

static void Tracer_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (TR(self)->weakreflist) PyObject_ClearWeakRefs(self);
    trace_decref(TR(self)->trace);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Tracer_get_shape(PyObject *self, void *Py_UNUSED(c))
{
    return ext_shape_tuple(&TR(self)->aval);
}
static PyObject *Tracer_get_dtype(PyObject *self, void *Py_UNUSED(c))
{
    return ext_dtype_to_numpy(TR(self)->aval.dtype);
}
static PyObject *Tracer_get_ndim(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(TR(self)->aval.rank);
}
static PyObject *Tracer_get_size(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(oly_aval_size(&TR(self)->aval));
}
static PyObject *Tracer_get_weak(PyObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(TR(self)->aval.weak);
}
static PyObject *Tracer_get_aval(PyObject *self, void *Py_UNUSED(c))
{
    PyObject *r = PyStructSequence_New(ShapedArray_Type);
    if (!r) return NULL;
    PyObject *sh = ext_shape_tuple(&TR(self)->aval);
    PyObject *dt = ext_dtype_to_numpy(TR(self)->aval.dtype);
    if (!sh || !dt) {
        Py_XDECREF(sh);
        Py_XDECREF(dt);
        Py_DECREF(r);
        return NULL;
    }
    PyStructSequence_SET_ITEM(r, 0, sh);
    PyStructSequence_SET_ITEM(r, 1, dt);
    PyStructSequence_SET_ITEM(r, 2, PyBool_FromLong(TR(self)->aval.weak));
    return r;
}

static PyGetSetDef Tracer_getset[] = {
    {"shape", Tracer_get_shape, NULL, "tuple of dimensions", NULL},
    {"dtype", Tracer_get_dtype, NULL, "numpy dtype", NULL},
    {"ndim", Tracer_get_ndim, NULL, "rank", NULL},
    {"size", Tracer_get_size, NULL, "number of elements", NULL},
    {"weak_type", Tracer_get_weak, NULL, "True if the value came from a Python scalar", NULL},
    {"aval", Tracer_get_aval, NULL, "ShapedArray(shape, dtype, weak_type)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static int Tracer_bool(PyObject *self) { return concretization_error(self, "bool"), -1; }
static PyObject *Tracer_float(PyObject *self) { return concretization_error(self, "float"); }
static PyObject *Tracer_int(PyObject *self) { return concretization_error(self, "int"); }
static PyObject *Tracer_index(PyObject *self) { return concretization_error(self, "index"); }
static PyObject *Tracer_complex(PyObject *self, PyObject *Py_UNUSED(a))
{
    return concretization_error(self, "complex");
}
static PyObject *Tracer_array(PyObject *self, PyObject *Py_UNUSED(a), PyObject *Py_UNUSED(k))
{
    return concretization_error(self, "numpy.asarray");
}

static Py_ssize_t Tracer_len(PyObject *self)
{
    if (TR(self)->aval.rank == 0) {
        PyErr_SetString(PyExc_TypeError, "len() of unsized object");
        return -1;
    }
    return (Py_ssize_t)TR(self)->aval.dims[0];
}

static PyMethodDef Tracer_methods[] = {
    {"__array__", (PyCFunction)(void (*)(void))Tracer_array, METH_VARARGS | METH_KEYWORDS,
     "raises ConcretizationTypeError: a traced value has no concrete data"},
    {"__complex__", Tracer_complex, METH_NOARGS, "raises ConcretizationTypeError"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Tracer_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(TracerObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* ---------------------------------------------------------------- avals of values */

static bool is_python_scalar(PyObject *o)
{
    return (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o)) &&
           !PyArray_IsScalar(o, Generic);
}

/* Values the operators accept (others give NotImplemented). */
static bool is_operand(PyObject *o)
{
    return ext_array_get(o) || ext_is_tracer(o) || is_python_scalar(o) || PyArray_Check(o) ||
           PyArray_IsScalar(o, Generic);
}

static int descr_dtype(PyArray_Descr *d, oly_dtype *out)
{
    int r = ext_dtype_from_py((PyObject *)d, out);
    if (r == 0) *out = oly_dtype_canonicalize(*out);
    return r;
}

int ext_aval_of(PyObject *o, oly_aval *out)
{
    oly_array *a = ext_array_get(o);
    if (a) {
        *out = *oly_array_aval(a);
        return 0;
    }
    if (ext_is_tracer(o)) {
        *out = TR(o)->aval;
        return 0;
    }
    memset(out, 0, sizeof *out);
    if (PyArray_IsScalar(o, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(o);
        if (!d) return -1;
        int r = descr_dtype(d, &out->dtype);
        Py_DECREF(d);
        return r;
    }
    if (PyBool_Check(o)) {
        out->dtype = OLY_BOOL;
        return 0;
    }
    if (PyLong_Check(o)) {
        out->dtype = oly_default_int();
        out->weak = true;
        return 0;
    }
    if (PyFloat_Check(o)) {
        out->dtype = oly_default_float();
        out->weak = true;
        return 0;
    }
    if (PyComplex_Check(o)) {
        out->dtype = oly_x64_enabled() ? OLY_COMPLEX128 : OLY_COMPLEX64;
        out->weak = true;
        return 0;
    }
    PyObject *np = PyArray_FromAny(o, NULL, 0, 0, 0, NULL);
    if (!np) return -1;
    PyArrayObject *na = (PyArrayObject *)np;
    int r = -1;
    if (PyArray_NDIM(na) > OLY_MAX_RANK) {
        PyErr_Format(PyExc_ValueError, "olympus arrays have rank at most %d, got rank %d",
                     OLY_MAX_RANK, PyArray_NDIM(na));
    } else if (descr_dtype(PyArray_DESCR(na), &out->dtype) == 0) {
        out->rank = PyArray_NDIM(na);
        for (int i = 0; i < out->rank; i++) out->dims[i] = (int64_t)PyArray_DIM(na, i);
        r = 0;
    }
    Py_DECREF(np);
    return r;
}

/* ---------------------------------------------------------------- staging */

static int grow(void **arr, Py_ssize_t *cap, Py_ssize_t need, size_t size)
{
    if (need <= *cap) return 0;
    Py_ssize_t nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *p = PyMem_Realloc(*arr, (size_t)nc * size);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = p;
    *cap = nc;
    return 0;
}

static oly_atom literal_of(oly_array *a)
{
    oly_scalar s = oly_scalar_load(oly_array_aval(a)->dtype, oly_array_data(a));
    s.weak = oly_array_aval(a)->weak;
    return oly_atom_lit(s);
}

/* A constant (deduplicated by array identity) of trace t. */
static int const_var(ext_trace *t, oly_array *a, oly_var **out)
{
    for (Py_ssize_t i = 0; i < t->n_const; i++)
        if (t->const_arr[i] == a) {
            *out = t->const_var[i];
            return 0;
        }
    Py_ssize_t cap = t->const_cap;
    if (grow((void **)&t->const_arr, &cap, t->n_const + 1, sizeof *t->const_arr) < 0) return -1;
    cap = t->const_cap;
    if (grow((void **)&t->const_var, &cap, t->n_const + 1, sizeof *t->const_var) < 0) return -1;
    t->const_cap = cap;
    oly_var *v;
    oly_status s = oly_builder_add_const(t->b, a, &v); /* the builder retains a */
    if (s != OLY_OK) return ext_raise(s), -1;
    t->const_arr[t->n_const] = a;
    t->const_var[t->n_const++] = v;
    *out = v;
    return 0;
}

/* The input var of t standing for the outer Tracer o (lifted once). */
static int capture(ext_trace *t, PyObject *o, oly_var **out)
{
    Py_ssize_t n = PyList_GET_SIZE(t->captured);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(t->captured, i) == o) {
            *out = t->cap_var[i];
            return 0;
        }
    if (grow((void **)&t->cap_var, &t->cap_cap, n + 1, sizeof *t->cap_var) < 0) return -1;
    oly_var *v;
    oly_status s = oly_builder_add_input(t->b, &TR(o)->aval, &v);
    if (s != OLY_OK) return ext_raise(s), -1;
    if (PyList_Append(t->captured, o) < 0) return -1;
    t->cap_var[n] = v;
    *out = v;
    return 0;
}

/* The atom standing for Python value o in trace t (which is on this thread's stack). */
static int atom_for(ext_trace *t, PyObject *o, oly_atom *out)
{
    if (ext_is_tracer(o)) {
        ext_trace *ot = TR(o)->trace;
        if (ot == t) {
            *out = oly_atom_var(TR(o)->var);
            return 0;
        }
        if (!ot->active || ot->level > t->level || !on_this_stack(ot))
            return leaked_error(o), -1;
        oly_var *v;
        if (capture(t, o, &v) < 0) return -1;
        *out = oly_atom_var(v);
        return 0;
    }
    oly_array *a = ext_array_get(o);
    if (a) {
        oly_array_retain(a);
    } else if (ext_to_array(o, -1, &a) < 0) {
        return -1;
    }
    int r = 0;
    if (oly_array_aval(a)->rank == 0) {
        *out = literal_of(a);
    } else {
        oly_var *v;
        r = const_var(t, a, &v);
        if (r == 0) *out = oly_atom_var(v);
    }
    oly_array_release(a);
    return r;
}

int ext_trace_finish(ext_trace *t, PyObject *const *outs, Py_ssize_t n_out,
                     oly_program **program, PyObject **captured)
{
    if (!t || !t->active || t != top) {
        if (t && t->active) trace_close(t);
        PyErr_SetString(PyExc_RuntimeError,
                        "ext_trace_finish: the trace is not the innermost open trace");
        return -1;
    }
    int r = -1;
    oly_atom *atoms = PyMem_Calloc((size_t)n_out + 1, sizeof *atoms);
    if (!atoms) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        if (!ext_is_tracer(outs[i]) && !ext_array_get(outs[i]) && !is_operand(outs[i])) {
            PyErr_Format(PyExc_TypeError,
                         "a traced function returned a value of type %s at output %zd, which "
                         "is not a valid olympus type (expected arrays, scalars or containers "
                         "of them)",
                         Py_TYPE(outs[i])->tp_name, i);
            goto done;
        }
        if (atom_for(t, outs[i], &atoms[i]) < 0) goto done;
    }
    oly_program *p = NULL;
    oly_status s = oly_builder_finish(t->b, atoms, (int)n_out, &p);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    *program = p;
    *captured = t->captured;
    t->captured = NULL;
    r = 0;
done:
    PyMem_Free(atoms);
    trace_close(t);
    return r;
}

/* ---------------------------------------------------------------- bind */

static PyObject *wrap_outputs(oly_array **outs, int n)
{
    PyObject *t = PyTuple_New(n);
    if (!t) {
        for (int i = 0; i < n; i++) oly_array_release(outs[i]);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *o = ext_array_wrap(outs[i]);
        outs[i] = NULL;
        if (!o) {
            for (int j = i + 1; j < n; j++) oly_array_release(outs[j]);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

static int n_outputs(const oly_prim *p, const void *params, int n_in,
                     oly_program *const *subs, int n_sub)
{
    int k = oly_prim_num_outputs(p, params, n_in);
    if (n_sub > 0 && subs && subs[0] && k < oly_program_num_outputs(subs[0]))
        k = oly_program_num_outputs(subs[0]);
    return k;
}

/* Eager applications reading more than this many bytes release the GIL. */
#define EAGER_GIL_RELEASE_BYTES ((size_t)1 << 20)

static PyObject *bind_eager(const oly_prim *p, const void *params, PyObject *const *args,
                            Py_ssize_t n, oly_program *const *subs, int n_sub)
{
    PyObject *res = NULL;
    oly_array *small_in[8], *small_out[8];
    oly_array **in = n <= 8 ? small_in : PyMem_Calloc((size_t)n, sizeof *in);
    int k = n_outputs(p, params, (int)n, subs, n_sub);
    int max_out = k > 0 ? k : 0;
    oly_array **out = max_out <= 8 ? small_out : PyMem_Calloc((size_t)max_out, sizeof *out);
    Py_ssize_t got = 0;
    oly_builder *b = NULL;
    oly_program *prog = NULL;
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++)
        if (ext_to_array(args[got], -1, &in[got]) < 0) goto done;
    oly_status s;
    int n_out = 0;
    if (n_sub == 0) {
        size_t bytes = 0;
        for (Py_ssize_t i = 0; i < n; i++) bytes += oly_aval_nbytes(oly_array_aval(in[i]));
        if (bytes > EAGER_GIL_RELEASE_BYTES) { /* large kernels let other threads run */
            Py_BEGIN_ALLOW_THREADS
            s = oly_apply(p, params, in, (int)n, out, max_out, &n_out);
            Py_END_ALLOW_THREADS
        } else {
            s = oly_apply(p, params, in, (int)n, out, max_out, &n_out);
        }
        if (s != OLY_OK) {
            ext_raise(s);
            goto done;
        }
    } else {
        /* A primitive holding programs: a one-equation program, run once. */
        oly_aval *av = PyMem_Calloc((size_t)n + 1, sizeof *av);
        if (!av) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) av[i] = *oly_array_aval(in[i]);
        s = oly_program_of_eqn(p, params, av, (int)n, subs, n_sub, &prog);
        PyMem_Free(av);
        if (s == OLY_OK) {
            n_out = oly_program_num_outputs(prog);
            if (n_out > max_out) n_out = max_out;
            s = oly_program_run(prog, 0, in, (int)n, out, n_out);
        }
        if (s != OLY_OK) {
            ext_raise(s);
            goto done;
        }
    }
    if (n_out > max_out) n_out = max_out; /* only max_out were written */
    res = wrap_outputs(out, n_out);
done:
    for (Py_ssize_t i = 0; i < got; i++) oly_array_release(in[i]);
    if (in != small_in) PyMem_Free(in);
    if (out != small_out) PyMem_Free(out);
    oly_builder_free(b);
    oly_program_release(prog);
    return res;
}

static PyObject *bind_staged(ext_trace *t, const oly_prim *p, const void *params,
                             PyObject *const *args, Py_ssize_t n, oly_program *const *subs,
                             int n_sub)
{
    PyObject *res = NULL;
    oly_atom small_in[8];
    oly_var *small_out[8];
    oly_atom *in = n <= 8 ? small_in : PyMem_Calloc((size_t)n, sizeof *in);
    int k = n_outputs(p, params, (int)n, subs, n_sub);
    int max_out = k > 0 ? k : 0;
    oly_var **out = max_out <= 8 ? small_out : PyMem_Calloc((size_t)max_out, sizeof *out);
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (atom_for(t, args[i], &in[i]) < 0) goto done;
    int n_out = 0;
    oly_status s = oly_builder_append(t->b, p, in, (int)n, params, subs, n_sub, out, max_out,
                                      &n_out);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    if (n_out > max_out) {
        PyErr_Format(PyExc_SystemError, "%s: %d outputs, expected at most %d", oly_prim_name(p),
                     n_out, max_out);
        goto done;
    }
    res = PyTuple_New(n_out);
    if (!res) goto done;
    for (int i = 0; i < n_out; i++) {
        PyObject *o = tracer_new(t, out[i]);
        if (!o) {
            Py_CLEAR(res);
            goto done;
        }
        PyTuple_SET_ITEM(res, i, o);
    }
done:
    if (in != small_in) PyMem_Free(in);
    if (out != small_out) PyMem_Free(out);
    return res;
}

PyObject *ext_bind(const oly_prim *p, const void *params, PyObject *const *args, Py_ssize_t n,
                   oly_program *const *subs, int n_sub)
{
    if (!p) {
        PyErr_SetString(PyExc_SystemError, "ext_bind: primitive is NULL");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (ext_is_tracer(args[i])) {
            ext_trace *ot = TR(args[i])->trace;
            if (!ot->active || !on_this_stack(ot)) return leaked_error(args[i]);
        }
    if (top) return bind_staged(top, p, params, args, n, subs, n_sub);
    return bind_eager(p, params, args, n, subs, n_sub);
}

/* ---------------------------------------------------------------- inlining programs */

/* A Python value for an output atom of the inlined program: a Tracer of t, or
 * a rank-0 Array for a literal. */
static PyObject *value_of_atom(ext_trace *t, oly_atom a)
{
    if (a.kind == OLY_ATOM_VAR) return tracer_new(t, a.var);
    oly_aval av;
    memset(&av, 0, sizeof av);
    av.dtype = a.lit.dtype;
    av.weak = a.lit.weak;
    unsigned char buf[16];
    memset(buf, 0, sizeof buf);
    oly_scalar_store(&a.lit, av.dtype, buf);
    oly_array *arr = NULL;
    oly_status s = oly_array_from_data(&av, buf, &arr);
    if (s != OLY_OK) return ext_raise(s);
    return ext_array_wrap(arr);
}

PyObject *ext_trace_inline(oly_program *prog, PyObject *const *args, Py_ssize_t n)
{
    ext_trace *t = top;
    if (!t) {
        PyErr_SetString(PyExc_SystemError, "ext_trace_inline: no open trace");
        return NULL;
    }
    if (n != oly_program_num_inputs(prog)) {
        PyErr_Format(PyExc_TypeError, "inline: the program takes %d inputs, got %zd",
                     oly_program_num_inputs(prog), n);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (ext_is_tracer(args[i])) {
            ext_trace *ot = TR(args[i])->trace;
            if (!ot->active || !on_this_stack(ot)) return leaked_error(args[i]);
        }
    int n_out = oly_program_num_outputs(prog);
    oly_atom *in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    oly_atom *out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    PyObject *res = NULL;
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (atom_for(t, args[i], &in[i]) < 0) goto done;
    oly_status s = oly_builder_inline(t->b, prog, in, out);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    res = PyTuple_New(n_out);
    for (int j = 0; res && j < n_out; j++) {
        PyObject *o = value_of_atom(t, out[j]);
        if (!o) {
            Py_CLEAR(res);
            break;
        }
        PyTuple_SET_ITEM(res, j, o);
    }
done:
    PyMem_Free(in);
    PyMem_Free(out);
    return res;
}

/* ---------------------------------------------------------------- params */

static int parse_int(PyObject *v, int64_t *out)
{
    PyObject *i = PyNumber_Index(v);
    if (!i) return -1;
    long long x = PyLong_AsLongLong(i);
    Py_DECREF(i);
    if (x == -1 && PyErr_Occurred()) return -1;
    *out = x;
    return 0;
}

static int parse_field(const oly_prim *p, const oly_param_field *f, PyObject *v, char *base)
{
    const char *pn = oly_prim_name(p);
    void *dst = base + f->offset;
    switch (f->kind) {
    case OLY_FIELD_INT: {
        int64_t x;
        if (PyFloat_Check(v) || parse_int(v, &x) < 0) goto bad;
        memcpy(dst, &x, sizeof x);
        return 0;
    }
    case OLY_FIELD_BOOL: {
        int b = PyObject_IsTrue(v);
        if (b < 0) return -1;
        bool x = b != 0;
        memcpy(dst, &x, sizeof x);
        return 0;
    }
    case OLY_FIELD_FLOAT: {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) goto bad;
        memcpy(dst, &x, sizeof x);
        return 0;
    }
    case OLY_FIELD_DTYPE: {
        oly_dtype t;
        if (ext_dtype_from_py(v, &t) < 0) goto bad;
        t = oly_dtype_canonicalize(t);
        memcpy(dst, &t, sizeof t);
        return 0;
    }
    case OLY_FIELD_INTS: {
        oly_ints x;
        memset(&x, 0, sizeof x);
        if (PyLong_Check(v) || PyArray_IsScalar(v, Integer)) {
            x.n = 1;
            if (parse_int(v, &x.v[0]) < 0) goto bad;
        } else {
            PyObject *seq = PySequence_Fast(v, "");
            if (!seq) goto bad;
            Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
            if (n > OLY_MAX_RANK) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "%s: parameter '%s' has %zd entries; at most %d",
                             pn, f->name, n, OLY_MAX_RANK);
                return -1;
            }
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
                if (PyFloat_Check(e) || parse_int(e, &x.v[i]) < 0) {
                    Py_DECREF(seq);
                    goto bad;
                }
            }
            x.n = (int)n;
            Py_DECREF(seq);
        }
        memcpy(dst, &x, sizeof x);
        return 0;
    }
    case OLY_FIELD_ENUM: {
        int idx = -1, count = 0;
        while (f->enum_names && f->enum_names[count]) count++;
        if (PyUnicode_Check(v)) {
            const char *s = PyUnicode_AsUTF8(v);
            if (!s) return -1;
            for (int i = 0; i < count; i++)
                if (strcmp(s, f->enum_names[i]) == 0) idx = i;
        } else {
            int64_t x;
            if (PyFloat_Check(v) || parse_int(v, &x) < 0) goto bad;
            if (x >= 0 && x < count) idx = (int)x;
        }
        if (idx < 0) {
            PyObject *names = PyList_New(0);
            for (int i = 0; names && i < count; i++) {
                PyObject *s = PyUnicode_FromString(f->enum_names[i]);
                if (!s || PyList_Append(names, s) < 0) Py_CLEAR(names);
                Py_XDECREF(s);
            }
            if (names)
                PyErr_Format(PyExc_ValueError, "%s: parameter '%s' must be one of %R, got %R",
                             pn, f->name, names, v);
            Py_XDECREF(names);
            return -1;
        }
        memcpy(dst, &idx, sizeof idx);
        return 0;
    }
    case OLY_FIELD_STR: {
        if (!PyUnicode_Check(v)) goto bad;
        const char *s = PyUnicode_AsUTF8(v); /* lives as long as the dict holds v */
        if (!s) return -1;
        memcpy(dst, &s, sizeof s);
        return 0;
    }
    default:
        PyErr_Format(PyExc_TypeError,
                     "%s: parameter '%s' cannot be given from Python (it is set by the "
                     "function that binds %s)",
                     pn, f->name, pn);
        return -1;
    }
bad: {
    static const char *const kinds[] = {"an int", "a bool", "a float", "a dtype",
                                        "an int or a sequence of ints", "a name or an int",
                                        "a str"};
    const char *want = (unsigned)f->kind < sizeof kinds / sizeof kinds[0] ? kinds[f->kind] : "?";
    bool range = PyErr_ExceptionMatches(PyExc_OverflowError);
    PyErr_Clear();
    if (range) {
        PyErr_Format(PyExc_OverflowError,
                     "%s: parameter '%s' got %R, a value out of range for a 64-bit integer", pn,
                     f->name, v);
        return -1;
    }
    PyErr_Format(PyExc_TypeError, "%s: parameter '%s' expects %s, got %R of type %s", pn,
                 f->name, want, v, Py_TYPE(v)->tp_name);
    return -1;
}
}

int ext_params_from_dict(const oly_prim *p, PyObject *dict, void *params)
{
    int nf = 0;
    size_t size = 0;
    const oly_param_field *fields = oly_prim_fields(p, &nf, &size);
    if (!dict || dict == Py_None) return 0;
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_TypeError, "%s: params must be a dict, got %s", oly_prim_name(p),
                     Py_TYPE(dict)->tp_name);
        return -1;
    }
    PyObject *unknown = NULL;
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        const char *name = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (PyUnicode_Check(k) && !name) {
            Py_XDECREF(unknown);
            return -1;
        }
        const oly_param_field *f = NULL;
        for (int i = 0; name && i < nf; i++)
            if (strcmp(fields[i].name, name) == 0) f = &fields[i];
        if (!f) {
            if (!unknown && !(unknown = PyList_New(0))) return -1;
            if (PyList_Append(unknown, k) < 0) {
                Py_DECREF(unknown);
                return -1;
            }
            continue;
        }
        if (!params) {
            PyErr_Format(PyExc_SystemError, "%s: no params struct", oly_prim_name(p));
            Py_XDECREF(unknown);
            return -1;
        }
        if (parse_field(p, f, v, params) < 0) {
            Py_XDECREF(unknown);
            return -1;
        }
    }
    if (unknown) {
        PyObject *known = PyList_New(0);
        for (int i = 0; known && i < nf; i++) {
            if (fields[i].hidden) continue;
            PyObject *s = PyUnicode_FromString(fields[i].name);
            if (!s || PyList_Append(known, s) < 0) Py_CLEAR(known);
            Py_XDECREF(s);
        }
        if (known)
            PyErr_Format(PyExc_TypeError, "%s got unknown parameter(s) %R (its parameters: %R)",
                         oly_prim_name(p), unknown, known);
        Py_XDECREF(known);
        Py_DECREF(unknown);
        return -1;
    }
    return 0;
}

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
    if (av->weak && is_python_scalar(o)) {
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
    if (!is_operand(x) || !is_operand(y)) {
        if (!strict) Py_RETURN_NOTIMPLEMENTED;
        PyObject *bad = is_operand(x) ? y : x;
        PyErr_Format(PyExc_TypeError, "%s: unsupported operand type %s (expected an array, a "
                     "tracer or a scalar)", ops[op].name, Py_TYPE(bad)->tp_name);
        return NULL;
    }
    oly_aval ax, ay;
    if (ext_aval_of(x, &ax) < 0 || ext_aval_of(y, &ay) < 0) return NULL;

    /* x ** <Python int>: integer_pow */
    if (op == OP_POW && PyLong_Check(y) && !PyBool_Check(y) && !is_python_scalar(x)) {
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

/* ---------------------------------------------------------------- module functions */

static PyObject *py_bind(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "args", "params", NULL};
    const char *name;
    PyObject *vals, *params = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|O:bind", kwlist, &name, &vals, &params))
        return NULL;
    const oly_prim *p = oly_prim_lookup(name);
    if (!p) {
        PyErr_Format(PyExc_ValueError, "bind: unknown primitive '%s'", name);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(vals, "bind: args must be a tuple or list");
    if (!seq) return NULL;
    int nf = 0;
    size_t psize = 0;
    oly_prim_fields(p, &nf, &psize);
    void *pbuf = NULL;
    PyObject *res = NULL;
    if (psize > 0) {
        pbuf = PyMem_Calloc(1, psize);
        if (!pbuf) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (ext_params_from_dict(p, params, pbuf) < 0) goto done;
    res = ext_bind(p, pbuf, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq), NULL, 0);
    if (res && PyTuple_GET_SIZE(res) == 1) {
        PyObject *r = Py_NewRef(PyTuple_GET_ITEM(res, 0));
        Py_SETREF(res, r);
    }
done:
    PyMem_Free(pbuf);
    Py_DECREF(seq);
    return res;
}

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

static PyObject *py_binop(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n != 3 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "binop(name: str, x, y) takes exactly 3 arguments");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (!name) return NULL;
    int op = -1;
    for (int i = 0; i < OP_COUNT && op < 0; i++)
        if (strcmp(ops[i].name, name) == 0) op = i;
    for (size_t i = 0; op < 0 && i < sizeof op_aliases / sizeof op_aliases[0]; i++)
        if (strcmp(op_aliases[i].alias, name) == 0) op = op_aliases[i].op;
    if (op < 0) {
        PyErr_Format(PyExc_ValueError, "binop: unknown operation '%s'", name);
        return NULL;
    }
    return binop_impl(op, args[1], args[2], true);
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
        ax = TR(x)->aval;
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

PyMethodDef ext_tracer_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))py_bind, METH_VARARGS | METH_KEYWORDS,
     "bind(name, args, params=None): apply a primitive eagerly or into the innermost trace; "
     "the single result, or a tuple when the primitive has another number of outputs"},
    {"broadcast_shapes", (PyCFunction)(void (*)(void))py_broadcast_shapes, METH_FASTCALL,
     "broadcast_shapes(*shapes) -> the NumPy broadcast shape (ValueError if they do not fit)"},
    {"result_type", (PyCFunction)(void (*)(void))py_result_type, METH_FASTCALL,
     "result_type(*xs) -> (numpy dtype, weak_type): promotion with weak types"},
    {"binop", (PyCFunction)(void (*)(void))py_binop, METH_FASTCALL,
     "binop(name, x, y): the NumPy-style binary operation (promotion, broadcasting)"},
    {"unop", (PyCFunction)(void (*)(void))py_unop, METH_FASTCALL,
     "unop(name, x, to_float): the unary primitive on an Array or Tracer (ints and bools in the "
     "default float when to_float); NotImplemented for other values"},
    {NULL, NULL, 0, NULL},
};

static PyStructSequence_Field shaped_fields[] = {
    {"shape", "tuple of dimensions"},
    {"dtype", "numpy dtype"},
    {"weak_type", "True for values from Python scalars"},
    {NULL, NULL},
};

static PyStructSequence_Desc shaped_desc = {
    "olympus._core.ShapedArray", "The abstract value of a Tracer.", shaped_fields, 3,
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

int ext_tracer_init(PyObject *module)
{
    PyType_Slot own[] = {
        {Py_tp_dealloc, FN_SLOT(Tracer_dealloc)},
        {Py_tp_repr, FN_SLOT(Tracer_repr)},
        {Py_tp_hash, FN_SLOT(PyObject_HashNotImplemented)},
        {Py_tp_getset, Tracer_getset},
        {Py_tp_methods, Tracer_methods},
        {Py_tp_members, Tracer_members},
        {Py_tp_doc, (void *)"A value being traced into a program (abstract: shape and dtype)."},
        {Py_nb_bool, FN_SLOT(Tracer_bool)},
        {Py_nb_float, FN_SLOT(Tracer_float)},
        {Py_nb_int, FN_SLOT(Tracer_int)},
        {Py_nb_index, FN_SLOT(Tracer_index)},
        {Py_mp_length, FN_SLOT(Tracer_len)},
    };
    PyObject *tp = ext_operand_type_new("olympus._core.Tracer", (int)sizeof(TracerObject), own,
                                        (int)(sizeof own / sizeof own[0]));
    if (!tp) return -1;
    ext_st->Tracer_Type = (PyTypeObject *)tp;
    if (PyModule_AddObjectRef(module, "Tracer", tp) < 0) return -1;

    UnexpectedTracerError = PyErr_NewExceptionWithDoc(
        "olympus._core.UnexpectedTracerError",
        "A traced value was used outside the trace that made it (it leaked).", PyExc_Exception,
        NULL);
    if (!UnexpectedTracerError) return -1;
    if (PyModule_AddObjectRef(module, "UnexpectedTracerError", UnexpectedTracerError) < 0)
        return -1;
    ShapedArray_Type = PyStructSequence_NewType(&shaped_desc);
    if (!ShapedArray_Type) return -1;
    if (PyModule_AddObjectRef(module, "ShapedArray", (PyObject *)ShapedArray_Type) < 0) return -1;
    return 0;
}
