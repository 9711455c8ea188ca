/* concrete.c — the values of concrete traces (autodiff outside jit; docs/design.md,
 * "Concrete autodiff").
 *
 * A Tracer of a concrete trace has a *source*: its value, or an output of a
 * lazy operation that computes it. Staging an operation whose inputs all have
 * sources makes one lazy node (the primitive with a copy of its params, or a
 * program, plus its inputs' sources); nothing runs until a value is asked for
 * (bool, int, float, index, item). Then the node and the nodes it needs run
 * once, in dependency order, and keep their outputs. So a function without
 * Python control flow on values computes nothing twice: its program runs
 * once, transformed, as before; one with control flow computes only the
 * values it asks for (and their inputs), once each.
 *
 * Nodes hold arrays and other nodes, never Python objects, and nothing of the
 * trace's builder, so a value can still be asked for after its trace has
 * closed (custom rules are traced then). The graph is acyclic: a node only
 * refers to nodes made before it. Running a node drops its inputs, so the
 * graph behind a computed value is freed. Everything here runs with the GIL.
 */
#include "ext.h"

#include <string.h>

/* Applications reading more than this many bytes release the GIL (as tracer.c). */
#define GIL_RELEASE_BYTES ((size_t)1 << 20)

typedef enum lazy_state { LAZY_PENDING, LAZY_RUNNING, LAZY_DONE } lazy_state;

struct ext_lazy {
    long refcnt;            /* one per source that refers to it */
    lazy_state state;
    /* The operation, until it has run: a program, or (prog NULL) prim applied
     * with params through the eager cache (oly_apply). */
    oly_program *prog;      /* owned */
    const oly_prim *prim;
    void *params;           /* owned (PyMem): a copy of plain-data params, or NULL */
    ext_source *in;         /* owned (PyMem), n_in; NULL once run */
    int n_in, n_out;
    oly_array **out;        /* owned (PyMem), n_out; set when done */
    ext_lazy *next;         /* a free list, only while lazy_decref frees */
};

/* Drops l's operation and inputs (not its outputs); their nodes that lose
 * their last reference go on *dead. */
static void lazy_drop_inputs(ext_lazy *l, ext_lazy **dead)
{
    for (int i = 0; l->in && i < l->n_in; i++) {
        oly_array_release(l->in[i].value);
        ext_lazy *u = l->in[i].node;
        if (u && --u->refcnt == 0) {
            u->next = *dead;
            *dead = u;
        }
    }
    PyMem_Free(l->in);
    l->in = NULL;
    oly_program_release(l->prog);
    l->prog = NULL;
    PyMem_Free(l->params);
    l->params = NULL;
}

/* Frees the nodes on the list dead and those they alone held. Iterative: the
 * last reference to a long chain of nodes must not recurse once per node. */
static void lazy_free_all(ext_lazy *dead)
{
    while (dead) {
        ext_lazy *d = dead;
        dead = d->next;
        lazy_drop_inputs(d, &dead);
        for (int i = 0; d->out && i < d->n_out; i++) oly_array_release(d->out[i]);
        PyMem_Free(d->out);
        PyMem_Free(d);
    }
}

static void lazy_decref(ext_lazy *l)
{
    if (!l || --l->refcnt > 0) return;
    l->next = NULL;
    lazy_free_all(l);
}

void ext_source_clear(ext_source *s)
{
    oly_array_release(s->value);
    lazy_decref(s->node);
    s->value = NULL;
    s->node = NULL;
    s->index = 0;
}

bool ext_source_known(const ext_source *s) { return s->value || s->node; }

void ext_source_copy(ext_source *dst, const ext_source *src)
{
    ext_source old = *dst;
    dst->value = src->value ? oly_array_retain(src->value) : NULL;
    dst->node = src->node;
    if (dst->node) dst->node->refcnt++;
    dst->index = src->index;
    ext_source_clear(&old);
}

