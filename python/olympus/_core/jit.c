/* jit.c — JitFunction (jit, and make_jaxpr's tracing mode).
 *
 * A call flattens (args, kwargs) minus the static arguments into leaves and
 * looks up the cache with the key (treedef, packed leaf avals + x64 flag,
 * static values). A hit with no open trace runs the cached program directly:
 * no Python-level call happens on that path. A miss traces the function with
 * one input Tracer per leaf, runs DCE and caches (program, output treedef),
 * unless the trace captured values of an enclosing trace. Inside an open trace
 * the call is staged as one `pjit` equation holding the program.
 */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

#include "structmember.h"

#define FN_SLOT(f) (__extension__(void *)(f))

/* Runs moving more than this many bytes release the GIL. */
#define GIL_RELEASE_BYTES ((size_t)1 << 20)

typedef struct JitFunction {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fun;          /* owned */
    PyObject *dict;         /* owned: __name__, __qualname__, __doc__, __module__, __wrapped__ */
    PyObject *weakreflist;
    PyObject *cache;        /* owned dict: key -> capsule of cache_entry */
    Py_ssize_t *snums;      /* owned (PyMem): static positional indices (may be negative) */
    Py_ssize_t n_snums;
    PyObject *snames;       /* owned tuple of str: static keyword names */
    PyObject *name;         /* owned str: the function's __name__ */
    long trace_count;
    bool jaxpr_mode;        /* make_jaxpr: trace every call, return a Jaxpr */
} JitFunction;

typedef struct cache_entry {
    oly_program *prog;      /* owned */
    PyObject *out_treedef;  /* owned */
    PyObject *shard_cache;  /* owned dict or NULL: per-shard programs (sharded.c) */
    bool used;              /* hit since the eviction hand last passed it */
} cache_entry;

/* Most entries a JitFunction's cache keeps (olympus_jit_cache_size); the
 * oldest entry not used since the eviction hand last passed goes first
 * (CLOCK, an LRU approximation whose hit costs one store). Module-wide,
 * changed only with the GIL held. */
static Py_ssize_t cache_capacity = 4096;

static PyTypeObject *JitFunction_Type; /* owned; also in ext_st */

/* ---------------------------------------------------------------- cache entries */

static void entry_free(PyObject *cap)
{
    cache_entry *e = PyCapsule_GetPointer(cap, "olympus.jit_entry");
    if (!e) return;
    oly_program_release(e->prog);
    Py_XDECREF(e->out_treedef);
    Py_XDECREF(e->shard_cache);
    PyMem_Free(e);
}

static PyObject *entry_new(oly_program *prog, PyObject *out_treedef)
{
    cache_entry *e = PyMem_Malloc(sizeof *e);
    if (!e) return PyErr_NoMemory();
    e->prog = oly_program_retain(prog);
    e->out_treedef = Py_NewRef(out_treedef);
    e->shard_cache = NULL;
    e->used = false;
    PyObject *cap = PyCapsule_New(e, "olympus.jit_entry", entry_free);
    if (!cap) {
        oly_program_release(e->prog);
        Py_DECREF(e->out_treedef);
        PyMem_Free(e);
    }
    return cap;
}

/* Drops entries until one more fits: from the oldest, an entry used since the
 * last pass gets a second chance (its mark cleared, moved to the end). */
