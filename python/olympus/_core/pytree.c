/* pytree.c — tree_flatten / tree_unflatten, the PyTreeDef type and the registry
 * of custom node types.
 *
 * A PyTreeDef is a flat C array of nodes in post-order (children before their
 * parent, the root last), like JAX's. Each node records its kind, its arity and
 * the size of its subtree, so flattening builtin containers makes no Python
 * calls and unflattening is one pass with a value stack.
 *
 * Nodes: tuple, list, dict (children in sorted key order), None (a node with no
 * children), namedtuple (by type), registered types; everything else is a leaf.
 * Only exact types are containers: a list subclass is a leaf.
 */
#include "ext.h"

/* Function pointers in PyType_Slot (a void *): ISO C has no such conversion. */
#define FN_SLOT(f) (__extension__(void *)(f))

enum { K_LEAF, K_NONE, K_TUPLE, K_LIST, K_DICT, K_NAMEDTUPLE, K_CUSTOM };

typedef struct tnode {
    int kind;
    Py_ssize_t arity;      /* number of children */
    Py_ssize_t n_leaves;   /* leaves in this subtree */
    Py_ssize_t n_nodes;    /* nodes in this subtree, this one included */
    PyObject *data;        /* owned: DICT sorted keys (list), NAMEDTUPLE type, CUSTOM aux data */
    PyObject *reg;         /* owned: CUSTOM registration tuple (type, flatten, unflatten) */
} tnode;

typedef struct TreeDef {
    PyObject_HEAD
    Py_ssize_t n_nodes;
    Py_ssize_t n_leaves;
    Py_hash_t hash;        /* -1: not computed yet */
    tnode *nodes;          /* owned (PyMem), n_nodes entries, post-order */
} TreeDef;

static PyTypeObject *TreeDef_Type;  /* owned: also stored in ext_st */
static PyObject *registry;          /* owned: dict type -> (type, flatten, unflatten) */

static void node_clear(tnode *n)
{
    Py_CLEAR(n->data);
    Py_CLEAR(n->reg);
}

/* ---------------------------------------------------------------- builder */

typedef struct nodebuf {
    tnode *v;
    Py_ssize_t n, cap;
    tnode small[32];
} nodebuf;

static void buf_init(nodebuf *b)
{
    b->v = b->small;
    b->n = 0;
    b->cap = (Py_ssize_t)(sizeof b->small / sizeof b->small[0]);
}

static void buf_free(nodebuf *b)
{
    for (Py_ssize_t i = 0; i < b->n; i++) node_clear(&b->v[i]);
    if (b->v != b->small) PyMem_Free(b->v);
    b->v = b->small;
    b->n = 0;
}

/* Appends a node (stealing data and reg) or fails with MemoryError (then the
 * references are dropped). */
static int buf_push(nodebuf *b, int kind, Py_ssize_t arity, Py_ssize_t n_leaves,
                    Py_ssize_t n_nodes, PyObject *data, PyObject *reg)
{
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap * 2;
        tnode *v = PyMem_Malloc((size_t)cap * sizeof *v);
        if (!v) {
            Py_XDECREF(data);
            Py_XDECREF(reg);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(v, b->v, (size_t)b->n * sizeof *v);
        if (b->v != b->small) PyMem_Free(b->v);
        b->v = v;
        b->cap = cap;
    }
    tnode *n = &b->v[b->n++];
    n->kind = kind;
    n->arity = arity;
    n->n_leaves = n_leaves;
    n->n_nodes = n_nodes;
    n->data = data;
    n->reg = reg;
    return 0;
}

/* New TreeDef owning copies of nodes[0..n) (references retained). */
static PyObject *treedef_from_nodes(const tnode *nodes, Py_ssize_t n)
{
    TreeDef *t = PyObject_GC_New(TreeDef, TreeDef_Type);
    if (!t) return NULL;
    t->n_nodes = 0;
    t->n_leaves = 0;
    t->hash = -1;
    t->nodes = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof *nodes);
    if (!t->nodes) {
        Py_DECREF(t);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        t->nodes[i] = nodes[i];
        Py_XINCREF(nodes[i].data);
        Py_XINCREF(nodes[i].reg);
    }
    t->n_nodes = n;
    t->n_leaves = n > 0 ? nodes[n - 1].n_leaves : 0;
    PyObject_GC_Track((PyObject *)t);
    return (PyObject *)t;
}

