/* transform.c — programs as Python objects, and the transforms on them.
 *
 * The Python API of the transformations (olympus.vmap, grad, lax.cond, ...)
 * is written as: trace a Python function on abstract values into a Jaxpr
 * (with the outer values it captured), transform the Jaxpr in C, then call
 * the result on values — eagerly, or inline into the enclosing trace, so
 * nested transforms compose. Custom rules (custom_jvp / custom_vjp) are
 * thunks whose trace function calls back into Python (GIL taken) to trace
 * the user's rule lazily, when a transform first needs it.
 *
 * Functions (module level):
 *   trace(fun, avals, values=None, transparent=False) -> (Jaxpr, captured)
 *   vmap_program, jvp_program, linearize_program, transpose_program, dce_program
 *   call_program(prog, args) -> tuple
 *   program_with_inputs(prog, avals, mapping) -> Jaxpr
 *   bind_subs(name, args, params, subs) -> tuple
 *   custom_jvp_call(name, prog, jvp_rule, args) -> tuple
 *   custom_vjp_call(name, prog, fwd_rule, bwd_rule, args) -> tuple
 */
#include "ext.h"

#include <limits.h>

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

/* Eager runs moving more than this many bytes release the GIL (as jit.c). */
#define GIL_RELEASE_BYTES ((size_t)1 << 20)

/* ---------------------------------------------------------------- trace */

/* Trace fun(*tracers) (tracers of avals) whose result is a flat sequence of
 * leaves, in a trace of kind; values (NULL, or n borrowed values as
 * ext_trace_new_input takes them) are what the inputs of a concrete trace
 * stand for. *prog and *captured (a list) on success. */
static int trace_flat(PyObject *fun, const oly_aval *avals, PyObject *const *values,
                      Py_ssize_t n, ext_trace_kind kind, oly_program **prog,
                      PyObject **captured)
{
    ext_trace *t = ext_trace_push(kind);
    if (!t) return -1;
    PyObject *args = PyTuple_New(n), *out = NULL, *seq = NULL;
    if (!args) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *tr = ext_trace_new_input(t, &avals[i], values ? values[i] : NULL);
        if (!tr) goto fail;
        PyTuple_SET_ITEM(args, i, tr);
    }
    out = PyObject_Call(fun, args, NULL);
    if (!out) goto fail;
    if (!PyList_Check(out) && !PyTuple_Check(out)) {
        PyErr_Format(PyExc_TypeError, "a traced body must return a list or tuple of leaves, "
                     "got %s", Py_TYPE(out)->tp_name);
        goto fail;
    }
    seq = PySequence_Fast(out, "a traced body must return a sequence of leaves");
    if (!seq) goto fail;
    int r = ext_trace_finish(t, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq), prog,
                             captured);
    t = NULL;
    Py_DECREF(args);
    Py_DECREF(out);
    Py_DECREF(seq);
    return r;
fail:
    if (t) ext_trace_discard(t);
    Py_XDECREF(args);
    Py_XDECREF(out);
    Py_XDECREF(seq);
    return -1;
}

/* The avals of a sequence (as ext_aval_from_py), dtypes canonicalised by x64;
 * *out (PyMem) on success. */
static int parse_avals(PyObject *avals, oly_aval **out, Py_ssize_t *n)
{
    PyObject *seq = PySequence_Fast(avals, "avals must be a sequence");
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc((size_t)*n + 1, sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (ext_aval_from_py(PySequence_Fast_GET_ITEM(seq, i), &(*out)[i]) < 0) {
            PyMem_Free(*out);
            *out = NULL;
            Py_DECREF(seq);
            return -1;
        }
        (*out)[i].dtype = oly_dtype_canonicalize((*out)[i].dtype);
    }
    Py_DECREF(seq);
    return 0;
}

