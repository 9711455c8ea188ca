/* program.c — programs and avals as Python objects: Jaxpr and ShapedArray.
 *
 * Jaxpr wraps one oly_program, whoever made it (make_jaxpr, _core.trace, a
 * transform); str() is its text form. Its in_avals / out_avals are
 * ShapedArrays: a tuple (shape, numpy dtype, weak_type) with those names as
 * attributes, str() "f32[5]" and repr "ShapedArray(float32[5])" as in JAX.
 * Custom rules receive their avals as ShapedArrays too; anything with
 * .shape/.dtype, or a (shape, dtype[, weak]) tuple, is accepted back.
 */
#include "ext.h"

#include <string.h>

#define FN_SLOT(f) (__extension__(void *)(f))

typedef struct JaxprObject {
    PyObject_HEAD
    oly_program *prog;      /* owned */
    PyObject *out_treedef;  /* owned (NULL unless from make_jaxpr) */
} JaxprObject;

static PyTypeObject *Jaxpr_Type;       /* owned; also in ext_st */
static PyTypeObject *ShapedArray_Type; /* owned */

/* ---------------------------------------------------------------- ShapedArray */

void ext_format_shaped(char *buf, size_t n, const oly_aval *a)
{
    size_t k = (size_t)snprintf(buf, n, "%s[", oly_dtype_name(a->dtype));
    for (int i = 0; i < a->rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)a->dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

PyObject *ext_aval_new(const oly_aval *a)
{
    PyObject *shape = ext_shape_tuple(a);
    PyObject *dt = shape ? ext_dtype_to_numpy(a->dtype) : NULL;
    PyObject *o = dt ? ShapedArray_Type->tp_alloc(ShapedArray_Type, 3) : NULL;
    if (!o) {
        Py_XDECREF(shape);
        Py_XDECREF(dt);
        return NULL;
    }
    PyTuple_SET_ITEM(o, 0, shape);
    PyTuple_SET_ITEM(o, 1, dt);
    PyTuple_SET_ITEM(o, 2, Py_NewRef(a->weak ? Py_True : Py_False));
    return o;
}

int ext_aval_from_py(PyObject *o, oly_aval *out)
{
    PyObject *shape = NULL, *dtype = NULL, *weak = NULL;
    int r = -1;
    if (PyTuple_Check(o) && (PyTuple_GET_SIZE(o) == 2 || PyTuple_GET_SIZE(o) == 3)) {
        shape = Py_NewRef(PyTuple_GET_ITEM(o, 0));
        dtype = Py_NewRef(PyTuple_GET_ITEM(o, 1));
        if (PyTuple_GET_SIZE(o) == 3) weak = Py_NewRef(PyTuple_GET_ITEM(o, 2));
    } else {
        shape = PyObject_GetAttrString(o, "shape");
        dtype = shape ? PyObject_GetAttrString(o, "dtype") : NULL;
        if (!shape || !dtype) goto done;
        weak = PyObject_GetAttrString(o, "weak_type");
        if (!weak) PyErr_Clear();
    }
    memset(out, 0, sizeof *out);
    if (ext_dtype_from_py(dtype, &out->dtype) < 0) goto done;
    PyObject *seq = PySequence_Fast(shape, "shape must be a sequence of ints");
    if (!seq) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > OLY_MAX_RANK) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "rank %zd exceeds the maximum %d", n, OLY_MAX_RANK);
        goto done;
    }
    out->rank = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long d = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (d == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            goto done;
        }
        if (d < 0) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "negative dimension %lld", d);
            goto done;
        }
        out->dims[i] = d;
    }
    Py_DECREF(seq);
    if (weak) {
        int w = PyObject_IsTrue(weak);
        if (w < 0) goto done;
        out->weak = w != 0;
    }
    r = 0;
done:
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(weak);
    return r;
}

PyObject *ext_aval_repr(const oly_aval *a)
{
    char buf[512];
    ext_format_shaped(buf, sizeof buf, a);
    return PyUnicode_FromFormat("ShapedArray(%s%s)", buf, a->weak ? ", weak_type=True" : "");
}

static PyObject *ShapedArray_repr(PyObject *self)
{
    oly_aval a;
    if (ext_aval_from_py(self, &a) < 0) return NULL;
    return ext_aval_repr(&a);
}

static PyObject *ShapedArray_str(PyObject *self)
{
    oly_aval a;
    if (ext_aval_from_py(self, &a) < 0) return NULL;
    char buf[512];
    oly_aval_format(buf, sizeof buf, &a);
    return PyUnicode_FromString(buf);
}

/* closure: the tuple index of the field */
static PyObject *ShapedArray_field(PyObject *self, void *i)
{
    return Py_NewRef(PyTuple_GET_ITEM(self, (Py_ssize_t)(intptr_t)i));
}

