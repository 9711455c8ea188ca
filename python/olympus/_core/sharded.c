/* sharded.c — the C half of sharded arrays (olympus.sharding.NamedSharding):
 * blocks cut from a global array, a global array assembled from blocks, an
 * Array carrying its shards, programs run on several devices at once, and
 * jit's hand-over of calls with sharded arguments to the Python layer
 * (olympus/_src/sharded.py), which decides the layout.
 *
 * A sharded Array keeps its global value (the Array's core array, uncommitted)
 * and, in its _shards slot, (sharding, per-device Arrays in mesh order), each
 * committed to its device. CPU devices share memory: a block that is one
 * contiguous run of the global buffer is a view of it, replicas of a block
 * are the same buffer committed to several devices. See docs/design.md,
 * "Sharding". */
#include "ext.h"

#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

/* Runs moving more than this many bytes are queued to their device's stream
 * (several devices then work at once); smaller ones run one after the other
 * on the calling thread, since a hand-off costs 50-150 us. */
#define QUEUE_BYTES ((size_t)1 << 20)

static PyObject *shard_hook; /* owned: olympus._src.sharded._jit_call, or NULL */

/* Dims from a sequence of ints (rank at most OLY_MAX_RANK). 0 or -1. */
static int dims_from(PyObject *seq, const char *what, int64_t *dims, int *rank)
{
    PyObject *f = PySequence_Fast(seq, what);
    if (!f) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    if (n > OLY_MAX_RANK) {
        Py_DECREF(f);
        PyErr_Format(PyExc_ValueError, "%s: rank at most %d, got %zd", what, OLY_MAX_RANK, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
        if (v < 0) {
            Py_DECREF(f);
            PyErr_Format(PyExc_ValueError, "%s: dimensions must be >= 0, got %lld", what, v);
            return -1;
        }
        dims[i] = v;
    }
    *rank = (int)n;
    Py_DECREF(f);
    return 0;
}

static oly_array *array_arg(PyObject *o, const char *what)
{
    oly_array *a = ext_array_get(o);
    if (!a) PyErr_Format(PyExc_TypeError, "%s: expected an olympus Array, got %s", what,
                         Py_TYPE(o)->tp_name);
    return a;
}

static oly_status wait_released(oly_array *a)
{
    oly_status s;
    Py_BEGIN_ALLOW_THREADS
    s = oly_array_wait(a);
    Py_END_ALLOW_THREADS
    return s;
}

/* Calls fn(row offset, row bytes) for every contiguous row of the block
 * (starts, shape) of an array of dims (rank r, element size es): the last
 * dimension's runs, in C order. */
typedef void (*row_fn)(void *ctx, size_t global_off, size_t block_off, size_t nbytes);

static void for_rows(int r, const int64_t *dims, const int64_t *starts, const int64_t *shape,
                     size_t es, row_fn fn, void *ctx)
{
    int64_t total = 1;
    for (int i = 0; i < r; i++) total *= shape[i];
    if (total == 0) return;
    if (r == 0) {
        fn(ctx, 0, 0, es);
        return;
    }
    size_t row = (size_t)shape[r - 1] * es;
    int64_t idx[OLY_MAX_RANK] = {0};
    size_t block_off = 0;
    for (int64_t n = total / shape[r - 1]; n > 0; n--) {
        size_t g = 0;
        for (int i = 0; i < r; i++) g = g * (size_t)dims[i] + (size_t)(starts[i] + idx[i]);
        fn(ctx, g * es, block_off, row);
        block_off += row;
        for (int i = r - 2; i >= 0; i--) { /* next row: odometer over the leading dims */
            if (++idx[i] < shape[i]) break;
            idx[i] = 0;
        }
    }
}

typedef struct copy_ctx {
    char *dst;
    const char *src;
    bool to_global;
} copy_ctx;

static void copy_row(void *ctx, size_t g, size_t b, size_t n)
{
    copy_ctx *c = ctx;
    if (c->to_global) memcpy(c->dst + g, c->src + b, n);
    else memcpy(c->dst + b, c->src + g, n);
}

/* Whether the block is one contiguous run of the global C-order buffer. */
static bool contiguous(int r, const int64_t *dims, const int64_t *shape)
{
    int k = r - 1;
    while (k >= 0 && shape[k] == dims[k]) k--;
    for (int i = 0; i < k; i++)
        if (shape[i] != 1) return false;
    return true;
}

static void release_array(void *owner) { oly_array_release(owner); }

/* take_block(global, starts, shape[, as_shape]) -> Array: the block of global
 * at starts of that shape, uncommitted, the global's dtype and weak type; a
 * view when the block is contiguous, else a copy. as_shape (same element
 * count) re-shapes the block in C order: a member's slice of a stacked pmap
 * result without its member axis, a whole array seen with another shape. */
static PyObject *py_take_block(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *go, *so, *sh, *as = NULL;
    if (!PyArg_ParseTuple(args, "OOO|O:take_block", &go, &so, &sh, &as)) return NULL;
    oly_array *g = array_arg(go, "take_block");
    if (!g) return NULL;
    const oly_aval *ga = oly_array_aval(g);
    int64_t starts[OLY_MAX_RANK], shape[OLY_MAX_RANK];
    int rs, rb;
    if (dims_from(so, "take_block starts", starts, &rs) < 0 ||
        dims_from(sh, "take_block shape", shape, &rb) < 0)
        return NULL;
    if (rs != ga->rank || rb != ga->rank) {
        PyErr_Format(PyExc_ValueError, "take_block: starts and shape must have rank %d, got %d "
                     "and %d", ga->rank, rs, rb);
        return NULL;
    }
    for (int i = 0; i < ga->rank; i++)
        if (starts[i] + shape[i] > ga->dims[i]) {
            PyErr_Format(PyExc_ValueError, "take_block: dimension %d: block [%lld, %lld) is "
                         "outside the array's %lld", i, (long long)starts[i],
                         (long long)(starts[i] + shape[i]), (long long)ga->dims[i]);
            return NULL;
        }
    oly_status s = wait_released(g);
    if (s != OLY_OK) return ext_raise(s);
    oly_aval ba = *ga;
    memcpy(ba.dims, shape, sizeof(int64_t) * (size_t)ga->rank);
    oly_aval oa = ba; /* the result's aval: the block's, or as_shape */
    if (as && as != Py_None) {
        int64_t od[OLY_MAX_RANK];
        int ro;
        if (dims_from(as, "take_block as_shape", od, &ro) < 0) return NULL;
        oa.rank = ro;
        memcpy(oa.dims, od, sizeof(int64_t) * (size_t)ro);
        if (oly_aval_size(&oa) != oly_aval_size(&ba)) {
            PyErr_Format(PyExc_ValueError, "take_block: as_shape has %lld elements, the block "
                         "%lld", (long long)oly_aval_size(&oa), (long long)oly_aval_size(&ba));
            return NULL;
        }
    }
    size_t es = oly_dtype_size(ga->dtype);
    oly_array *out = NULL;
    if (contiguous(ga->rank, ga->dims, shape) && oly_aval_size(&ba) > 0) {
        size_t off = 0;
        for (int i = 0; i < ga->rank; i++) off = off * (size_t)ga->dims[i] + (size_t)starts[i];
        s = oly_array_wrap(&oa, (char *)oly_array_data(g) + off * es, release_array,
                           oly_array_retain(g), &out);
        if (s != OLY_OK) oly_array_release(g);
    } else {
        s = oly_array_new(&oa, &out); /* the block's rows land in C order either way */
        if (s == OLY_OK) {
            copy_ctx c = {oly_array_mutable_data(out), oly_array_data(g), false};
            for_rows(ga->rank, ga->dims, starts, shape, es, copy_row, &c);
        }
    }
    if (s != OLY_OK) return ext_raise(s);
    return ext_array_wrap(out);
}

/* assemble(shape, blocks) -> Array: a new uncommitted array of that shape
 * (dtype and weak type of the first block) with each (Array, starts) block
 * copied in. Waits for the blocks with the GIL released. */
static PyObject *py_assemble(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *sh, *blocks;
    if (!PyArg_ParseTuple(args, "OO!:assemble", &sh, &PyList_Type, &blocks)) return NULL;
    int64_t dims[OLY_MAX_RANK];
    int r;
    if (dims_from(sh, "assemble shape", dims, &r) < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(blocks);
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "assemble: no blocks");
        return NULL;
    }
    oly_array *first = NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(blocks, k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "assemble: blocks are (Array, starts) pairs");
            return NULL;
        }
        oly_array *b = array_arg(PyTuple_GET_ITEM(item, 0), "assemble");
        if (!b) return NULL;
        if (!first) first = b;
        oly_status s = wait_released(b);
        if (s != OLY_OK) return ext_raise(s);
    }
    oly_aval ga;
    oly_status s = oly_aval_make(oly_array_aval(first)->dtype, r, dims, &ga);
    if (s != OLY_OK) return ext_raise(s);
    ga.weak = oly_array_aval(first)->weak;
    oly_array *out = NULL;
    s = oly_array_new(&ga, &out);
    if (s != OLY_OK) return ext_raise(s);
    size_t es = oly_dtype_size(ga.dtype);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(blocks, k);
        oly_array *b = ext_array_get(PyTuple_GET_ITEM(item, 0));
        const oly_aval *ba = oly_array_aval(b);
        int64_t starts[OLY_MAX_RANK];
        int rs;
        if (dims_from(PyTuple_GET_ITEM(item, 1), "assemble starts", starts, &rs) < 0) goto fail;
        bool ok = rs == r && ba->rank == r && ba->dtype == ga.dtype;
        for (int i = 0; ok && i < r; i++) ok = starts[i] + ba->dims[i] <= dims[i];
        if (!ok) {
            PyErr_Format(PyExc_ValueError,
                         "assemble: block %zd (%s, rank %d) does not fit an array of rank %d and "
                         "dtype %s at its starts",
                         k, oly_dtype_name(ba->dtype), ba->rank, r, oly_dtype_name(ga.dtype));
            goto fail;
        }
        copy_ctx c = {oly_array_mutable_data(out), oly_array_data(b), true};
        for_rows(r, dims, starts, ba->dims, es, copy_row, &c);
    }
    return ext_array_wrap(out);