static PyObject *py_trace(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fun", "avals", "values", "transparent", NULL};
    PyObject *fun, *avals, *values = Py_None, *seq = NULL;
    int transparent = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Op:trace", kwlist, &fun, &avals, &values,
                                     &transparent))
        return NULL;
    oly_aval *av = NULL;
    Py_ssize_t n = 0;
    if (parse_avals(avals, &av, &n) < 0) return NULL;
    /* Values make a concrete trace unless a staged trace (jit) is open. */
    ext_trace_kind kind = transparent ? EXT_TRACE_TRANSPARENT : EXT_TRACE_STAGED;
    if (values != Py_None && ext_concrete_ok()) {
        seq = PySequence_Fast(values, "trace: values must be a sequence");
        if (seq && PySequence_Fast_GET_SIZE(seq) != n) {
            PyErr_Format(PyExc_ValueError, "trace: %zd values for %zd inputs",
                         PySequence_Fast_GET_SIZE(seq), n);
            Py_CLEAR(seq);
        }
        if (!seq) {
            PyMem_Free(av);
            return NULL;
        }
        kind = EXT_TRACE_CONCRETE;
    }
    oly_program *p = NULL;
    PyObject *captured = NULL;
    int r = trace_flat(fun, av, seq ? PySequence_Fast_ITEMS(seq) : NULL, n, kind, &p, &captured);
    PyMem_Free(av);
    Py_XDECREF(seq);
    if (r < 0) return NULL;
    PyObject *po = ext_program_wrap(p, NULL);
    if (!po) {
        Py_DECREF(captured);
        return NULL;
    }
    return Py_BuildValue("(NN)", po, captured);
}

/* ---------------------------------------------------------------- transforms */

/* One item of a parsed list: 0, or -1 with an exception. */
static int item_int(PyObject *o, void *dst)
{
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < INT_MIN || v > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "%ld does not fit in an int", v);
        return -1;
    }
    *(int *)dst = (int)v;
    return 0;
}

static int item_bool(PyObject *o, void *dst)
{
    int b = PyObject_IsTrue(o);
    if (b < 0) return -1;
    *(bool *)dst = b != 0;
    return 0;
}

/* A sequence of exactly n_want items, each converted by item into a new
 * PyMem array of elsize-byte entries at *out. 0, or -1 with an exception. */
static int parse_list(PyObject *o, int n_want, size_t elsize, int (*item)(PyObject *, void *),
                      void **out, const char *what)
{
    PyObject *seq = PySequence_Fast(o, "expected a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    char *buf = NULL;
    if (n != n_want) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d entries, got %zd", what, n_want, n);
        goto fail;
    }
    buf = PyMem_Calloc((size_t)n + 1, elsize);
    if (!buf) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (item(PySequence_Fast_GET_ITEM(seq, i), buf + (size_t)i * elsize) < 0) goto fail;
    Py_DECREF(seq);
    *out = buf;
    return 0;
fail:
    PyMem_Free(buf);
    Py_DECREF(seq);
    return -1;
}

static int parse_ints(PyObject *o, int n_want, int **out, const char *what)
{
    return parse_list(o, n_want, sizeof **out, item_int, (void **)out, what);
}

static int parse_bools(PyObject *o, int n_want, bool **out, const char *what)
{
    return parse_list(o, n_want, sizeof **out, item_bool, (void **)out, what);
}

static PyObject *bool_list(const bool *b, int n)
{
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) PyList_SET_ITEM(l, i, PyBool_FromLong(b[i]));
    return l;
}

static PyObject *py_vmap_program(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po, *in_axes, *out_axes, *name_obj = Py_None;
    long long size;
    if (!PyArg_ParseTuple(args, "OOLO|O:vmap_program", &po, &in_axes, &size, &out_axes,
                          &name_obj))
        return NULL;
    const char *axis_name = NULL; /* lives as long as name_obj, an argument */
    if (name_obj != Py_None) {
        if (!PyUnicode_Check(name_obj)) {
            PyErr_Format(PyExc_TypeError, "vmap_program: axis_name must be a str or None, got %R",
                         name_obj);
            return NULL;
        }
        axis_name = PyUnicode_AsUTF8(name_obj);
        if (!axis_name) return NULL;
    }
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    int *ia = NULL, *oa = NULL;
    PyObject *res = NULL;
    if (parse_ints(in_axes, oly_program_num_inputs(p), &ia, "vmap in_axes") < 0) goto done;
    if (parse_ints(out_axes, oly_program_num_outputs(p), &oa, "vmap out_axes") < 0) goto done;
    oly_program *o = NULL;
    oly_status s = oly_program_vmap_named(p, ia, (int64_t)size, axis_name, oa, &o);
    res = s == OLY_OK ? ext_program_wrap(o, NULL) : ext_raise(s);
done:
    PyMem_Free(ia);
    PyMem_Free(oa);
    return res;
}

