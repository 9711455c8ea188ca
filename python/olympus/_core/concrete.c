/* concrete.c — the values of concrete traces (autodiff outside jit; docs/design.md,
 * "Concrete autodiff").
 *
 * A Tracer of a concrete trace has a *source*: its value, or an output of a
 * lazy operation that computes it. Staging an operation whose inputs all have
 * sources makes one lazy node (the operation as a one-equation program, or the
 * program inlined, plus its inputs' sources); nothing runs until a value is
 * asked for (bool, int, float, index, item). Then the node and the nodes it
 * needs run once, in dependency order, and keep their outputs. So a function
 * without Python control flow on values computes nothing twice: its program
 * runs once, transformed, as before; one with control flow computes only the
 * values it asks for (and their inputs), once each.
 *
 * Nodes hold arrays and other nodes, never Python objects, and nothing of the
 * trace's builder, so a value can still be asked for after its trace has
 * closed (custom rules are traced then). The graph is acyclic: a node only
 * refers to nodes made before it. Running a node drops its inputs, so the
 * graph behind a computed value is freed. Everything here runs with the GIL.
 */
#include "ext.h"

struct ext_lazy {
    long refcnt;            /* one per source that refers to it */
    oly_program *prog;      /* owned; NULL once run */
    ext_source *in;         /* owned (PyMem), n_in; NULL once run */
    int n_in, n_out;
    oly_array **out;        /* owned (PyMem), n_out; NULL until run */
    ext_lazy *next;         /* a free list, only while lazy_decref frees */
};

/* Drops one reference to l. Iterative: dropping the last reference to a long
 * chain of nodes must not recurse once per node. */
static void lazy_decref(ext_lazy *l)
{
    if (!l || --l->refcnt > 0) return;
    l->next = NULL;
    while (l) {
        ext_lazy *d = l;
        l = d->next;
        for (int i = 0; d->in && i < d->n_in; i++) {
            oly_array_release(d->in[i].value);
            ext_lazy *u = d->in[i].node;
            if (u && --u->refcnt == 0) {
                u->next = l;
                l = u;
            }
        }
        for (int i = 0; d->out && i < d->n_out; i++) oly_array_release(d->out[i]);
        oly_program_release(d->prog);
        PyMem_Free(d->in);
        PyMem_Free(d->out);
        PyMem_Free(d);
    }
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

/* Runs l, whose input nodes have all run: keeps its outputs, drops its
 * program and inputs. While it runs, l has neither program nor outputs, so a
 * request for it from inside the run (a host callback asking for a traced
 * value) fails instead of running it twice. 0, or -1 with an exception (l is
 * left as it was). */
static int lazy_exec(ext_lazy *l)
{
    if (!l->prog) {
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
    for (int i = 0; i < l->n_in; i++) {
        const ext_source *s = &l->in[i];
        in[i] = s->value ? s->value : s->node->out[s->index];
    }
    oly_program *prog = l->prog;
    l->prog = NULL;
    int r = ext_program_run_arrays(prog, in, l->n_in, out);
    PyMem_Free(in);
    if (r < 0) {
        l->prog = prog;
        PyMem_Free(out);
        return -1;
    }
    oly_program_release(prog);
    l->out = out;
    ext_source *inputs = l->in;
    int n_in = l->n_in;
    l->in = NULL;
    for (int i = 0; i < n_in; i++) ext_source_clear(&inputs[i]);
    PyMem_Free(inputs);
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
        if (l->out) {
            n--;
            continue;
        }
        bool ready = true;
        for (int i = 0; i < l->n_in; i++) {
            ext_lazy *u = l->in[i].node;
            if (!u || u->out) continue;
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
        if (ready) {
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
        if (!s->node->out && lazy_run(s->node) < 0) return -1;
        oly_array *v = oly_array_retain(s->node->out[s->index]);
        ext_source_clear(s); /* keep the value, let the graph behind it go */
        s->value = v;
    }
    *out = s->value;
    return s->value ? 1 : 0;
}

int ext_lazy_new(oly_program *prog, const ext_source *in, int n_in, ext_source *outs, int n_out)
{
    int have = oly_program_num_outputs(prog);
    if (n_out > have) {
        oly_program_release(prog);
        PyErr_Format(PyExc_SystemError, "ext_lazy_new: %d outputs asked of a program of %d",
                     n_out, have);
        return -1;
    }
    ext_lazy *l = PyMem_Calloc(1, sizeof *l);
    ext_source *ins = PyMem_Calloc((size_t)n_in + 1, sizeof *ins);
    if (!l || !ins) {
        PyMem_Free(l);
        PyMem_Free(ins);
        oly_program_release(prog);
        PyErr_NoMemory();
        return -1;
    }
    l->prog = prog;
    l->in = ins;
    l->n_in = n_in;
    l->n_out = have;
    for (int i = 0; i < n_in; i++) ext_source_copy(&ins[i], &in[i]);
    l->refcnt = 1; /* held while the outputs are handed out */
    for (int j = 0; j < n_out; j++) {
        ext_source_clear(&outs[j]);
        outs[j].node = l;
        outs[j].index = j;
        l->refcnt++;
    }
    lazy_decref(l);
    return 0;
}