static int cache_make_room(PyObject *cache)
{
    while (PyDict_GET_SIZE(cache) >= cache_capacity && PyDict_GET_SIZE(cache) > 0) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        if (!PyDict_Next(cache, &pos, &k, &v)) break;
        Py_INCREF(k);
        Py_INCREF(v);
        cache_entry *e = PyCapsule_GetPointer(v, "olympus.jit_entry");
        int r = PyDict_DelItem(cache, k);
        if (r == 0 && e && e->used && cache_capacity > 0) {
            e->used = false;
            r = PyDict_SetItem(cache, k, v);
        }
        Py_DECREF(k);
        Py_DECREF(v);
        if (r < 0) return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- leaves */

static bool is_array_leaf(PyObject *o)
{
    return ext_array_get(o) || ext_is_tracer(o) || PyBool_Check(o) || PyLong_Check(o) ||
           PyFloat_Check(o) || PyComplex_Check(o) || PyArray_Check(o) ||
           PyArray_IsScalar(o, Generic);
}

static PyObject *bad_leaf(JitFunction *f, PyObject *leaf, Py_ssize_t i)
{
    PyErr_Format(PyExc_TypeError,
                 "Error interpreting argument to %R as an abstract array. The problematic value "
                 "is of type %s and was passed to the function as leaf %zd of its arguments.\n"
                 "This typically means that a jit-wrapped function was called with a non-array "
                 "argument, and this argument was not marked as static using the "
                 "static_argnums or static_argnames parameters of jit.",
                 f->fun, Py_TYPE(leaf)->tp_name, i);
    return NULL;
}

/* Appends the packed avals of the leaves to a bytes object (with the x64 flag first). */
static PyObject *signature(JitFunction *f, PyObject *leaves, oly_aval *avals)
{
    Py_ssize_t n = PyList_GET_SIZE(leaves);
    size_t cap = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GET_ITEM(leaves, i);
        if (!is_array_leaf(o)) return bad_leaf(f, o, i);
        if (ext_aval_of(o, &avals[i]) < 0) return NULL;
        cap += 4 + 8 * (size_t)avals[i].rank;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    if (!b) return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(b);
    *p++ = oly_x64_enabled() ? 1 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const oly_aval *a = &avals[i];
        *p++ = (unsigned char)a->dtype;
        *p++ = a->weak ? 1 : 0;
        *p++ = (unsigned char)a->rank;
        *p++ = 0;
        memcpy(p, a->dims, 8 * (size_t)a->rank);
        p += 8 * (size_t)a->rank;
    }
    return b;
}

/* ---------------------------------------------------------------- calling */

static bool is_static_pos(const JitFunction *f, Py_ssize_t i, Py_ssize_t nargs)
{
    for (Py_ssize_t k = 0; k < f->n_snums; k++) {
        Py_ssize_t s = f->snums[k];
        if (s < 0) s += nargs;
        if (s == i) return true;
    }
    return false;
}

static bool is_static_name(const JitFunction *f, PyObject *name)
{
    Py_ssize_t n = PyTuple_GET_SIZE(f->snames);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *s = PyTuple_GET_ITEM(f->snames, k);
        if (s == name) return true;
        int eq = PyUnicode_Compare(s, name);
        if (eq == 0) return true;
    }
    return false;
}

static PyObject *hash_error(JitFunction *f, PyObject *statics)
{
    /* name the unhashable value */
    PyObject *bad = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(statics);
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
        PyObject *item = PyTuple_GET_ITEM(statics, i);
        PyObject *v = PyTuple_GET_ITEM(item, 1);
        if (PyObject_Hash(v) == -1) bad = v;
        PyErr_Clear();
    }
    if (!bad) bad = statics;
    PyErr_Format(PyExc_ValueError,
                 "Non-hashable static arguments are not supported. An error occurred while "
                 "trying to hash an object of type %s, %R, passed as a static argument to %U. "
                 "Static arguments must be hashable (use a tuple instead of a list).",
                 Py_TYPE(bad)->tp_name, bad, f->name);
    return NULL;
}

/* Run prog eagerly on the leaves; a list of new Arrays. A call with a sharded
 * Array among the leaves goes to the shard hook first (sharded.c); e: the
 * cache entry of prog, or NULL. */