static PyObject *py_jvp_program(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po, *nz;
    if (!PyArg_ParseTuple(args, "OO:jvp_program", &po, &nz)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    bool *nzi = NULL;
    if (parse_bools(nz, oly_program_num_inputs(p), &nzi, "jvp nonzero mask") < 0) return NULL;
    int n_out = oly_program_num_outputs(p);
    bool *nzo = PyMem_Calloc((size_t)n_out + 1, sizeof *nzo);
    PyObject *res = NULL;
    if (!nzo) {
        PyErr_NoMemory();
        goto done;
    }
    oly_program *o = NULL;
    oly_status s = oly_program_jvp(p, nzi, &o, nzo);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    res = Py_BuildValue("(NN)", ext_program_wrap(o, NULL), bool_list(nzo, n_out));
done:
    PyMem_Free(nzi);
    PyMem_Free(nzo);
    return res;
}

static PyObject *py_linearize_program(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po, *nz;
    if (!PyArg_ParseTuple(args, "OO:linearize_program", &po, &nz)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    bool *nzi = NULL;
    if (parse_bools(nz, oly_program_num_inputs(p), &nzi, "linearize nonzero mask") < 0)
        return NULL;
    int n_out = oly_program_num_outputs(p);
    bool *nzo = PyMem_Calloc((size_t)n_out + 1, sizeof *nzo);
    PyObject *res = NULL;
    if (!nzo) {
        PyErr_NoMemory();
        goto done;
    }
    oly_program *pr = NULL, *lin = NULL;
    int n_res = 0;
    oly_status s = oly_program_linearize(p, nzi, &pr, &lin, &n_res, nzo);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    res = Py_BuildValue("(NNiN)", ext_program_wrap(pr, NULL), ext_program_wrap(lin, NULL), n_res,
                        bool_list(nzo, n_out));
done:
    PyMem_Free(nzi);
    PyMem_Free(nzo);
    return res;
}

static PyObject *py_transpose_program(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po;
    int n_res;
    if (!PyArg_ParseTuple(args, "Oi:transpose_program", &po, &n_res)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    oly_program *o = NULL;
    oly_status s = oly_program_transpose(p, n_res, &o);
    return s == OLY_OK ? ext_program_wrap(o, NULL) : ext_raise(s);
}

static PyObject *py_dce_program(PyObject *Py_UNUSED(m), PyObject *po)
{
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    oly_program *o = NULL;
    oly_status s = oly_program_dce(p, &o);
    return s == OLY_OK ? ext_program_wrap(o, NULL) : ext_raise(s);
}

/* ---------------------------------------------------------------- calling programs */

int ext_program_run_arrays(oly_program *p, oly_array *const *in, Py_ssize_t n, oly_array **out)
{
    int n_out = oly_program_num_outputs(p);
    size_t bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) bytes += oly_aval_nbytes(oly_array_aval(in[i]));
    for (int i = 0; i < n_out; i++) bytes += oly_aval_nbytes(oly_program_output_aval(p, i));
    oly_status s;
    if (bytes > GIL_RELEASE_BYTES) { /* large runs let other threads run */
        Py_BEGIN_ALLOW_THREADS
        s = oly_program_run(p, 0, in, (int)n, out, n_out);
        Py_END_ALLOW_THREADS
    } else {
        s = oly_program_run(p, 0, in, (int)n, out, n_out);
    }
    if (s != OLY_OK) return ext_raise(s), -1;
    return 0;
}

static PyObject *run_eager(oly_program *p, PyObject *const *args, Py_ssize_t n)
{
    int n_out = oly_program_num_outputs(p);
    oly_array **in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    oly_array **out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    PyObject *res = NULL;
    Py_ssize_t got = 0;
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n; got++) {
        oly_array *a = ext_array_get(args[got]);
        const oly_aval *want = oly_program_input_aval(p, (int)got);
        if (a && (!want || oly_array_aval(a)->dtype == want->dtype)) {
            in[got] = oly_array_retain(a);
        } else if (ext_to_array(args[got], want ? (int)want->dtype : -1, &in[got]) < 0) {
            goto done;
        }
    }
    if (ext_program_run_arrays(p, in, n, out) < 0) goto done;
    res = PyTuple_New(n_out);
    for (int i = 0; i < n_out; i++) {
        PyObject *o = res ? ext_array_wrap(out[i]) : (oly_array_release(out[i]), NULL);
        if (!o) {
            Py_CLEAR(res);
            continue;
        }
        PyTuple_SET_ITEM(res, i, o);
    }
done:
    for (Py_ssize_t i = 0; i < got; i++) oly_array_release(in[i]);
    PyMem_Free(in);
    PyMem_Free(out);
    return res;
}

/* prog on args: inline into the innermost open trace, else run now. */
static PyObject *call_program(oly_program *p, PyObject *const *args, Py_ssize_t n)
{
    if (n != oly_program_num_inputs(p)) {
        PyErr_Format(PyExc_TypeError, "call_program: the program takes %d inputs, got %zd",
                     oly_program_num_inputs(p), n);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        oly_aval a;
        if (ext_aval_of(args[i], &a) < 0) return NULL;
        const oly_aval *want = oly_program_input_aval(p, (int)i);
        bool scalar_ok = a.rank == 0 && want->rank == 0 && !ext_is_tracer(args[i]) &&
                         !ext_array_get(args[i]);
        if (!scalar_ok && !oly_aval_equal(&a, want)) {
            char g[256], w[256];
            oly_aval_format(g, sizeof g, &a);
            oly_aval_format(w, sizeof w, want);
            PyErr_Format(PyExc_TypeError, "call_program: input %zd is %s, the program expects %s",
                         i, g, w);
            return NULL;
        }
    }
    if (ext_trace_current()) return ext_trace_inline(p, args, n);
    return run_eager(p, args, n);
}

static PyObject *py_call_program(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po, *vals;
    if (!PyArg_ParseTuple(args, "OO:call_program", &po, &vals)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    PyObject *seq = PySequence_Fast(vals, "call_program: args must be a sequence");
    if (!seq) return NULL;
    PyObject *r = call_program(p, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq));
    Py_DECREF(seq);
    return r;
}

/* A program taking inputs of avals whose old input i is new input mapping[i]. */
static PyObject *py_program_with_inputs(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *po, *avals, *mapping;
    if (!PyArg_ParseTuple(args, "OOO:program_with_inputs", &po, &avals, &mapping)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    oly_aval *av = NULL;
    Py_ssize_t n = 0;
    int *map = NULL;
    int n_in = oly_program_num_inputs(p), n_out = oly_program_num_outputs(p);
    oly_atom *in = NULL, *newin = NULL, *out = NULL;
    oly_builder *b = NULL;
    PyObject *res = NULL;
    if (parse_avals(avals, &av, &n) < 0) return NULL;
    if (parse_ints(mapping, n_in, &map, "program_with_inputs mapping") < 0) goto done;
    in = PyMem_Calloc((size_t)n_in + 1, sizeof *in);
    newin = PyMem_Calloc((size_t)n + 1, sizeof *newin);
    out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    if (!in || !newin || !out) {
        PyErr_NoMemory();
        goto done;
    }
    oly_status s = oly_builder_new(&b);
    for (Py_ssize_t i = 0; s == OLY_OK && i < n; i++) {
        oly_var *v;
        s = oly_builder_add_input(b, &av[i], &v);
        if (s == OLY_OK) newin[i] = oly_atom_var(v);
    }
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        if (map[i] < 0 || map[i] >= n ||
            !oly_aval_equal(&av[map[i]], oly_program_input_aval(p, i))) {
            PyErr_Format(PyExc_ValueError, "program_with_inputs: input %d maps to %d, which "
                         "is out of range or of another aval", i, map[i]);
            goto done;
        }
        in[i] = newin[map[i]];
    }
    s = oly_builder_inline(b, p, in, out);
    oly_program *np_ = NULL;
    if (s == OLY_OK) s = oly_builder_finish(b, out, n_out, &np_);
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    res = ext_program_wrap(np_, NULL);
done:
    oly_builder_free(b);
    PyMem_Free(av);
    PyMem_Free(map);
    PyMem_Free(in);
    PyMem_Free(newin);
    PyMem_Free(out);
    return res;
}

/* ---------------------------------------------------------------- binding with programs */

/* The programs of a sequence of Jaxprs: *out (PyMem) borrows them from
 * *keep (a new reference the caller drops after use). */
static int collect_subs(PyObject *subs, oly_program ***out, Py_ssize_t *n, PyObject **keep)
{
    PyObject *seq = PySequence_Fast(subs, "subs must be a sequence of Jaxprs");
    if (!seq) return -1;
    *n = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc((size_t)*n + 1, sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        oly_program *p = ext_program_get(PySequence_Fast_GET_ITEM(seq, i));
        if (!p) {
            PyMem_Free(*out);
            *out = NULL;
            Py_DECREF(seq);
            return -1;
        }
        (*out)[i] = p;
    }
    *keep = seq;
    return 0;
}

static PyObject *bind_with(const oly_prim *p, const void *params, PyObject *vals,
                           oly_program **subs, Py_ssize_t n_sub)
{
    PyObject *seq = PySequence_Fast(vals, "args must be a sequence");
    if (!seq) return NULL;
    PyObject *r = ext_bind(p, params, PySequence_Fast_ITEMS(seq), PySequence_Fast_GET_SIZE(seq),
                           subs, (int)n_sub);
    Py_DECREF(seq);
    return r;
}

static PyObject *py_bind_subs(PyObject *Py_UNUSED(m), PyObject *args)
{
    const char *name;
    PyObject *vals, *params, *subs;
    if (!PyArg_ParseTuple(args, "sOOO:bind_subs", &name, &vals, &params, &subs)) return NULL;
    const oly_prim *p = oly_prim_lookup(name);
    if (!p) {
        PyErr_Format(PyExc_NotImplementedError, "the primitive '%s' is not available in this "
                     "build", name);
        return NULL;
    }
    int nf = 0;
    size_t psize = 0;
    oly_prim_fields(p, &nf, &psize);
    void *pbuf = psize ? PyMem_Calloc(1, psize) : NULL;
    oly_program **sv = NULL;
    Py_ssize_t ns = 0;
    PyObject *res = NULL, *keep = NULL;
    if (psize && !pbuf) return PyErr_NoMemory();
    if (ext_params_from_dict(p, params, pbuf) < 0) goto done;
    if (collect_subs(subs, &sv, &ns, &keep) < 0) goto done;
    res = bind_with(p, pbuf, vals, sv, ns);
done:
    Py_XDECREF(keep);
    PyMem_Free(pbuf);
    PyMem_Free(sv);
    return res;
}

/* ---------------------------------------------------------------- rule thunks */

/* Calls rule(avals, nz) -> Jaxpr. A Python exception becomes the error
 * payload, marked to be re-raised unchanged by the transform's caller
 * (ext_payload_free_reraise), and a failure status. */
static oly_status rule_trace(void *user, int n_in, const oly_aval *in_avals, const bool *nz,
                             oly_program **out)
{
    PyGILState_STATE g = PyGILState_Ensure();
    oly_status st = OLY_OK;
    PyObject *avals = PyList_New(n_in), *nzl = NULL, *r = NULL;
    if (!avals) goto fail;
    for (int i = 0; i < n_in; i++) {
        PyObject *t = ext_aval_new(&in_avals[i]);
        if (!t) goto fail;
        PyList_SET_ITEM(avals, i, t);
    }
    nzl = bool_list(nz, n_in);
    if (!nzl) goto fail;
    r = PyObject_CallFunctionObjArgs((PyObject *)user, avals, nzl, NULL);
    if (!r) goto fail;
    oly_program *p = ext_program_get(r);
    if (!p) goto fail;
    *out = oly_program_retain(p);
    goto done;
fail: {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    st = oly_host_fail(OLY_ERR_CALLBACK, "a custom differentiation rule raised an exception");
    if (value) oly_error_set_payload(value, ext_payload_free_reraise); /* takes the reference */
}
done:
    Py_XDECREF(avals);
    Py_XDECREF(nzl);
    Py_XDECREF(r);
    PyGILState_Release(g);
    return st;
}

static int make_thunk(const char *name, PyObject *rule, oly_thunk **out)
{
    if (!PyCallable_Check(rule)) {
        PyErr_Format(PyExc_TypeError, "custom rule must be callable, got %R", rule);
        return -1;
    }
    Py_INCREF(rule);
    oly_status s = oly_thunk_new(name, rule_trace, rule, ext_drop_with_gil, out);
    if (s != OLY_OK) {
        Py_DECREF(rule);
        ext_raise(s);
        return -1;
    }
    return 0;
}

static PyObject *py_custom_jvp_call(PyObject *Py_UNUSED(m), PyObject *args)
{
    const char *name;
    PyObject *po, *rule, *vals;
    if (!PyArg_ParseTuple(args, "sOOO:custom_jvp_call", &name, &po, &rule, &vals)) return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    const oly_prim *prim = oly_prim_lookup("custom_jvp_call");
    if (!prim) {
        PyErr_SetString(PyExc_NotImplementedError, "custom_jvp_call is not available");
        return NULL;
    }
    oly_params_custom_jvp params;
    memset(&params, 0, sizeof params);
    params.name = name;
    params.n_out = oly_program_num_outputs(p);
    if (make_thunk(name, rule, &params.jvp) < 0) return NULL;
    PyObject *r = bind_with(prim, &params, vals, &p, 1);
    oly_thunk_release(params.jvp);
    return r;
}

static PyObject *py_custom_vjp_call(PyObject *Py_UNUSED(m), PyObject *args)
{
    const char *name;
    PyObject *po, *fwd, *bwd, *vals;
    if (!PyArg_ParseTuple(args, "sOOOO:custom_vjp_call", &name, &po, &fwd, &bwd, &vals))
        return NULL;
    oly_program *p = ext_program_get(po);
    if (!p) return NULL;
    const oly_prim *prim = oly_prim_lookup("custom_vjp_call");
    if (!prim) {
        PyErr_SetString(PyExc_NotImplementedError, "custom_vjp_call is not available");
        return NULL;
    }
    oly_params_custom_vjp params;
    memset(&params, 0, sizeof params);
    params.name = name;
    params.n_out = oly_program_num_outputs(p);
    if (make_thunk(name, fwd, &params.fwd) < 0) return NULL;
    if (make_thunk(name, bwd, &params.bwd) < 0) {
        oly_thunk_release(params.fwd);
        return NULL;
    }
    PyObject *r = bind_with(prim, &params, vals, &p, 1);
    oly_thunk_release(params.fwd);
    oly_thunk_release(params.bwd);
    return r;
}

/* ---------------------------------------------------------------- module */

PyMethodDef ext_transform_methods[] = {
    {"trace", (PyCFunction)(void (*)(void))py_trace, METH_VARARGS | METH_KEYWORDS,
     "trace(fun, avals, values=None, transparent=False) -> (Jaxpr, captured): fun(*tracers) "
     "returns a sequence of leaves; captured lists the outer values lifted into extra "
     "trailing inputs. With values (per input an Array, a Tracer or None) and no staged "
     "trace (jit) open, the trace is concrete: its tracers have values, computed when asked "
     "for (bool, int, float, index, concrete_value). transparent (vmap) does not stop a "
     "concrete trace opened inside it"},
    {"vmap_program", py_vmap_program, METH_VARARGS,
     "vmap_program(prog, in_axes, axis_size, out_axes, axis_name=None) -> Jaxpr (-1: not "
     "batched); the collectives naming axis_name act over the batch"},
    {"jvp_program", py_jvp_program, METH_VARARGS,
     "jvp_program(prog, nz_in) -> (Jaxpr, nz_out)"},
    {"linearize_program", py_linearize_program, METH_VARARGS,
     "linearize_program(prog, nz_in) -> (primal, linear, n_res, nz_out)"},
    {"transpose_program", py_transpose_program, METH_VARARGS,
     "transpose_program(linear, n_res) -> Jaxpr"},
    {"dce_program", py_dce_program, METH_O, "dce_program(prog) -> Jaxpr"},
    {"call_program", py_call_program, METH_VARARGS,
     "call_program(prog, args) -> tuple: inline into the open trace, else run now"},
    {"program_with_inputs", py_program_with_inputs, METH_VARARGS,
     "program_with_inputs(prog, avals, mapping) -> Jaxpr taking inputs of avals; old input i "
     "is new input mapping[i]"},
    {"bind_subs", py_bind_subs, METH_VARARGS,
     "bind_subs(name, args, params, subs) -> tuple: bind a primitive holding programs"},
    {"custom_jvp_call", py_custom_jvp_call, METH_VARARGS,
     "custom_jvp_call(name, prog, jvp_rule, args) -> tuple; jvp_rule(avals, nz) -> Jaxpr"},
    {"custom_vjp_call", py_custom_vjp_call, METH_VARARGS,
     "custom_vjp_call(name, prog, fwd_rule, bwd_rule, args) -> tuple"},
    {NULL, NULL, 0, NULL},
};