/* ---------------------------------------------------------------- flatten */

static int is_namedtuple(PyObject *o)
{
    if (!PyTuple_Check(o)) return 0;
    return PyObject_HasAttrString((PyObject *)Py_TYPE(o), "_fields");
}

static int flatten_rec(nodebuf *b, PyObject *obj, PyObject *is_leaf, PyObject *leaves);

/* Flattens the items of seq (borrowed array of n) as children. */
static int flatten_children(nodebuf *b, PyObject *const *items, Py_ssize_t n, PyObject *is_leaf,
                            PyObject *leaves, Py_ssize_t *n_leaves, Py_ssize_t *n_nodes)
{
    Py_ssize_t l0 = PyList_GET_SIZE(leaves), n0 = b->n;
    for (Py_ssize_t i = 0; i < n; i++)
        if (flatten_rec(b, items[i], is_leaf, leaves) < 0) return -1;
    *n_leaves = PyList_GET_SIZE(leaves) - l0;
    *n_nodes = b->n - n0 + 1;
    return 0;
}

static int flatten_dict(nodebuf *b, PyObject *obj, PyObject *is_leaf, PyObject *leaves)
{
    PyObject *keys = PyDict_Keys(obj);
    if (!keys) return -1;
    if (PyList_Sort(keys) < 0) {
        Py_DECREF(keys);
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    Py_ssize_t l0 = PyList_GET_SIZE(leaves), n0 = b->n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyDict_GetItemWithError(obj, PyList_GET_ITEM(keys, i));
        if (!v) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "dictionary changed during tree_flatten");
            Py_DECREF(keys);
            return -1;
        }
        Py_INCREF(v);
        int rc = flatten_rec(b, v, is_leaf, leaves);
        Py_DECREF(v);
        if (rc < 0) {
            Py_DECREF(keys);
            return -1;
        }
    }
    return buf_push(b, K_DICT, n, PyList_GET_SIZE(leaves) - l0, b->n - n0 + 1, keys, NULL);
}

static int flatten_custom(nodebuf *b, PyObject *obj, PyObject *reg, PyObject *is_leaf,
                          PyObject *leaves)
{
    PyObject *res = PyObject_CallOneArg(PyTuple_GET_ITEM(reg, 1), obj);
    if (!res) return -1;
    if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2) {
        PyErr_Format(PyExc_TypeError,
                     "the flatten function registered for %s must return a pair "
                     "(children, aux_data), got %.200R",
                     ((PyTypeObject *)PyTuple_GET_ITEM(reg, 0))->tp_name, res);
        Py_DECREF(res);
        return -1;
    }
    PyObject *children = PySequence_Fast(PyTuple_GET_ITEM(res, 0),
                                         "the children returned by a pytree flatten "
                                         "function must be iterable");
    if (!children) {
        Py_DECREF(res);
        return -1;
    }
    PyObject *aux = PyTuple_GET_ITEM(res, 1);
    Py_INCREF(aux);
    Py_DECREF(res);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(children), nl, nn;
    int rc = flatten_children(b, PySequence_Fast_ITEMS(children), n, is_leaf, leaves, &nl, &nn);
    Py_DECREF(children);
    if (rc < 0) {
        Py_DECREF(aux);
        return -1;
    }
    Py_INCREF(reg);
    return buf_push(b, K_CUSTOM, n, nl, nn, aux, reg);
}

