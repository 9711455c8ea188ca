/* tracer.c — the thread-local trace stack, the Tracer type, bind (eager or
 * staged) and inlining programs into a trace. Promotion and the operators are
 * in operators.c, params parsing in params.c.
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
 *
 * Concrete traces (autodiff outside jit, docs/design.md "Concrete autodiff")
 * stage like the others, and their Tracers also have sources (concrete.c):
 * values, or lazy operations computing them when asked for, so Python control
 * flow on them works. Only the function being differentiated (the primal) is
 * traced this way; tangents are built later by the C transforms and never
 * have values.
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
    ext_trace_kind kind;
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
/* > 0 inside olympus.ensure_compile_time_eval(): an operation none of whose
 * arguments is traced runs now instead of being staged. */
static _Thread_local int compile_time_eval;

typedef struct TracerObject {
    PyObject_HEAD
    ext_trace *trace;       /* owned reference */
    oly_var *var;           /* borrowed from trace->b: read only while trace->active */
    oly_aval aval;
    ext_source src;         /* owned: where its value comes from (concrete traces only) */
    PyObject *weakreflist;
} TracerObject;

static PyObject *UnexpectedTracerError; /* owned */
/* Owned; subclasses of ConcretizationTypeError naming the conversion tried. */
static PyObject *TracerBoolConversionError, *TracerIntegerConversionError,
    *TracerArrayConversionError;

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

ext_trace *ext_trace_push(ext_trace_kind kind)
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
    t->kind = kind;
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

bool ext_concrete_ok(void)
{
    for (const ext_trace *c = top; c; c = c->parent)
        if (c->kind == EXT_TRACE_STAGED) return false;
    return true;
}

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
    memset(&o->src, 0, sizeof o->src);
    o->weakreflist = NULL;
    return (PyObject *)o;
}

PyObject *ext_trace_new_input(ext_trace *t, const oly_aval *aval, PyObject *value)
{
    if (!t || !t->active) {
        PyErr_SetString(PyExc_RuntimeError, "ext_trace_new_input: the trace is closed");
        return NULL;
    }
    oly_array *a = value ? ext_array_get(value) : NULL;
    bool tracer = value && ext_is_tracer(value);
    if (value && value != Py_None && !a && !tracer) {
        PyErr_Format(PyExc_TypeError, "trace: an input's value must be an Array, a Tracer or "
                     "None, got %s", Py_TYPE(value)->tp_name);
        return NULL;
    }
    const oly_aval *got = a ? oly_array_aval(a) : tracer ? &TR(value)->aval : NULL;
    if (got && !oly_aval_equal(got, aval)) {
        char g[128], w[128];
        oly_aval_format(g, sizeof g, got);
        oly_aval_format(w, sizeof w, aval);
        PyErr_Format(PyExc_TypeError, "trace: an input's value is %s, the input is %s", g, w);
        return NULL;
    }
    oly_var *v;
    oly_status s = oly_builder_add_input(t->b, aval, &v);
    if (s != OLY_OK) return ext_raise(s);
    PyObject *o = tracer_new(t, v);
    if (!o || t->kind != EXT_TRACE_CONCRETE) return o;
    if (a) TR(o)->src.value = oly_array_retain(a);
    if (tracer) ext_source_copy(&TR(o)->src, &TR(value)->src);
    return o;
}

const oly_aval *ext_tracer_aval(PyObject *o) { return &TR(o)->aval; }

int ext_is_tracer(PyObject *o)
{
    return ext_st && ext_st->Tracer_Type && Py_IS_TYPE(o, ext_st->Tracer_Type);
}