/* Runs the operation on in (n borrowed arrays) into out (l->n_out). */
static oly_status lazy_apply(ext_lazy *l, oly_array *const *in, oly_array **out)
{
    if (l->prog) return oly_program_run(l->prog, 0, in, l->n_in, out, l->n_out);
    int got = 0;
    oly_status s = oly_apply(l->prim, l->params, in, l->n_in, out, l->n_out, &got);
    if (s == OLY_OK && got != l->n_out) { /* the shape rule promised n_out */
        for (int i = 0; i < got && i < l->n_out; i++) oly_array_release(out[i]);
        s = oly_host_fail(OLY_ERR_INTERNAL, "%s: %d outputs, expected %d",
                          oly_prim_name(l->prim), got, l->n_out);
    }
    return s;
}

/* Runs l, whose input nodes are done: keeps its outputs, drops its operation
 * and inputs. While it runs, a request for it (a host callback asking for a
 * traced value) fails instead of running it twice. 0, or -1 with an exception
 * (l is pending again). */
static int lazy_exec(ext_lazy *l)
{
    if (l->state == LAZY_RUNNING) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a traced value was asked for while it was being computed");
        return -1;
    }
    oly_array **in = PyMem_Calloc((size_t)l->n_in + 1, sizeof *in);
    oly_array **out = PyMem_Calloc((size_t)l->n_out + 1, sizeof *out);
    if (!in || !out) {
        PyMem_Free(in);
        PyMem_Free(out);
        PyErr_NoMemory();
        return -1;
    }
    size_t bytes = 0;
    for (int i = 0; i < l->n_in; i++) {
        const ext_source *s = &l->in[i];
        in[i] = s->value ? s->value : s->node->out[s->index];
        bytes += oly_aval_nbytes(oly_array_aval(in[i]));
    }
    l->state = LAZY_RUNNING;
    oly_status s;
    if (bytes > GIL_RELEASE_BYTES) { /* large runs let other threads run */
        Py_BEGIN_ALLOW_THREADS
        s = lazy_apply(l, in, out);
        Py_END_ALLOW_THREADS
    } else {
        s = lazy_apply(l, in, out);
    }
    PyMem_Free(in);
    if (s != OLY_OK) {
        l->state = LAZY_PENDING;
        PyMem_Free(out);
        ext_raise(s);
        return -1;
    }
    l->state = LAZY_DONE;
    l->out = out;
    ext_lazy *dead = NULL;
    lazy_drop_inputs(l, &dead);
    lazy_free_all(dead);
    return 0;
}

/* Runs root and, first, every node it needs that has not run (an explicit
 * stack: a Python loop of many iterations makes long chains). 0, or -1 with
 * an exception. */
static int lazy_run(ext_lazy *root)
{
    Py_ssize_t n = 0, cap = 16;
    ext_lazy **stack = PyMem_Malloc((size_t)cap * sizeof *stack);
    if (!stack) {
        PyErr_NoMemory();
        return -1;
    }
    /* A node on the stack is held by the node that pushed it, which is below
     * it and has not run; root is held here for the run. */
    root->refcnt++;
    stack[n++] = root;
    int r = 0;
    while (n > 0 && r == 0) {
        ext_lazy *l = stack[n - 1];
        if (l->state == LAZY_DONE) {
            n--;
            continue;
        }
        bool ready = true;
        for (int i = 0; l->state == LAZY_PENDING && i < l->n_in; i++) {
            ext_lazy *u = l->in[i].node;
            if (!u || u->state == LAZY_DONE) continue;
            ready = false;
            if (n == cap) {
                ext_lazy **more = PyMem_Realloc(stack, (size_t)cap * 2 * sizeof *stack);
                if (!more) {
                    r = -1;
                    PyErr_NoMemory();
                    break;
                }
                stack = more;
                cap *= 2;
            }
            stack[n++] = u;
        }
        if (ready && r == 0) {
            r = lazy_exec(l);
            n--;
        }
    }
    PyMem_Free(stack);
    lazy_decref(root);
    return r;
}