static int flatten_rec(nodebuf *b, PyObject *obj, PyObject *is_leaf, PyObject *leaves)
{
    if (is_leaf) {
        PyObject *r = PyObject_CallOneArg(is_leaf, obj);
        if (!r) return -1;
        int t = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (t < 0) return -1;
        if (t) {
            if (PyList_Append(leaves, obj) < 0) return -1;
            return buf_push(b, K_LEAF, 0, 1, 1, NULL, NULL);
        }
    }
    if (obj == Py_None) return buf_push(b, K_NONE, 0, 0, 1, NULL, NULL);

    PyTypeObject *tp = Py_TYPE(obj);
    int kind;
    PyObject *reg = NULL;
    if (tp == &PyTuple_Type) kind = K_TUPLE;
    else if (tp == &PyList_Type) kind = K_LIST;
    else if (tp == &PyDict_Type) kind = K_DICT;
    else {
        reg = PyDict_GetItemWithError(registry, (PyObject *)tp);
        if (reg) kind = K_CUSTOM;
        else if (PyErr_Occurred()) return -1;
        else if (is_namedtuple(obj)) kind = K_NAMEDTUPLE;
        else kind = K_LEAF;
    }
    if (kind == K_LEAF) {
        if (PyList_Append(leaves, obj) < 0) return -1;
        return buf_push(b, K_LEAF, 0, 1, 1, NULL, NULL);
    }

    if (Py_EnterRecursiveCall(" in tree_flatten")) return -1;
    int rc;
    Py_ssize_t nl, nn;
    switch (kind) {
    case K_TUPLE:
    case K_NAMEDTUPLE: {
        Py_ssize_t n = PyTuple_GET_SIZE(obj);
        rc = flatten_children(b, &PyTuple_GET_ITEM(obj, 0), n, is_leaf, leaves, &nl, &nn);
        if (rc == 0) {
            PyObject *data = NULL;
            if (kind == K_NAMEDTUPLE) {
                data = (PyObject *)tp;
                Py_INCREF(data);
            }
            rc = buf_push(b, kind, n, nl, nn, data, NULL);
        }
        break;
    }
    case K_LIST: {
        /* A copy of the items: a leaf's is_leaf or a custom flatten could mutate the list. */
        PyObject *items = PySequence_Tuple(obj);
        if (!items) {
            rc = -1;
            break;
        }
        Py_ssize_t n = PyTuple_GET_SIZE(items);
        rc = flatten_children(b, &PyTuple_GET_ITEM(items, 0), n, is_leaf, leaves, &nl, &nn);
        Py_DECREF(items);
        if (rc == 0) rc = buf_push(b, K_LIST, n, nl, nn, NULL, NULL);
        break;
    }
    case K_DICT:
        rc = flatten_dict(b, obj, is_leaf, leaves);
        break;
    default:
        Py_INCREF(reg);
        rc = flatten_custom(b, obj, reg, is_leaf, leaves);
        Py_DECREF(reg);
        break;
    }
    Py_LeaveRecursiveCall();
    return rc;
}

int ext_tree_flatten(PyObject *tree, PyObject *is_leaf, PyObject **leaves_out,
                     PyObject **treedef_out)
{
    if (is_leaf == Py_None) is_leaf = NULL;
    PyObject *leaves = PyList_New(0);
    if (!leaves) return -1;
    nodebuf b;
    buf_init(&b);
    if (flatten_rec(&b, tree, is_leaf, leaves) < 0) {
        buf_free(&b);
        Py_DECREF(leaves);
        return -1;
    }
    PyObject *td = treedef_from_nodes(b.v, b.n);
    buf_free(&b);
    if (!td) {
        Py_DECREF(leaves);
        return -1;
    }
    *leaves_out = leaves;
    *treedef_out = td;
    return 0;
}

/* ---------------------------------------------------------------- unflatten */

