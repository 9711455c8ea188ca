/* params.c — a primitive's params struct from a Python dict, driven by the
 * row's field table (ints, int sequences, bools, floats, dtypes, enums by
 * name, strings, aval lists). Host functions and thunks are not parseable:
 * the callback and custom-rule bindings build those params themselves. */
#include "ext.h"

/* NumPy's C-API macros convert between object and function pointers. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include <string.h>

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