int ext_source_value(ext_source *s, oly_array **out)
{
    *out = NULL;
    if (s->node) {
        if (s->node->state != LAZY_DONE && lazy_run(s->node) < 0) return -1;
        oly_array *v = oly_array_retain(s->node->out[s->index]);
        ext_source_clear(s); /* keep the value, let the graph behind it go */
        s->value = v;
    }
    *out = s->value;
    return s->value ? 1 : 0;
}

/* A pending node of n_in inputs (sources copied) and n_out outputs; outs[0..
 * n_set) (cleared first) are set to its first outputs. The operation is the
 * caller's to fill in. NULL with an exception. */
static ext_lazy *lazy_new(const ext_source *in, int n_in, int n_out, ext_source *outs, int n_set)
{
    if (n_set > n_out) {
        PyErr_Format(PyExc_SystemError, "ext_lazy: %d outputs asked of an operation of %d",
                     n_set, n_out);
        return NULL;
    }
    ext_lazy *l = PyMem_Calloc(1, sizeof *l);
    ext_source *ins = PyMem_Calloc((size_t)n_in + 1, sizeof *ins);
    if (!l || !ins) {
        PyMem_Free(l);
        PyMem_Free(ins);
        PyErr_NoMemory();
        return NULL;
    }
    l->state = LAZY_PENDING;
    l->in = ins;
    l->n_in = n_in;
    l->n_out = n_out;
    for (int i = 0; i < n_in; i++) ext_source_copy(&ins[i], &in[i]);
    for (int j = 0; j < n_set; j++) {
        ext_source_clear(&outs[j]);
        outs[j].node = l;
        outs[j].index = j;
        l->refcnt++;
    }
    return l;
}

int ext_lazy_of_program(oly_program *prog, const ext_source *in, int n_in, ext_source *outs,
                        int n_out)
{
    if (n_out == 0) return 0; /* nobody could ask for a value */
    ext_lazy *l = lazy_new(in, n_in, oly_program_num_outputs(prog), outs, n_out);
    if (!l) return -1;
    l->prog = oly_program_retain(prog);
    return 0;
}

/* True when p's params are plain data (no strings, arrays or references), so
 * a byte copy is a copy. */
static bool plain_params(const oly_prim *p)
{
    int n = 0;
    size_t size = 0;
    const oly_param_field *f = oly_prim_fields(p, &n, &size);
    for (int i = 0; i < n; i++)
        switch (f[i].kind) {
        case OLY_FIELD_INT:
        case OLY_FIELD_BOOL:
        case OLY_FIELD_FLOAT:
        case OLY_FIELD_DTYPE:
        case OLY_FIELD_INTS:
        case OLY_FIELD_ENUM:
            break;
        default:
            return false;
        }
    return true;
}

int ext_lazy_of_eqn(const oly_prim *p, const void *params, oly_program *const *subs, int n_sub,
                    const oly_aval *avals, const ext_source *in, int n_in, ext_source *outs,
                    int n_out)
{
    if (n_out == 0) return 0; /* nobody could ask for a value */
    if (n_sub > 0 || !plain_params(p) || oly_prim_num_outputs(p, params, n_in) != n_out) {
        /* Params holding references or bodies: copied into a program. */
        oly_program *prog = NULL;
        oly_status s = oly_program_of_eqn(p, params, avals, n_in, subs, n_sub, &prog);
        if (s != OLY_OK) return ext_raise(s), -1;
        int r = ext_lazy_of_program(prog, in, n_in, outs, n_out);
        oly_program_release(prog);
        return r;
    }
    int nf = 0;
    size_t size = 0;
    oly_prim_fields(p, &nf, &size);
    void *copy = NULL;
    if (size > 0) {
        copy = PyMem_Malloc(size);
        if (!copy) return PyErr_NoMemory(), -1;
        memcpy(copy, params, size);
    }
    ext_lazy *l = lazy_new(in, n_in, n_out, outs, n_out);
    if (!l) {
        PyMem_Free(copy);
        return -1;
    }
    l->prim = p;
    l->params = copy;
    return 0;
}