static PyObject *run_program(oly_program *prog, PyObject *leaves, cache_entry *e)
{
    Py_ssize_t n_in = PyList_GET_SIZE(leaves);
    int n_out = oly_program_num_outputs(prog);
    if (n_in != oly_program_num_inputs(prog)) {
        PyErr_Format(PyExc_SystemError, "jit: program takes %d inputs, got %zd",
                     oly_program_num_inputs(prog), n_in);
        return NULL;
    }
    oly_array *small_in[16], *small_out[16];
    oly_array **in = n_in <= 16 ? small_in : PyMem_Calloc((size_t)n_in, sizeof *in);
    oly_array **out = n_out <= 16 ? small_out : PyMem_Calloc((size_t)n_out, sizeof *out);
    PyObject *res = NULL;
    Py_ssize_t got = 0;
    if (!in || !out) {
        PyErr_NoMemory();
        goto done;
    }
    size_t bytes = 0;
    bool sharded = false;
    for (; got < n_in; got++) {
        PyObject *o = PyList_GET_ITEM(leaves, got);
        oly_array *a = ext_array_get(o);
        if (a) {
            in[got] = oly_array_retain(a);
            sharded |= ext_array_shards(o) != NULL;
        } else {
            const oly_aval *want = oly_program_input_aval(prog, (int)got);
            if (ext_to_array(o, want ? (int)want->dtype : -1, &in[got]) < 0) goto done;
        }
        bytes += oly_aval_nbytes(oly_array_aval(in[got]));
    }
    if (__builtin_expect(sharded, 0)) {
        res = ext_jit_sharded(prog, leaves, e ? &e->shard_cache : NULL);
        if (res != Py_NotImplemented) goto done;
        Py_CLEAR(res); /* not elementwise, or not sharded alike: the global values */
    }
    for (int i = 0; i < n_out; i++) bytes += oly_aval_nbytes(oly_program_output_aval(prog, i));
    int device;
    bool committed;
    oly_status s = oly_placement(in, (int)n_in, &device, &committed);
    if (s != OLY_OK) {
        PyErr_Format(PyExc_ValueError, "Received incompatible devices for jitted computation: %s",
                     oly_last_error());
        goto done;
    }
    if (bytes > GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        s = oly_program_run(prog, device, in, (int)n_in, out, n_out);
        Py_END_ALLOW_THREADS
    } else {
        s = oly_program_run(prog, device, in, (int)n_in, out, n_out);
    }
    if (s != OLY_OK) {
        ext_raise(s);
        goto done;
    }
    res = PyList_New(n_out);
    for (int i = 0; i < n_out; i++) {
        PyObject *o = res ? ext_array_wrap(out[i]) : (oly_array_release(out[i]), NULL);
        if (!o) {
            Py_CLEAR(res);
            continue;
        }
        PyList_SET_ITEM(res, i, o);
    }
done:
    for (Py_ssize_t i = 0; i < got; i++) oly_array_release(in[i]);
    if (in != small_in) PyMem_Free(in);
    if (out != small_out) PyMem_Free(out);
    return res;
}

/* Stage a call of prog into the open trace: pjit on leaves + captured. A list. */
static PyObject *stage_call(JitFunction *f, oly_program *prog, PyObject *leaves,
                            PyObject *captured)
{
    const oly_prim *pjit = oly_prim_lookup("pjit");
    if (!pjit) {
        PyErr_SetString(PyExc_NotImplementedError, "the primitive 'pjit' is not available");
        return NULL;
    }
    PyObject *args = PySequence_List(leaves);
    if (!args) return NULL;
    if (captured) {
        Py_ssize_t nc = PyList_GET_SIZE(captured);
        for (Py_ssize_t i = 0; i < nc; i++)
            if (PyList_Append(args, PyList_GET_ITEM(captured, i)) < 0) {
                Py_DECREF(args);
                return NULL;
            }
    }
    oly_params_call params;
    memset(&params, 0, sizeof params);
    params.name = PyUnicode_AsUTF8(f->name);
    if (!params.name) {
        Py_DECREF(args);
        return NULL;
    }
    params.n_out = oly_program_num_outputs(prog);
    PyObject *t = ext_bind(pjit, &params, PySequence_Fast_ITEMS(args), PyList_GET_SIZE(args),
                           &prog, 1);
    Py_DECREF(args);
    if (!t) return NULL;
    PyObject *l = PySequence_List(t);
    Py_DECREF(t);
    return l;
}

/* Trace f on the leaves' avals. Outputs: program, output treedef, captured list. */
static int trace_fun(JitFunction *f, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                     PyObject *treedef, const oly_aval *avals, Py_ssize_t n_leaves,
                     oly_program **prog_out, PyObject **out_treedef, PyObject **captured)
{
    ext_trace *t = ext_trace_push(EXT_TRACE_STAGED);
    if (!t) return -1;
    PyObject *tracers = NULL, *tree = NULL, *full = NULL, *kw = NULL, *out = NULL,
             *out_leaves = NULL, *otd = NULL;
    tracers = PyList_New(n_leaves);
    if (!tracers) goto fail;
    for (Py_ssize_t i = 0; i < n_leaves; i++) {
        PyObject *tr = ext_trace_new_input(t, &avals[i], NULL);
        if (!tr) goto fail;
        PyList_SET_ITEM(tracers, i, tr);
    }
    tree = ext_tree_unflatten(treedef, tracers);
    if (!tree) goto fail;
    if (!PyTuple_Check(tree) || PyTuple_GET_SIZE(tree) != 2) {
        PyErr_SetString(PyExc_SystemError, "jit: unflattened arguments are not (args, kwargs)");
        goto fail;
    }
    PyObject *targs = PyTuple_GET_ITEM(tree, 0), *tkw = PyTuple_GET_ITEM(tree, 1);
    full = PyTuple_New(nargs);
    if (!full) goto fail;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *v = is_static_pos(f, i, nargs) ? args[i] : PyTuple_GET_ITEM(targs, k++);
        PyTuple_SET_ITEM(full, i, Py_NewRef(v));
    }
    kw = PyDict_Copy(tkw);
    if (!kw) goto fail;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (is_static_name(f, name) && PyDict_SetItem(kw, name, args[nargs + i]) < 0) goto fail;
    }
    out = PyObject_Call(f->fun, full, kw);
    if (!out) goto fail;
    if (ext_tree_flatten(out, NULL, &out_leaves, &otd) < 0) goto fail;
    f->trace_count++;
    oly_program *prog = NULL;
    PyObject *cap = NULL;
    int r = ext_trace_finish(t, PySequence_Fast_ITEMS(out_leaves), PyList_GET_SIZE(out_leaves),
                             &prog, &cap);
    t = NULL; /* popped either way */
    if (r < 0) goto fail;
    *prog_out = prog;
    *out_treedef = otd;
    *captured = cap;
    otd = NULL;
    Py_XDECREF(tracers);
    Py_XDECREF(tree);
    Py_XDECREF(full);
    Py_XDECREF(kw);
    Py_XDECREF(out);
    Py_XDECREF(out_leaves);
    return 0;