static PyGetSetDef ShapedArray_getset[] = {
    {"shape", ShapedArray_field, NULL, "tuple of ints", (void *)0},
    {"dtype", ShapedArray_field, NULL, "numpy dtype", (void *)1},
    {"weak_type", ShapedArray_field, NULL, "bool: a Python scalar's type", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ShapedArray_slots[] = {
    {Py_tp_str, FN_SLOT(ShapedArray_str)},
    {Py_tp_repr, FN_SLOT(ShapedArray_repr)},
    {Py_tp_getset, ShapedArray_getset},
    {Py_tp_doc, (void *)"An abstract value: the tuple (shape, dtype, weak_type), fields by "
                        "name too; str() is the printer's form (\"f32[5]\")."},
    {0, NULL},
};

static PyType_Spec ShapedArray_spec = {
    .name = "olympus._core.ShapedArray",
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = ShapedArray_slots,
};

/* ---------------------------------------------------------------- Jaxpr */

PyObject *ext_program_wrap(oly_program *p, PyObject *out_treedef)
{
    JaxprObject *o = PyObject_New(JaxprObject, Jaxpr_Type);
    if (!o) {
        oly_program_release(p);
        return NULL;
    }
    o->prog = p;
    o->out_treedef = Py_XNewRef(out_treedef);
    return (PyObject *)o;
}

oly_program *ext_program_get(PyObject *o)
{
    if (!Jaxpr_Type || !PyObject_TypeCheck(o, Jaxpr_Type)) {
        PyErr_Format(PyExc_TypeError, "expected an olympus._core.Jaxpr, got %s",
                     Py_TYPE(o)->tp_name);
        return NULL;
    }
    return ((JaxprObject *)o)->prog;
}

#define PROG(o) (((JaxprObject *)(o))->prog)

static void Jaxpr_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    oly_program_release(PROG(self));
    Py_XDECREF(((JaxprObject *)self)->out_treedef);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *Jaxpr_str(PyObject *self)
{
    char *text = NULL;
    oly_status s = oly_program_print(PROG(self), &text);
    if (s != OLY_OK) return ext_raise(s);
    PyObject *r = PyUnicode_FromString(text);
    free(text);
    return r;
}

static PyObject *aval_list(const oly_program *p, bool inputs)
{
    int n = inputs ? oly_program_num_inputs(p) : oly_program_num_outputs(p);
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (int i = 0; i < n; i++) {
        const oly_aval *a = inputs ? oly_program_input_aval(p, i) : oly_program_output_aval(p, i);
        oly_aval z;
        if (!a) {
            memset(&z, 0, sizeof z);
            a = &z;
        }
        PyObject *t = ext_aval_new(a);
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

static PyObject *Jaxpr_in_avals(PyObject *self, void *Py_UNUSED(c))
{
    return aval_list(PROG(self), true);
}
static PyObject *Jaxpr_out_avals(PyObject *self, void *Py_UNUSED(c))
{
    return aval_list(PROG(self), false);
}
static PyObject *Jaxpr_n_in(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(oly_program_num_inputs(PROG(self)));
}
static PyObject *Jaxpr_n_out(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(oly_program_num_outputs(PROG(self)));
}
static PyObject *Jaxpr_effects(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLong(oly_program_effects(PROG(self)));
}
static PyObject *Jaxpr_eqn_count(PyObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromLong(oly_program_num_eqns(PROG(self)));
}
static PyObject *Jaxpr_out_tree(PyObject *self, void *Py_UNUSED(c))
{
    PyObject *t = ((JaxprObject *)self)->out_treedef;
    return Py_NewRef(t ? t : Py_None);
}

static PyGetSetDef Jaxpr_getset[] = {
    {"in_avals", Jaxpr_in_avals, NULL, "[ShapedArray] of the inputs", NULL},
    {"out_avals", Jaxpr_out_avals, NULL, "[ShapedArray] of the outputs", NULL},
    {"n_in", Jaxpr_n_in, NULL, "number of inputs", NULL},
    {"n_out", Jaxpr_n_out, NULL, "number of outputs", NULL},
    {"effects", Jaxpr_effects, NULL, "the program's effect bits (OLY_EFFECT_*)", NULL},
    {"eqn_count", Jaxpr_eqn_count, NULL, "number of top-level equations", NULL},
    {"out_tree", Jaxpr_out_tree, NULL, "PyTreeDef of the function's output (make_jaxpr), or None",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Jaxpr_slots[] = {
    {Py_tp_dealloc, FN_SLOT(Jaxpr_dealloc)},
    {Py_tp_str, FN_SLOT(Jaxpr_str)},
    {Py_tp_repr, FN_SLOT(Jaxpr_str)},
    {Py_tp_getset, Jaxpr_getset},
    {Py_tp_doc, (void *)"An immutable traced program; str() is its text form."},
    {0, NULL},
};

static PyType_Spec Jaxpr_spec = {
    .name = "olympus._core.Jaxpr",
    .basicsize = sizeof(JaxprObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Jaxpr_slots,
};

int ext_program_init(PyObject *module)
{
    Jaxpr_Type = (PyTypeObject *)PyType_FromSpec(&Jaxpr_spec);
    if (!Jaxpr_Type) return -1;
    ShapedArray_Type =
        (PyTypeObject *)PyType_FromSpecWithBases(&ShapedArray_spec, (PyObject *)&PyTuple_Type);
    if (!ShapedArray_Type) return -1;
    ext_st->Jaxpr_Type = Jaxpr_Type;
    if (PyModule_AddObjectRef(module, "Jaxpr", (PyObject *)Jaxpr_Type) < 0) return -1;
    if (PyModule_AddObjectRef(module, "ShapedArray", (PyObject *)ShapedArray_Type) < 0) return -1;
    return 0;
}