static PyObject *build_node(const tnode *n, PyObject **kids)
{
    /* kids: n->arity new references, consumed on success and failure. */
    Py_ssize_t k = n->arity;
    PyObject *out = NULL;
    switch (n->kind) {
    case K_NONE:
        Py_RETURN_NONE;
    case K_TUPLE:
    case K_NAMEDTUPLE:
    case K_CUSTOM: {
        PyObject *t = PyTuple_New(k);
        if (!t) goto fail;
        for (Py_ssize_t i = 0; i < k; i++) PyTuple_SET_ITEM(t, i, kids[i]);
        if (n->kind == K_TUPLE) return t;
        if (n->kind == K_NAMEDTUPLE) out = PyObject_Call(n->data, t, NULL);
        else out = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(n->reg, 2), n->data, t, NULL);
        Py_DECREF(t);
        return out;
    }
    case K_LIST: {
        PyObject *l = PyList_New(k);
        if (!l) goto fail;
        for (Py_ssize_t i = 0; i < k; i++) PyList_SET_ITEM(l, i, kids[i]);
        return l;
    }
    case K_DICT: {
        PyObject *d = PyDict_New();
        if (!d) goto fail;
        for (Py_ssize_t i = 0; i < k; i++) {
            if (PyDict_SetItem(d, PyList_GET_ITEM(n->data, i), kids[i]) < 0) {
                Py_DECREF(d);
                goto fail;
            }
        }
        for (Py_ssize_t i = 0; i < k; i++) Py_DECREF(kids[i]);
        return d;
    }
    default:
        PyErr_SetString(PyExc_SystemError, "PyTreeDef: bad node kind");
        goto fail;
    }
fail:
    for (Py_ssize_t i = 0; i < k; i++) Py_DECREF(kids[i]);
    return NULL;
}

static PyObject *unflatten_nodes(const tnode *nodes, Py_ssize_t n_nodes, Py_ssize_t n_leaves,
                                 PyObject *leaves_obj)
{
    PyObject *seq = PySequence_Fast(leaves_obj, "tree_unflatten: leaves must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t got = PySequence_Fast_GET_SIZE(seq);
    if (got != n_leaves) {
        PyErr_Format(PyExc_ValueError, "Too %s leaves for PyTreeDef; expected %zd, got %zd",
                     got < n_leaves ? "few" : "many", n_leaves, got);
        Py_DECREF(seq);
        return NULL;
    }
    PyObject **leaves = PySequence_Fast_ITEMS(seq);
    PyObject *small[64];
    PyObject **stack = n_nodes <= 64 ? small : PyMem_Malloc((size_t)n_nodes * sizeof *stack);
    if (!stack) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_ssize_t sp = 0, li = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < n_nodes; i++) {
        const tnode *n = &nodes[i];
        if (n->kind == K_LEAF) {
            Py_INCREF(leaves[li]);
            stack[sp++] = leaves[li++];
            continue;
        }
        sp -= n->arity;
        PyObject *o = build_node(n, &stack[sp]);
        if (!o) goto done;
        stack[sp++] = o;
    }
    if (sp == 1) {
        result = stack[0];
        sp = 0;
    } else {
        PyErr_SetString(PyExc_SystemError, "PyTreeDef: malformed node list");
    }
done:
    for (Py_ssize_t i = 0; i < sp; i++) Py_DECREF(stack[i]);
    if (stack != small) PyMem_Free(stack);
    Py_DECREF(seq);
    return result;
}

static int check_treedef(PyObject *o)
{
    if (TreeDef_Type && Py_IS_TYPE(o, TreeDef_Type)) return 0;
    PyErr_Format(PyExc_TypeError, "expected a PyTreeDef, got %.200s", Py_TYPE(o)->tp_name);
    return -1;
}

PyObject *ext_tree_unflatten(PyObject *treedef, PyObject *leaves)
{
    if (check_treedef(treedef) < 0) return NULL;
    TreeDef *t = (TreeDef *)treedef;
    return unflatten_nodes(t->nodes, t->n_nodes, t->n_leaves, leaves);
}

Py_ssize_t ext_treedef_num_leaves(PyObject *treedef)
{
    if (check_treedef(treedef) < 0) return -1;
    return ((TreeDef *)treedef)->n_leaves;
}

/* ---------------------------------------------------------------- PyTreeDef type */

static int TreeDef_traverse(PyObject *self, visitproc visit, void *arg)
{
    TreeDef *t = (TreeDef *)self;
    Py_VISIT(Py_TYPE(self));
    for (Py_ssize_t i = 0; i < t->n_nodes; i++) {
        Py_VISIT(t->nodes[i].data);
        Py_VISIT(t->nodes[i].reg);
    }
    return 0;
}