fail:
    if (t) ext_trace_discard(t);
    Py_XDECREF(tracers);
    Py_XDECREF(tree);
    Py_XDECREF(full);
    Py_XDECREF(kw);
    Py_XDECREF(out);
    Py_XDECREF(out_leaves);
    Py_XDECREF(otd);
    return -1;
}

/* Set by olympus.disable_jit(): jitted functions run their Python op by op. */
static int jit_disabled;

static PyObject *py_set_jit_disabled(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int was = jit_disabled, on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    jit_disabled = on;
    return PyBool_FromLong(was);
}

/* This thread's axis environment, ((name, size), ...) innermost last
 * (olympus._src.parallel.axis_env()); a new reference, NULL with an exception. */
static PyObject *axis_env(void)
{
    static PyObject *fn; /* owned for the process; guarded by the GIL */
    if (!fn) {
        PyObject *mod = PyImport_ImportModule("olympus._src.parallel");
        fn = mod ? PyObject_GetAttrString(mod, "axis_env") : NULL;
        Py_XDECREF(mod);
        if (!fn) return NULL;
    }
    PyObject *env = PyObject_CallNoArgs(fn);
    if (env && !PyTuple_Check(env)) {
        PyErr_Format(PyExc_TypeError, "axis_env() returned %R, not a tuple", env);
        Py_CLEAR(env);
    }
    return env;
}