fail:
    oly_array_release(out);
    return NULL;
}

/* make_sharded(global, sharding, shards) -> a new Array over global's value
 * whose _shards slot is (sharding, shards). */
static PyObject *py_make_sharded(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *go, *sharding, *shards;
    if (!PyArg_ParseTuple(args, "OOO!:make_sharded", &go, &sharding, &PyTuple_Type, &shards))
        return NULL;
    oly_array *g = array_arg(go, "make_sharded");
    if (!g) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(shards);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!array_arg(PyTuple_GET_ITEM(shards, i), "make_sharded shards")) return NULL;
    PyObject *pair = PyTuple_Pack(2, sharding, shards);
    if (!pair) return NULL;
    PyObject *r = ext_array_wrap_sharded(oly_array_retain(g), pair);
    Py_DECREF(pair);
    return r;
}

/* run_on_devices(jaxpr, runs) -> list of output lists: runs is a list of
 * (device id, args); every run but the last is queued on its device's stream
 * when the runs are big (they then proceed at once, the outputs are futures),
 * the last runs on the calling thread. */
static PyObject *py_run_on_devices(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *jo, *runs;
    if (!PyArg_ParseTuple(args, "OO!:run_on_devices", &jo, &PyList_Type, &runs)) return NULL;
    oly_program *prog = ext_program_get(jo);
    if (!prog) return NULL;
    int n_in = oly_program_num_inputs(prog), n_out = oly_program_num_outputs(prog);
    Py_ssize_t n_runs = PyList_GET_SIZE(runs);
    oly_array **in = PyMem_Calloc((size_t)n_in + 1, sizeof *in);
    oly_array **out = PyMem_Calloc((size_t)n_out + 1, sizeof *out);
    PyObject *res = PyList_New(0);
    int got = 0;
    if (!in || !out || !res) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    size_t bytes = 0;
    for (int i = 0; i < n_out; i++) bytes += oly_aval_nbytes(oly_program_output_aval(prog, i));
    for (int i = 0; i < n_in; i++) bytes += oly_aval_nbytes(oly_program_input_aval(prog, i));
    bool queue = bytes >= QUEUE_BYTES;
    for (Py_ssize_t k = 0; k < n_runs; k++) {
        int device;
        PyObject *a;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs, k), "iO:run_on_devices run", &device, &a))
            goto fail;
        PyObject *fa = PySequence_Fast(a, "run_on_devices: args must be a sequence");
        if (!fa) goto fail;
        if (PySequence_Fast_GET_SIZE(fa) != n_in) {
            PyErr_Format(PyExc_ValueError, "run_on_devices: the program takes %d inputs, got %zd",
                         n_in, PySequence_Fast_GET_SIZE(fa));
            Py_DECREF(fa);
            goto fail;
        }
        for (got = 0; got < n_in; got++) {
            PyObject *o = PySequence_Fast_GET_ITEM(fa, got);
            oly_array *x = ext_array_get(o);
            if (x) {
                in[got] = oly_array_retain(x);
            } else if (ext_to_array(o, (int)oly_program_input_aval(prog, got)->dtype,
                                    &in[got]) < 0) {
                Py_DECREF(fa);
                goto fail;
            }
        }
        Py_DECREF(fa);
        oly_status s;
        if (queue && k + 1 < n_runs) {
            s = oly_program_run_queued(prog, device, in, n_in, out, n_out);
        } else if (queue) {
            Py_BEGIN_ALLOW_THREADS
            s = oly_program_run(prog, device, in, n_in, out, n_out);
            Py_END_ALLOW_THREADS
        } else {
            s = oly_program_run(prog, device, in, n_in, out, n_out);
        }
        for (int i = 0; i < got; i++) oly_array_release(in[i]);
        got = 0;
        if (s != OLY_OK) {
            ext_raise(s);
            goto fail;
        }
        PyObject *l = PyList_New(n_out);
        for (int i = 0; i < n_out; i++) {
            PyObject *o = l ? ext_array_wrap(out[i]) : (oly_array_release(out[i]), NULL);
            if (o) PyList_SET_ITEM(l, i, o);
            else Py_CLEAR(l);
        }
        if (!l || PyList_Append(res, l) < 0) {
            Py_XDECREF(l);
            goto fail;
        }
        Py_DECREF(l);
    }
    PyMem_Free(in);
    PyMem_Free(out);
    return res;