static int TreeDef_clear(PyObject *self)
{
    TreeDef *t = (TreeDef *)self;
    for (Py_ssize_t i = 0; i < t->n_nodes; i++) node_clear(&t->nodes[i]);
    return 0;
}

static void TreeDef_dealloc(PyObject *self)
{
    TreeDef *t = (TreeDef *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    TreeDef_clear(self);
    PyMem_Free(t->nodes);
    t->nodes = NULL;
    PyObject_GC_Del(self);
    Py_DECREF(tp);
}

static PyObject *TreeDef_unflatten(PyObject *self, PyObject *leaves)
{
    return ext_tree_unflatten(self, leaves);
}

static PyObject *TreeDef_children(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    TreeDef *t = (TreeDef *)self;
    if (t->n_nodes == 0) return PyList_New(0);
    const tnode *root = &t->nodes[t->n_nodes - 1];
    PyObject *out = PyList_New(root->arity);
    if (!out) return NULL;
    Py_ssize_t end = t->n_nodes - 1; /* one past the last node of the current child */
    for (Py_ssize_t k = root->arity - 1; k >= 0; k--) {
        Py_ssize_t size = t->nodes[end - 1].n_nodes;
        PyObject *child = treedef_from_nodes(&t->nodes[end - size], size);
        if (!child) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, child);
        end -= size;
    }
    return out;
}

static PyObject *TreeDef_get_num_leaves(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(((TreeDef *)self)->n_leaves);
}

static PyObject *TreeDef_get_num_nodes(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(((TreeDef *)self)->n_nodes);
}

/* 1 equal, 0 not, -1 error. */
static int treedef_equal(const TreeDef *a, const TreeDef *b)
{
    if (a == b) return 1;
    if (a->n_nodes != b->n_nodes || a->n_leaves != b->n_leaves) return 0;
    for (Py_ssize_t i = 0; i < a->n_nodes; i++) {
        const tnode *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->kind != y->kind || x->arity != y->arity) return 0;
        switch (x->kind) {
        case K_NAMEDTUPLE:
            if (x->data != y->data) return 0;
            break;
        case K_CUSTOM:
            /* Same registered type, then equal aux data (as for dict keys). */
            if (PyTuple_GET_ITEM(x->reg, 0) != PyTuple_GET_ITEM(y->reg, 0)) return 0;
            /* fallthrough */
        case K_DICT: {
            int eq = PyObject_RichCompareBool(x->data, y->data, Py_EQ);
            if (eq <= 0) return eq;
            break;
        }
        default:
            break;
        }
    }
    return 1;
}

static PyObject *TreeDef_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(b, Py_TYPE(a))) Py_RETURN_NOTIMPLEMENTED;
    int eq = treedef_equal((TreeDef *)a, (TreeDef *)b);
    if (eq < 0) return NULL;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static Py_uhash_t hash_mix(Py_uhash_t h, Py_uhash_t v)
{
    return (h ^ v) * 1000003u + 0x9e3779b9u;
}

/* Structure, node types and dict keys; custom aux data only through equality
 * (it need not be hashable). */
static Py_hash_t TreeDef_hash(PyObject *self)
{
    TreeDef *t = (TreeDef *)self;
    if (t->hash != -1) return t->hash;
    Py_uhash_t h = 0x345678u;
    for (Py_ssize_t i = 0; i < t->n_nodes; i++) {
        const tnode *n = &t->nodes[i];
        h = hash_mix(h, (Py_uhash_t)n->kind);
        h = hash_mix(h, (Py_uhash_t)n->arity);
        if (n->kind == K_NAMEDTUPLE) {
            h = hash_mix(h, (Py_uhash_t)(uintptr_t)n->data);
        } else if (n->kind == K_CUSTOM) {
            h = hash_mix(h, (Py_uhash_t)(uintptr_t)PyTuple_GET_ITEM(n->reg, 0));
        } else if (n->kind == K_DICT) {
            for (Py_ssize_t k = 0; k < n->arity; k++) {
                Py_hash_t kh = PyObject_Hash(PyList_GET_ITEM(n->data, k));
                if (kh == -1) return -1;
                h = hash_mix(h, (Py_uhash_t)kh);
            }
        }
    }
    Py_hash_t r = (Py_hash_t)h;
    if (r == -1) r = -2;
    t->hash = r;
    return r;
}