static PyObject *Jit_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames)
{
    JitFunction *f = (JitFunction *)self;
    if (__builtin_expect(jit_disabled, 0) && !f->jaxpr_mode)
        return PyObject_Vectorcall(f->fun, args, nargsf, kwnames);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *dyn = NULL, *dkw = NULL, *statics = NULL, *tree = NULL, *leaves = NULL,
             *treedef = NULL, *sig = NULL, *key = NULL, *res = NULL, *outs = NULL,
             *out_treedef = NULL, *captured = NULL;
    oly_program *prog = NULL;
    oly_aval small_avals[16];
    oly_aval *avals = small_avals;
    cache_entry *entry = NULL;

    /* split static and dynamic arguments */
    Py_ssize_t n_dyn = 0;
    for (Py_ssize_t i = 0; i < nargs; i++) n_dyn += !is_static_pos(f, i, nargs);
    dyn = PyTuple_New(n_dyn);
    dkw = PyDict_New();
    statics = PyList_New(0);
    if (!dyn || !dkw || !statics) goto done;
    for (Py_ssize_t i = 0, k = 0; i < nargs; i++) {
        if (is_static_pos(f, i, nargs)) {
            PyObject *item = Py_BuildValue("(nO)", i, args[i]);
            if (!item || PyList_Append(statics, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        } else {
            PyTuple_SET_ITEM(dyn, k++, Py_NewRef(args[i]));
        }
    }
    Py_ssize_t n_pos_static = PyList_GET_SIZE(statics);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        if (is_static_name(f, name)) {
            PyObject *item = PyTuple_Pack(2, name, args[nargs + i]);
            if (!item || PyList_Append(statics, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        } else if (PyDict_SetItem(dkw, name, args[nargs + i]) < 0) {
            goto done;
        }
    }
    if (PyList_GET_SIZE(statics) - n_pos_static > 1) {
        /* keyword statics in name order, so the key does not depend on call order */
        PyObject *kws = PyList_GetSlice(statics, n_pos_static, PyList_GET_SIZE(statics));
        if (!kws || PyList_Sort(kws) < 0 ||
            PyList_SetSlice(statics, n_pos_static, PyList_GET_SIZE(statics), kws) < 0) {
            Py_XDECREF(kws);
            goto done;
        }
        Py_DECREF(kws);
    }
    Py_SETREF(statics, PyList_AsTuple(statics));
    if (!statics) goto done;

    tree = PyTuple_Pack(2, dyn, dkw);
    if (!tree) goto done;
    if (ext_tree_flatten(tree, NULL, &leaves, &treedef) < 0) goto done;
    Py_ssize_t n_leaves = PyList_GET_SIZE(leaves);
    if (n_leaves > 16) {
        avals = PyMem_Calloc((size_t)n_leaves, sizeof *avals);
        if (!avals) {
            PyErr_NoMemory();
            goto done;
        }
    }
    sig = signature(f, leaves, avals);
    if (!sig) goto done;

    bool staged = ext_trace_current() != NULL;
    if (f->jaxpr_mode) {
        if (trace_fun(f, args, nargs, kwnames, treedef, avals, n_leaves, &prog, &out_treedef,
                      &captured) < 0)
            goto done;
        res = ext_program_wrap(oly_program_retain(prog), out_treedef);
        goto done;
    }

    /* A trace under vmap(axis_name=) / pmap may bake a collective over a bound
     * name into the program: such a program is cached under the axis
     * environment too, so a later call outside it traces again and gets
     * NameError at trace time, not an unbound name at run time. */
    PyObject *env = staged ? axis_env() : NULL;
    if (staged && !env) goto done;
    key = env && PyTuple_GET_SIZE(env) ? PyTuple_Pack(4, treedef, sig, statics, env)
                                       : PyTuple_Pack(3, treedef, sig, statics);
    Py_XDECREF(env);
    if (!key) goto done;
    PyObject *cap = NULL;
    if (PyObject_Hash(key) == -1) {
        PyErr_Clear();
        hash_error(f, statics);
        goto done;
    }
    cap = PyDict_GetItemWithError(f->cache, key); /* borrowed */
    if (!cap && PyErr_Occurred()) goto done;
    if (cap) {
        cache_entry *e = PyCapsule_GetPointer(cap, "olympus.jit_entry");
        if (!e) goto done;
        e->used = true;
        entry = e;
        prog = oly_program_retain(e->prog);
        out_treedef = Py_NewRef(e->out_treedef);
    } else {
        if (trace_fun(f, args, nargs, kwnames, treedef, avals, n_leaves, &prog, &out_treedef,
                      &captured) < 0)
            goto done;
        oly_program *d = NULL;
        oly_status s = oly_program_dce(prog, &d);
        if (s != OLY_OK) {
            ext_raise(s);
            goto done;
        }
        oly_program_release(prog);
        prog = d;
        if (PyList_GET_SIZE(captured) == 0 && cache_capacity > 0) {
            if (cache_make_room(f->cache) < 0) goto done;
            PyObject *cap_new = entry_new(prog, out_treedef);
            if (!cap_new) goto done;
            int r = PyDict_SetItem(f->cache, key, cap_new);
            entry = PyCapsule_GetPointer(cap_new, "olympus.jit_entry"); /* the dict holds it */
            Py_DECREF(cap_new);
            if (r < 0) goto done;
        }
    }
    staged = staged || (captured && PyList_GET_SIZE(captured) > 0);
    outs = staged ? stage_call(f, prog, leaves, captured) : run_program(prog, leaves, entry);
    if (!outs) goto done;
    res = ext_tree_unflatten(out_treedef, outs);
done:
    if (avals != small_avals) PyMem_Free(avals);
    oly_program_release(prog);
    Py_XDECREF(dyn);
    Py_XDECREF(dkw);
    Py_XDECREF(statics);
    Py_XDECREF(tree);
    Py_XDECREF(leaves);
    Py_XDECREF(treedef);
    Py_XDECREF(sig);
    Py_XDECREF(key);
    Py_XDECREF(outs);
    Py_XDECREF(out_treedef);
    Py_XDECREF(captured);
    return res;
}

/* ---------------------------------------------------------------- the JitFunction type */

static int Jit_traverse(PyObject *self, visitproc visit, void *arg)
{
    JitFunction *f = (JitFunction *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(f->fun);
    Py_VISIT(f->dict);
    Py_VISIT(f->cache);
    Py_VISIT(f->snames);
    Py_VISIT(f->name);
    return 0;
}

static int Jit_clear(PyObject *self)
{
    JitFunction *f = (JitFunction *)self;
    Py_CLEAR(f->fun);
    Py_CLEAR(f->dict);
    Py_CLEAR(f->cache);
    Py_CLEAR(f->snames);
    Py_CLEAR(f->name);
    return 0;
}

static void Jit_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    JitFunction *f = (JitFunction *)self;
    PyObject_GC_UnTrack(self);
    if (f->weakreflist) PyObject_ClearWeakRefs(self);
    Jit_clear(self);
    PyMem_Free(f->snums);
    f->snums = NULL;
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Jit_descr_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (!obj || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *Jit_repr(PyObject *self)
{
    JitFunction *f = (JitFunction *)self;
    return PyUnicode_FromFormat("<%s of %R>", f->jaxpr_mode ? "make_jaxpr" : "jit", f->fun);
}

static PyObject *Jit_cache_size(PyObject *self, PyObject *Py_UNUSED(a))
{
    return PyLong_FromSsize_t(PyDict_Size(((JitFunction *)self)->cache));
}

static PyObject *Jit_clear_cache(PyObject *self, PyObject *Py_UNUSED(a))
{
    PyDict_Clear(((JitFunction *)self)->cache);
    Py_RETURN_NONE;
}

static PyObject *Jit_get_trace_count(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(((JitFunction *)self)->trace_count);
}

static PyObject *Jit_get_fun(PyObject *self, void *Py_UNUSED(c))
{
    PyObject *fun = ((JitFunction *)self)->fun;
    return Py_NewRef(fun ? fun : Py_None);
}

static PyMethodDef Jit_methods[] = {
    {"_cache_size", Jit_cache_size, METH_NOARGS, "number of cached traces"},
    {"_clear_cache", Jit_clear_cache, METH_NOARGS, "drop every cached trace"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Jit_getset[] = {
    {"_trace_count", Jit_get_trace_count, NULL, "how many times the function was traced", NULL},
    {"_fun", Jit_get_fun, NULL, "the wrapped function", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Jit_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(JitFunction, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(JitFunction, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(JitFunction, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Jit_slots[] = {
    {Py_tp_dealloc, FN_SLOT(Jit_dealloc)},
    {Py_tp_traverse, FN_SLOT(Jit_traverse)},
    {Py_tp_clear, FN_SLOT(Jit_clear)},
    {Py_tp_call, FN_SLOT(PyVectorcall_Call)},
    {Py_tp_descr_get, FN_SLOT(Jit_descr_get)},
    {Py_tp_repr, FN_SLOT(Jit_repr)},
    {Py_tp_methods, Jit_methods},
    {Py_tp_getset, Jit_getset},
    {Py_tp_members, Jit_members},
    {0, NULL},
};

static PyType_Spec Jit_spec = {
    .name = "olympus._core.JitFunction",
    .basicsize = sizeof(JitFunction),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Jit_slots,
};

/* Copy __name__ etc. from fun (missing attributes are skipped). */
static int copy_metadata(JitFunction *f)
{
    static const char *const attrs[] = {"__module__", "__name__", "__qualname__", "__doc__"};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        PyObject *v = PyObject_GetAttrString(f->fun, attrs[i]);
        if (!v) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            continue;
        }
        int r = PyDict_SetItemString(f->dict, attrs[i], v);
        Py_DECREF(v);
        if (r < 0) return -1;
    }
    if (PyDict_SetItemString(f->dict, "__wrapped__", f->fun) < 0) return -1;
    PyObject *name = PyDict_GetItemString(f->dict, "__name__");
    if (name && PyUnicode_Check(name))
        f->name = Py_NewRef(name);
    else
        f->name = PyUnicode_FromString("<unnamed function>");
    return f->name ? 0 : -1;
}

static int add_num(JitFunction *f, Py_ssize_t v)
{
    for (Py_ssize_t i = 0; i < f->n_snums; i++)
        if (f->snums[i] == v) return 0;
    Py_ssize_t *p = PyMem_Realloc(f->snums, sizeof *p * (size_t)(f->n_snums + 1));
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    f->snums = p;
    f->snums[f->n_snums++] = v;
    return 0;
}

/* static_argnums must index the function's positional parameters (unless it
 * takes *args) and static_argnames must name its parameters (unless it takes
 * **kwargs): a ValueError at jit time, as the reference does, instead of a
 * static marker that silently never applies. */
static int check_statics(JitFunction *f, PyObject *names, PyObject *varnames, Py_ssize_t na,
                         Py_ssize_t n_posonly, Py_ssize_t n_kwonly, long flags)
{
    const long co_varargs = 0x04, co_varkeywords = 0x08;
    const char *who = f->jaxpr_mode ? "make_jaxpr" : "jit";
    if (!(flags & co_varargs)) {
        for (Py_ssize_t k = 0; k < f->n_snums; k++) {
            if (f->snums[k] >= na || f->snums[k] < -na) {
                PyErr_Format(PyExc_ValueError,
                             "%s: static_argnums contains %zd, but the function %R only "
                             "accepts %zd positional arguments",
                             who, f->snums[k], f->fun, na);
                return -1;
            }
        }
    }
    if (flags & co_varkeywords) return 0;
    Py_ssize_t hi = na + n_kwonly;
    if (hi > PyTuple_GET_SIZE(varnames)) hi = PyTuple_GET_SIZE(varnames);
    PyObject *params = PyTuple_GetSlice(varnames, n_posonly > 0 ? n_posonly : 0, hi);
    if (!params) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        PyObject *name = PyList_GET_ITEM(names, i);
        int has = PySequence_Contains(params, name);
        if (has < 0) break;
        if (!has) {
            PyErr_Format(PyExc_ValueError,
                         "%s: static_argnames contains %R, which is not a parameter of %R "
                         "(its keyword parameters are %R)",
                         who, name, f->fun, params);
            break;
        }
    }
    Py_DECREF(params);
    return PyErr_Occurred() ? -1 : 0;
}

/* Static argument numbers and names, each completed from the other through
 * the function's code object when it has one. */
static int parse_statics(JitFunction *f, PyObject *nums, PyObject *names)
{
    if (nums && nums != Py_None) {
        if (PyLong_Check(nums)) {
            Py_ssize_t v = PyLong_AsSsize_t(nums);
            if (v == -1 && PyErr_Occurred()) return -1;
            if (add_num(f, v) < 0) return -1;
        } else {
            PyObject *seq = PySequence_Fast(nums, "static_argnums must be an int or a sequence of ints");
            if (!seq) return -1;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                Py_ssize_t v = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
                if ((v == -1 && PyErr_Occurred()) || add_num(f, v) < 0) {
                    Py_DECREF(seq);
                    return -1;
                }
            }
            Py_DECREF(seq);
        }
    }
    PyObject *nl = PyList_New(0);
    if (!nl) return -1;
    if (names && names != Py_None) {
        if (PyUnicode_Check(names)) {
            if (PyList_Append(nl, names) < 0) goto fail;
        } else {
            PyObject *seq = PySequence_Fast(names, "static_argnames must be a str or a sequence of str");
            if (!seq) goto fail;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
                if (!PyUnicode_Check(s)) {
                    PyErr_Format(PyExc_TypeError, "static_argnames must be strings, got %R", s);
                    Py_DECREF(seq);
                    goto fail;
                }
                if (PyList_Append(nl, s) < 0) {
                    Py_DECREF(seq);
                    goto fail;
                }
            }
            Py_DECREF(seq);
        }
    }
    /* complete through the signature */
    PyObject *code = PyObject_GetAttrString(f->fun, "__code__");
    if (!code) {
        PyErr_Clear();
    } else {
        PyObject *varnames = PyObject_GetAttrString(code, "co_varnames");
        PyObject *argc = PyObject_GetAttrString(code, "co_argcount");
        PyObject *posc = PyObject_GetAttrString(code, "co_posonlyargcount");
        PyObject *kwoc = PyObject_GetAttrString(code, "co_kwonlyargcount");
        PyObject *flags = PyObject_GetAttrString(code, "co_flags");
        Py_DECREF(code);
        if (varnames && argc && posc && kwoc && flags && PyTuple_Check(varnames)) {
            Py_ssize_t na = PyLong_AsSsize_t(argc), np_ = PyLong_AsSsize_t(posc);
            if (na > PyTuple_GET_SIZE(varnames)) na = PyTuple_GET_SIZE(varnames);
            if (!PyMethod_Check(f->fun) &&
                check_statics(f, nl, varnames, na, np_, PyLong_AsSsize_t(kwoc),
                              PyLong_AsLong(flags)) < 0) {
                Py_XDECREF(varnames);
                Py_XDECREF(argc);
                Py_XDECREF(posc);
                Py_XDECREF(kwoc);
                Py_XDECREF(flags);
                goto fail;
            }
            for (Py_ssize_t i = np_ > 0 ? np_ : 0; i < na; i++) {
                PyObject *vn = PyTuple_GET_ITEM(varnames, i);
                int in_names = PySequence_Contains(nl, vn);
                if (in_names < 0) break;
                bool in_nums = false;
                for (Py_ssize_t k = 0; k < f->n_snums; k++)
                    if (f->snums[k] == i || f->snums[k] + na == i) in_nums = true;
                if (in_names && !in_nums && add_num(f, i) < 0) break;
                if (in_nums && !in_names && PyList_Append(nl, vn) < 0) break;
            }
        }
        Py_XDECREF(varnames);
        Py_XDECREF(argc);
        Py_XDECREF(posc);
        Py_XDECREF(kwoc);
        Py_XDECREF(flags);
        if (PyErr_Occurred()) goto fail;
    }
    f->snames = PyList_AsTuple(nl);
    Py_DECREF(nl);
    return f->snames ? 0 : -1;
fail:
    Py_DECREF(nl);
    return -1;
}

static PyObject *make_jit(PyObject *fun, PyObject *nums, PyObject *names, bool jaxpr_mode)
{
    if (!PyCallable_Check(fun)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a callable, got %R",
                     jaxpr_mode ? "make_jaxpr" : "jit", fun);
        return NULL;
    }
    JitFunction *f = PyObject_GC_New(JitFunction, JitFunction_Type);
    if (!f) return NULL;
    f->vectorcall = Jit_vectorcall;
    f->fun = Py_NewRef(fun);
    f->dict = PyDict_New();
    f->weakreflist = NULL;
    f->cache = PyDict_New();
    f->snums = NULL;
    f->n_snums = 0;
    f->snames = NULL;
    f->name = NULL;
    f->trace_count = 0;
    f->jaxpr_mode = jaxpr_mode;
    PyObject_GC_Track((PyObject *)f);
    if (!f->dict || !f->cache || copy_metadata(f) < 0 || parse_statics(f, nums, names) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    return (PyObject *)f;
}

static PyObject *py_jit(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fun", "static_argnums", "static_argnames", NULL};
    PyObject *fun, *nums = NULL, *names = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:jit", kwlist, &fun, &nums, &names))
        return NULL;
    return make_jit(fun, nums, names, false);
}

static PyObject *py_make_jaxpr(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"fun", "static_argnums", NULL};
    PyObject *fun, *nums = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:make_jaxpr", kwlist, &fun, &nums))
        return NULL;
    return make_jit(fun, nums, NULL, true);
}

static PyObject *py_set_jit_cache_size(PyObject *Py_UNUSED(m), PyObject *arg)
{
    Py_ssize_t n = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "olympus_jit_cache_size must be >= 0, got %zd", n);
        return NULL;
    }
    cache_capacity = n; /* each cache shrinks at its next insertion */
    Py_RETURN_NONE;
}

static PyObject *py_jit_cache_size(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyLong_FromSsize_t(cache_capacity);
}

PyMethodDef ext_jit_methods[] = {
    {"set_jit_disabled", py_set_jit_disabled, METH_O,
     "set_jit_disabled(on) -> the previous setting: jitted functions call their Python\n"
     "function directly (olympus.disable_jit)"},
    {"set_jit_cache_size", py_set_jit_cache_size, METH_O,
     "set_jit_cache_size(n): most traces each jitted function keeps (0: none)"},
    {"jit_cache_size", py_jit_cache_size, METH_NOARGS, "the jit cache capacity"},
    {"jit", (PyCFunction)(void (*)(void))py_jit, METH_VARARGS | METH_KEYWORDS,
     "jit(fun, static_argnums=(), static_argnames=()) -> JitFunction"},
    {"make_jaxpr", (PyCFunction)(void (*)(void))py_make_jaxpr, METH_VARARGS | METH_KEYWORDS,
     "make_jaxpr(fun, static_argnums=()) -> callable returning the traced Jaxpr"},
    {NULL, NULL, 0, NULL},
};

int ext_jit_init(PyObject *module)
{
    JitFunction_Type = (PyTypeObject *)PyType_FromSpec(&Jit_spec);
    if (!JitFunction_Type) return -1;
    ext_st->JitFunction_Type = JitFunction_Type;
    if (PyModule_AddObjectRef(module, "JitFunction", (PyObject *)JitFunction_Type) < 0) return -1;
    return 0;
}