fail:
    for (int i = 0; i < got; i++) oly_array_release(in[i]);
    PyMem_Free(in);
    PyMem_Free(out);
    Py_XDECREF(res);
    return NULL;
}

/* program_for_shard(jaxpr, global_shape, shard_shape) -> Jaxpr or None
 * (oly_program_for_shard: None when the program is not elementwise). */
static PyObject *py_program_for_shard(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *jo, *gs, *ss;
    if (!PyArg_ParseTuple(args, "OOO:program_for_shard", &jo, &gs, &ss)) return NULL;
    oly_program *prog = ext_program_get(jo);
    if (!prog) return NULL;
    int64_t g[OLY_MAX_RANK], sd[OLY_MAX_RANK];
    int rg, rsd;
    if (dims_from(gs, "program_for_shard global_shape", g, &rg) < 0 ||
        dims_from(ss, "program_for_shard shard_shape", sd, &rsd) < 0)
        return NULL;
    if (rg != rsd) {
        PyErr_Format(PyExc_ValueError, "program_for_shard: shapes of ranks %d and %d", rg, rsd);
        return NULL;
    }
    oly_program *r = NULL;
    oly_status s = oly_program_for_shard(prog, rg, g, sd, &r);
    if (s != OLY_OK) return ext_raise(s);
    if (!r) Py_RETURN_NONE;
    return ext_program_wrap(r, NULL);
}