/* ---- repr: the JAX form, e.g. PyTreeDef((*, {'a': *})) */

static PyObject *join_kids(PyObject **kids, Py_ssize_t k)
{
    PyObject *sep = PyUnicode_FromString(", ");
    if (!sep) return NULL;
    PyObject *lst = PyList_New(k);
    if (!lst) {
        Py_DECREF(sep);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_INCREF(kids[i]);
        PyList_SET_ITEM(lst, i, kids[i]);
    }
    PyObject *s = PyUnicode_Join(sep, lst);
    Py_DECREF(sep);
    Py_DECREF(lst);
    return s;
}

static PyObject *repr_node(const tnode *n, PyObject **kids)
{
    Py_ssize_t k = n->arity;
    switch (n->kind) {
    case K_NONE:
        return PyUnicode_FromString("None");
    case K_TUPLE: {
        PyObject *j = join_kids(kids, k);
        if (!j) return NULL;
        PyObject *s = PyUnicode_FromFormat(k == 1 ? "(%U,)" : "(%U)", j);
        Py_DECREF(j);
        return s;
    }
    case K_LIST: {
        PyObject *j = join_kids(kids, k);
        if (!j) return NULL;
        PyObject *s = PyUnicode_FromFormat("[%U]", j);
        Py_DECREF(j);
        return s;
    }
    case K_DICT:
    case K_NAMEDTUPLE: {
        PyObject *fields = NULL;
        if (n->kind == K_NAMEDTUPLE) {
            fields = PyObject_GetAttrString(n->data, "_fields");
            if (!fields) return NULL;
            PyObject *f = PySequence_Tuple(fields);
            Py_DECREF(fields);
            if (!f) return NULL;
            fields = f;
            if (PyTuple_GET_SIZE(fields) != k) {
                Py_DECREF(fields);
                PyErr_SetString(PyExc_ValueError, "namedtuple _fields do not match its arity");
                return NULL;
            }
        }
        PyObject *parts = PyList_New(k);
        if (!parts) {
            Py_XDECREF(fields);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < k; i++) {
            PyObject *p = n->kind == K_DICT
                              ? PyUnicode_FromFormat("%R: %U", PyList_GET_ITEM(n->data, i), kids[i])
                              : PyUnicode_FromFormat("%S=%U", PyTuple_GET_ITEM(fields, i), kids[i]);
            if (!p) {
                Py_DECREF(parts);
                Py_XDECREF(fields);
                return NULL;
            }
            PyList_SET_ITEM(parts, i, p);
        }
        Py_XDECREF(fields);
        PyObject *j = join_kids(&PyList_GET_ITEM(parts, 0), k);
        Py_DECREF(parts);
        if (!j) return NULL;
        PyObject *s;
        if (n->kind == K_DICT) {
            s = PyUnicode_FromFormat("{%U}", j);
        } else {
            PyObject *name = PyObject_GetAttrString(n->data, "__name__");
            s = name ? PyUnicode_FromFormat("%S(%U)", name, j) : NULL;
            Py_XDECREF(name);
        }
        Py_DECREF(j);
        return s;
    }
    case K_CUSTOM: {
        PyObject *j = join_kids(kids, k);
        if (!j) return NULL;
        PyObject *name = PyObject_GetAttrString(PyTuple_GET_ITEM(n->reg, 0), "__name__");
        PyObject *s = name ? PyUnicode_FromFormat("CustomNode(%S[%R], [%U])", name, n->data, j)
                           : NULL;
        Py_XDECREF(name);
        Py_DECREF(j);
        return s;
    }
    default:
        return PyUnicode_FromString("*");
    }
}