static PyObject *Tracer_repr(PyObject *self)
{
    PyObject *aval = ext_aval_repr(&TR(self)->aval);
    if (!aval) return NULL;
    PyObject *r = PyUnicode_FromFormat("Traced<%U>with<DynamicJaxprTrace>", aval);
    Py_DECREF(aval);
    return r;
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

/* fn names the conversion; bool, int/index and numpy.asarray raise their
 * own subclasses, as JAX names them. */
static PyObject *concretization_error(PyObject *self, const char *fn)
{
    char shape[512];
    ext_format_shaped(shape, sizeof shape, &TR(self)->aval);
    PyObject *type = !strcmp(fn, "bool")                            ? TracerBoolConversionError
                     : !strcmp(fn, "int") || !strcmp(fn, "index")   ? TracerIntegerConversionError
                     : !strcmp(fn, "numpy.asarray")                 ? TracerArrayConversionError
                                                                    : ext_st->ConcretizationTypeError;
    PyErr_Format(type,
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
    ext_source_clear(&TR(self)->src);
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
    return ext_aval_new(&TR(self)->aval);
}

static PyGetSetDef Tracer_getset[] = {
    {"shape", Tracer_get_shape, NULL, "tuple of dimensions", NULL},
    {"dtype", Tracer_get_dtype, NULL, "numpy dtype", NULL},
    {"ndim", Tracer_get_ndim, NULL, "rank", NULL},
    {"size", Tracer_get_size, NULL, "number of elements", NULL},
    {"weak_type", Tracer_get_weak, NULL, "True if the value came from a Python scalar", NULL},
    {"aval", Tracer_get_aval, NULL, "the ShapedArray", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* The conversions read the value of a concrete trace's Tracer (as the
 * reference's do for concrete tracers); without one they raise. __array__
 * raises either way, as the reference's does. */

/* A new Array holding self's value (computed now if it is lazy), or NULL:
 * with an exception when computing it failed, without when it has none. */
static PyObject *value_object(PyObject *self)
{
    oly_array *a;
    if (ext_source_value(&TR(self)->src, &a) <= 0) return NULL;
    return ext_array_wrap(oly_array_retain(a));
}

static PyObject *convert(PyObject *self, PyObject *(*conv)(PyObject *), const char *fn)
{
    PyObject *v = value_object(self);
    if (!v) return PyErr_Occurred() ? NULL : concretization_error(self, fn);
    PyObject *r = conv(v);
    Py_DECREF(v);
    return r;
}

static int Tracer_bool(PyObject *self)
{
    PyObject *v = value_object(self);
    if (!v) return PyErr_Occurred() ? -1 : (concretization_error(self, "bool"), -1);
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}
static PyObject *Tracer_float(PyObject *self) { return convert(self, PyNumber_Float, "float"); }
static PyObject *Tracer_int(PyObject *self) { return convert(self, PyNumber_Long, "int"); }
static PyObject *Tracer_index(PyObject *self) { return convert(self, PyNumber_Index, "index"); }
static PyObject *to_complex(PyObject *v)
{
    return PyObject_CallOneArg((PyObject *)&PyComplex_Type, v);
}
static PyObject *Tracer_complex(PyObject *self, PyObject *Py_UNUSED(a))
{
    return convert(self, to_complex, "complex");
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

bool ext_is_python_scalar(PyObject *o)
{
    return (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o)) &&
           !PyArray_IsScalar(o, Generic);
}

bool ext_is_operand(PyObject *o)
{
    return ext_array_get(o) || ext_is_tracer(o) || ext_is_python_scalar(o) || PyArray_Check(o) ||
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
        if (!ext_is_tracer(outs[i]) && !ext_array_get(outs[i]) && !ext_is_operand(outs[i])) {
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

/* In a concrete trace, after staging an equation whose outputs are the
 * Tracers of res: when every input has a source and the equation has no
 * effects (those run once, when the program runs), the outputs get a lazy
 * node computing them (concrete.c). 0, or -1 with an exception. */
static int stage_lazy(const oly_prim *p, const void *params, PyObject *const *args, Py_ssize_t n,
                      oly_program *const *subs, int n_sub, PyObject *res)
{
    if (oly_prim_effects(p, params, subs, n_sub)) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (ext_is_tracer(args[i]) && !ext_source_known(&TR(args[i])->src)) return 0;
    int n_res = (int)PyTuple_GET_SIZE(res), r = -1;
    oly_aval *av = PyMem_Calloc((size_t)n + 1, sizeof *av);
    ext_source *in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    ext_source *out = PyMem_Calloc((size_t)n_res + 1, sizeof *out);
    if (!av || !in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ext_is_tracer(args[i])) {
            av[i] = TR(args[i])->aval;
            ext_source_copy(&in[i], &TR(args[i])->src);
        } else if (ext_to_array(args[i], -1, &in[i].value) < 0) {
            goto done;
        } else {
            av[i] = *oly_array_aval(in[i].value);
        }
    }
    if (ext_lazy_of_eqn(p, params, subs, n_sub, av, in, (int)n, out, n_res) < 0) goto done;
    for (int j = 0; j < n_res; j++) {
        TR(PyTuple_GET_ITEM(res, j))->src = out[j]; /* moved */
        memset(&out[j], 0, sizeof out[j]);
    }
    r = 0;
done:
    for (Py_ssize_t i = 0; in && i < n; i++) ext_source_clear(&in[i]);
    for (int j = 0; out && j < n_res; j++) ext_source_clear(&out[j]);
    PyMem_Free(av);
    PyMem_Free(in);
    PyMem_Free(out);
    return r;
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
    if (t->kind == EXT_TRACE_CONCRETE && stage_lazy(p, params, args, n, subs, n_sub, res) < 0)
        Py_CLEAR(res);
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
    if (top && compile_time_eval > 0) {
        bool traced = false;
        for (Py_ssize_t i = 0; i < n && !traced; i++) traced = ext_is_tracer(args[i]);
        if (!traced) return bind_eager(p, params, args, n, subs, n_sub);
    }
    if (top) return bind_staged(top, p, params, args, n, subs, n_sub);
    return bind_eager(p, params, args, n, subs, n_sub);
}

static PyObject *py_compile_time_eval(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    compile_time_eval += on ? 1 : -1;
    if (compile_time_eval < 0) compile_time_eval = 0;
    Py_RETURN_NONE;
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

/* In a concrete trace, after inlining prog on args with outputs res: when
 * every argument has a source and prog has no effects, the Tracers of res
 * get a lazy node running prog (literal outputs are Arrays already). 0, or
 * -1 with an exception. */
static int inline_lazy(oly_program *prog, PyObject *const *args, Py_ssize_t n, PyObject *res)
{
    if (oly_program_effects(prog)) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (ext_is_tracer(args[i]) && !ext_source_known(&TR(args[i])->src)) return 0;
    int n_out = oly_program_num_outputs(prog), r = -1;
    ext_source *in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    ext_source *out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (ext_is_tracer(args[i])) {
            ext_source_copy(&in[i], &TR(args[i])->src);
        } else {
            const oly_aval *want = oly_program_input_aval(prog, (int)i);
            if (ext_to_array(args[i], (int)want->dtype, &in[i].value) < 0) goto done;
        }
    }
    if (ext_lazy_of_program(prog, in, (int)n, out, n_out) < 0) goto done;
    for (int j = 0; j < n_out; j++) {
        PyObject *o = PyTuple_GET_ITEM(res, j);
        if (!ext_is_tracer(o)) continue;
        TR(o)->src = out[j]; /* moved */
        memset(&out[j], 0, sizeof out[j]);
    }
    r = 0;
done:
    for (Py_ssize_t i = 0; in && i < n; i++) ext_source_clear(&in[i]);
    for (int j = 0; out && j < n_out; j++) ext_source_clear(&out[j]);
    PyMem_Free(in);
    PyMem_Free(out);
    return r;
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
    if (res && t->kind == EXT_TRACE_CONCRETE && inline_lazy(prog, args, n, res) < 0)
        Py_CLEAR(res);
done:
    PyMem_Free(in);
    PyMem_Free(out);
    return res;
}

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

static PyObject *py_concrete_value(PyObject *Py_UNUSED(m), PyObject *o)
{
    PyObject *v = ext_is_tracer(o) ? value_object(o) : NULL;
    if (v || PyErr_Occurred()) return v;
    Py_RETURN_NONE;
}

PyMethodDef ext_tracer_methods[] = {
    {"concrete_value", py_concrete_value, METH_O,
     "concrete_value(x) -> Array | None: the value a Tracer of a concrete trace (autodiff "
     "outside jit) carries; None for any other value"},
    {"compile_time_eval", py_compile_time_eval, METH_O,
     "compile_time_eval(enter): enter (True) or leave (False) olympus.ensure_compile_time_eval"},
    {"bind", (PyCFunction)(void (*)(void))py_bind, METH_VARARGS | METH_KEYWORDS,
     "bind(name, args, params=None): apply a primitive eagerly or into the innermost trace; "
     "the single result, or a tuple when the primitive has another number of outputs"},
    {NULL, NULL, 0, NULL},
};

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
        "A traced value was used outside the trace that made it (it leaked).", PyExc_TypeError,
        NULL);
    if (!UnexpectedTracerError) return -1;
    if (PyModule_AddObjectRef(module, "UnexpectedTracerError", UnexpectedTracerError) < 0)
        return -1;
    static const struct {
        const char *name, *doc;
        PyObject **slot;
    } conv[] = {
        {"TracerBoolConversionError", "bool() of a traced value (Python control flow on it).",
         &TracerBoolConversionError},
        {"TracerIntegerConversionError", "int() or __index__() of a traced value.",
         &TracerIntegerConversionError},
        {"TracerArrayConversionError", "numpy.asarray() of a traced value.",
         &TracerArrayConversionError},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++) {
        char qual[96];
        snprintf(qual, sizeof qual, "olympus._core.%s", conv[i].name);
        *conv[i].slot =
            PyErr_NewExceptionWithDoc(qual, conv[i].doc, ext_st->ConcretizationTypeError, NULL);
        if (!*conv[i].slot || PyModule_AddObjectRef(module, conv[i].name, *conv[i].slot) < 0)
            return -1;
    }
    return 0;
}