static PyObject *py_set_shard_hook(PyObject *Py_UNUSED(m), PyObject *fn)
{
    if (fn != Py_None && !PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "set_shard_hook: expected a callable or None, got %s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Py_XSETREF(shard_hook, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

PyObject *ext_jit_sharded(oly_program *prog, PyObject *leaves, PyObject **shard_cache)
{
    if (!shard_hook) Py_RETURN_NOTIMPLEMENTED;
    PyObject *cache;
    if (shard_cache) {
        if (!*shard_cache && !(*shard_cache = PyDict_New())) return NULL;
        cache = Py_NewRef(*shard_cache);
    } else if (!(cache = PyDict_New())) {
        return NULL;
    }
    PyObject *j = ext_program_wrap(oly_program_retain(prog), NULL);
    PyObject *r = j ? PyObject_CallFunctionObjArgs(shard_hook, j, leaves, cache, NULL) : NULL;
    Py_XDECREF(j);
    Py_DECREF(cache);
    if (r && r != Py_NotImplemented && !PyList_Check(r)) {
        PyErr_Format(PyExc_SystemError, "the shard hook returned %s, not a list",
                     Py_TYPE(r)->tp_name);
        Py_CLEAR(r);
    }
    return r;
}

PyMethodDef ext_sharded_methods[] = {
    {"take_block", py_take_block, METH_VARARGS,
     "take_block(global, starts, shape[, as_shape]) -> the block as an uncommitted Array (a "
     "view when contiguous), re-shaped to as_shape if given"},
    {"assemble", py_assemble, METH_VARARGS,
     "assemble(shape, [(Array, starts), ...]) -> a new Array with the blocks copied in"},
    {"make_sharded", py_make_sharded, METH_VARARGS,
     "make_sharded(global, sharding, shards) -> the global value as an Array carrying its shards"},
    {"run_on_devices", py_run_on_devices, METH_VARARGS,
     "run_on_devices(jaxpr, [(device_id, args), ...]) -> per run, its outputs (big runs are "
     "queued, so devices work at once)"},
    {"program_for_shard", py_program_for_shard, METH_VARARGS,
     "program_for_shard(jaxpr, global_shape, shard_shape) -> the elementwise program re-typed "
     "for one shard, or None"},
    {"set_shard_hook", py_set_shard_hook, METH_O,
     "set_shard_hook(fn): jit calls fn(jaxpr, leaves, cache) when an argument is sharded"},
    {NULL, NULL, 0, NULL},
};