static PyObject *TreeDef_repr(PyObject *self)
{
    TreeDef *t = (TreeDef *)self;
    if (t->n_nodes == 0) return PyUnicode_FromString("PyTreeDef(None)");
    PyObject **stack = PyMem_Malloc((size_t)t->n_nodes * sizeof *stack);
    if (!stack) return PyErr_NoMemory();
    Py_ssize_t sp = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < t->n_nodes; i++) {
        const tnode *n = &t->nodes[i];
        PyObject *s;
        if (n->kind == K_LEAF) {
            s = PyUnicode_FromString("*");
        } else {
            sp -= n->arity;
            s = repr_node(n, &stack[sp]);
            for (Py_ssize_t k = 0; k < n->arity; k++) Py_DECREF(stack[sp + k]);
        }
        if (!s) goto done;
        stack[sp++] = s;
    }
    if (sp == 1) result = PyUnicode_FromFormat("PyTreeDef(%U)", stack[0]);
done:
    for (Py_ssize_t i = 0; i < sp; i++) Py_DECREF(stack[i]);
    PyMem_Free(stack);
    return result;
}

static PyMethodDef TreeDef_methods[] = {
    {"unflatten", TreeDef_unflatten, METH_O,
     "unflatten(leaves): the tree of this structure with these leaves."},
    {"children", TreeDef_children, METH_NOARGS,
     "children(): the PyTreeDefs of the root's children."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef TreeDef_getset[] = {
    {"num_leaves", TreeDef_get_num_leaves, NULL, "number of leaves", NULL},
    {"num_nodes", TreeDef_get_num_nodes, NULL, "number of nodes, leaves included", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot TreeDef_slots[] = {
    {Py_tp_dealloc, FN_SLOT(TreeDef_dealloc)},
    {Py_tp_traverse, FN_SLOT(TreeDef_traverse)},
    {Py_tp_clear, FN_SLOT(TreeDef_clear)},
    {Py_tp_repr, FN_SLOT(TreeDef_repr)},
    {Py_tp_hash, FN_SLOT(TreeDef_hash)},
    {Py_tp_richcompare, FN_SLOT(TreeDef_richcompare)},
    {Py_tp_methods, TreeDef_methods},
    {Py_tp_getset, TreeDef_getset},
    {Py_tp_doc, (void *)"The structure of a pytree: tree_flatten's second result."},
    {0, NULL},
};

static PyType_Spec TreeDef_spec = {
    .name = "olympus._core.PyTreeDef",
    .basicsize = sizeof(TreeDef),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = TreeDef_slots,
};

/* ---------------------------------------------------------------- module functions */

/* (tree, is_leaf=None) from a vectorcall: the common one-argument call parses nothing. */
static int parse_tree_args(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, PyObject **tree, PyObject **is_leaf)
{
    *tree = nargs >= 1 ? args[0] : NULL;
    *is_leaf = nargs >= 2 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2) goto usage;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(name, "is_leaf") == 0) slot = is_leaf;
        else if (PyUnicode_CompareWithASCIIString(name, "tree") == 0) slot = tree;
        if (!slot || *slot) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected or repeated keyword argument %R",
                         fname, name);
            return -1;
        }
        *slot = args[nargs + k];
    }
    if (!*tree) goto usage;
    if (!*is_leaf) *is_leaf = Py_None;
    return 0;
usage:
    PyErr_Format(PyExc_TypeError, "%s(tree, is_leaf=None): takes 1 or 2 arguments (%zd given)",
                 fname, nargs + nkw);
    return -1;
}

static PyObject *py_tree_flatten(PyObject *Py_UNUSED(m), PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    PyObject *tree, *is_leaf;
    if (parse_tree_args("tree_flatten", args, PyVectorcall_NARGS(nargsf), kwnames, &tree,
                        &is_leaf) < 0)
        return NULL;
    PyObject *leaves, *td;
    if (ext_tree_flatten(tree, is_leaf, &leaves, &td) < 0) return NULL;
    PyObject *r = PyTuple_New(2);
    if (!r) {
        Py_DECREF(leaves);
        Py_DECREF(td);
        return NULL;
    }
    PyTuple_SET_ITEM(r, 0, leaves);
    PyTuple_SET_ITEM(r, 1, td);
    return r;
}

static PyObject *py_tree_leaves(PyObject *Py_UNUSED(m), PyObject *const *args, size_t nargsf,
                                PyObject *kwnames)
{
    PyObject *tree, *is_leaf;
    if (parse_tree_args("tree_leaves", args, PyVectorcall_NARGS(nargsf), kwnames, &tree,
                        &is_leaf) < 0)
        return NULL;
    PyObject *leaves, *td;
    if (ext_tree_flatten(tree, is_leaf, &leaves, &td) < 0) return NULL;
    Py_DECREF(td);
    return leaves;
}

static PyObject *py_tree_unflatten(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t n)
{
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "tree_unflatten(treedef, leaves) takes 2 arguments");
        return NULL;
    }
    return ext_tree_unflatten(args[0], args[1]);
}

static PyObject *py_register_pytree_node(PyObject *Py_UNUSED(m), PyObject *const *args,
                                         Py_ssize_t n)
{
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "register_pytree_node(type, flatten_fn, unflatten_fn) takes 3 arguments");
        return NULL;
    }
    PyObject *tp = args[0];
    if (!PyType_Check(tp)) {
        PyErr_Format(PyExc_TypeError, "register_pytree_node: expected a type, got %.200R", tp);
        return NULL;
    }
    if (!PyCallable_Check(args[1]) || !PyCallable_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "register_pytree_node: flatten_fn and unflatten_fn must be callable");
        return NULL;
    }
    int dup = PyDict_Contains(registry, tp);
    if (dup < 0) return NULL;
    if (dup || tp == (PyObject *)&PyTuple_Type || tp == (PyObject *)&PyList_Type ||
        tp == (PyObject *)&PyDict_Type || tp == (PyObject *)Py_TYPE(Py_None)) {
        PyErr_Format(PyExc_ValueError, "Duplicate custom PyTreeDef type registration for %R.", tp);
        return NULL;
    }
    PyObject *reg = PyTuple_Pack(3, tp, args[1], args[2]);
    if (!reg) return NULL;
    int rc = PyDict_SetItem(registry, tp, reg);
    Py_DECREF(reg);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_treedef_is_leaf(PyObject *Py_UNUSED(m), PyObject *td)
{
    if (check_treedef(td) < 0) return NULL;
    TreeDef *t = (TreeDef *)td;
    return PyBool_FromLong(t->n_nodes == 1 && t->nodes[0].kind == K_LEAF);
}

PyMethodDef ext_pytree_methods[] = {
    {"tree_flatten", (PyCFunction)(void (*)(void))py_tree_flatten, METH_FASTCALL | METH_KEYWORDS,
     "tree_flatten(tree, is_leaf=None) -> (leaves, treedef)"},
    {"tree_leaves", (PyCFunction)(void (*)(void))py_tree_leaves, METH_FASTCALL | METH_KEYWORDS,
     "tree_leaves(tree, is_leaf=None) -> leaves"},
    {"tree_unflatten", (PyCFunction)(void (*)(void))py_tree_unflatten, METH_FASTCALL,
     "tree_unflatten(treedef, leaves) -> tree"},
    {"register_pytree_node", (PyCFunction)(void (*)(void))py_register_pytree_node, METH_FASTCALL,
     "register_pytree_node(type, flatten_fn, unflatten_fn): flatten_fn(x) -> (children, aux); "
     "unflatten_fn(aux, children) -> x"},
    {"treedef_is_leaf", py_treedef_is_leaf, METH_O,
     "treedef_is_leaf(treedef): True when the structure is a single leaf"},
    {NULL, NULL, 0, NULL},
};

int ext_pytree_init(PyObject *module)
{
    if (!registry) {
        registry = PyDict_New();
        if (!registry) return -1;
    }
    if (!TreeDef_Type) {
        TreeDef_Type = (PyTypeObject *)PyType_FromSpec(&TreeDef_spec);
        if (!TreeDef_Type) return -1;
    }
    if (ext_st) ext_st->PyTreeDef_Type = TreeDef_Type;
    Py_INCREF(TreeDef_Type);
    if (PyModule_AddObject(module, "PyTreeDef", (PyObject *)TreeDef_Type) < 0) {
        Py_DECREF(TreeDef_Type);
        return -1;
    }
    return 0;
}
