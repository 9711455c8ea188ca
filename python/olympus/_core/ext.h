/* ext.h — declarations shared between the files of the olympus._core extension.
 * Everything here is internal to the extension (ext_ prefix); only PyInit__core
 * is exported. docs/design.md describes the module's Python-visible contract.
 *
 * Files:
 *   module.c     module init, module state, the one error mapping, x64, misc functions
 *   array.c      Array type, NumPy interop, asarray, dtype conversions
 *   tracer.c     the trace stack, the Tracer type, bind, inlining programs
 *   concrete.c   the values of concrete traces' Tracers (lazy operations)
 *   operators.c  NumPy promotion and broadcasting, the operators of Array and Tracer
 *   params.c     params structs from Python dicts (by field table)
 *   program.c    the Jaxpr type (any program) and ShapedArray (avals to and from Python)
 *   jit.c        JitFunction (bounded trace cache), make_jaxpr
 *   transform.c  trace / transform / call programs; rule thunks
 *   pytree.c     tree_flatten / unflatten, PyTreeDef, registry
 *   callback.c   the host adapter: the callback trampoline and _core.callback
 *   buffer.c     buffer_callback: Buffer, ExecutionContext, its trampoline and bind
 *   ffi.c        olympus.ffi: the FFI target registry, bindings, _core.ffi_call
 */
#ifndef OLYMPUS_EXT_H
#define OLYMPUS_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#ifndef EXT_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#define PY_ARRAY_UNIQUE_SYMBOL olympus_ext_ARRAY_API
#include <numpy/arrayobject.h>
/* A dtype's item size: NumPy 2 hides the field behind PyDataType_ELSIZE,
 * NumPy 1 has the field only. */
#if NPY_ABI_VERSION < 0x02000000
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#include "olympus.h"

/* ---------------------------------------------------------------- module state
 * One process-wide state (the module is single-phase and not re-initialisable);
 * set in PyInit__core, never freed. */
typedef struct ext_state {
    PyTypeObject *Array_Type;
    PyTypeObject *Tracer_Type;
    PyTypeObject *JitFunction_Type;
    PyTypeObject *Jaxpr_Type;
    PyTypeObject *PyTreeDef_Type;
    PyObject *CallbackError;            /* RuntimeError subclass */
    PyObject *ConcretizationTypeError;  /* TypeError subclass */
    PyObject *np_dtype[OLY_DTYPE_COUNT]; /* numpy dtype objects (NULL where numpy lacks one) */
} ext_state;

extern ext_state *ext_st;

/* module.c: raise the Python exception for a failed core call and return NULL.
 * OLY_ERR_CALLBACK with a payload (a PyObject exception, see callback.c)
 * raises CallbackError(message) from that exception; OLY_ERR_TYPE/SHAPE/INVALID
 * raise TypeError/ValueError as fits; OLY_ERR_UNSUPPORTED NotImplementedError;
 * OLY_ERR_NOMEM MemoryError. The core message is the Python message. */
PyObject *ext_raise(oly_status s);
/* Calls fn with the GIL released (it may wait for other threads or
 * processes): None, or fn's failure raised. */
PyObject *ext_call_nogil(oly_status (*fn)(void));

/* ---------------------------------------------------------------- array.c */
/* Type init: called from PyInit__core; return 0 or -1 with an exception. */
int ext_array_init(PyObject *module);
/* New Array owning the reference a (stolen). NULL + exception on failure. */
PyObject *ext_array_wrap(oly_array *a);
/* Borrowed core array of an Array object, or NULL if o is not an Array. */
oly_array *ext_array_get(PyObject *o);
/* New Array owning a (stolen) whose _shards slot holds shards, a
 * (sharding, tuple of per-device Arrays) pair (sharded.c makes them). */
PyObject *ext_array_wrap_sharded(oly_array *a, PyObject *shards);
/* The _shards slot of an Array (borrowed; NULL when it is not sharded). o
 * must be an Array (ext_array_get(o) != NULL). */
PyObject *ext_array_shards(PyObject *o);
/* Any array-like (Array, numpy array, numpy scalar, Python scalar, nested
 * sequence) to a new reference of a core array. want: a dtype, or -1 to keep
 * the value's own (canonicalised by x64; Python scalars get the default
 * weak dtype of their kind). Tracers are rejected (-1, TypeError). */
int ext_to_array(PyObject *obj, int want, oly_array **out);
/* numpy dtype object (new ref) for t; dtype from a numpy dtype / type / name. */
PyObject *ext_dtype_to_numpy(oly_dtype t);
int ext_dtype_from_py(PyObject *obj, oly_dtype *out);
/* The shape as a tuple of ints. New reference, or NULL with an exception. */
PyObject *ext_shape_tuple(const oly_aval *av);
/* Read-only NumPy array viewing the data of core array a (retained by the view). */
PyObject *ext_numpy_view(oly_array *a);
/* Read-only NumPy array viewing raw memory described by aval; base keeps owner
 * (may be NULL: the caller guarantees lifetime). */
PyObject *ext_numpy_from_raw(const oly_aval *aval, const void *data, PyObject *owner);

/* ---------------------------------------------------------------- tracer.c */
int ext_tracer_init(PyObject *module);
/* 1 if o is a Tracer. */
int ext_is_tracer(PyObject *o);
/* The aval of a Tracer (borrowed; o must be a Tracer). */
const oly_aval *ext_tracer_aval(PyObject *o);
/* A Python bool, int, float or complex (not a NumPy scalar). */
bool ext_is_python_scalar(PyObject *o);
/* Values the operators accept (others give NotImplemented): Arrays, Tracers,
 * Python and NumPy scalars, NumPy arrays. */
bool ext_is_operand(PyObject *o);
/* The aval of an Array or Tracer or array-like Python value (Python scalars:
 * weak default dtype). Returns 0, or -1 with an exception. */
int ext_aval_of(PyObject *o, oly_aval *out);

/* A trace: one builder on the thread-local stack. */
typedef struct ext_trace ext_trace;
/* What a trace knows of values (docs/design.md, "Concrete autodiff"). */
typedef enum ext_trace_kind {
    EXT_TRACE_STAGED,      /* jit, make_jaxpr, control-flow bodies, custom rules: the
                            * program runs later, so nothing traced inside has a value */
    EXT_TRACE_TRANSPARENT, /* vmap: stages, but does not stop a concrete trace above it */
    EXT_TRACE_CONCRETE,    /* autodiff outside jit: stages, and its Tracers have values
                            * (computed when asked for: concrete.c) */
    EXT_TRACE_KIND_COUNT
} ext_trace_kind;
/* Open a trace of kind on this thread (innermost). */
ext_trace *ext_trace_push(ext_trace_kind kind);
/* True when no staged trace is open on this thread, so a trace opened now may
 * be concrete. */
bool ext_concrete_ok(void);
/* Close the innermost trace (which must be t) without building anything. */
void ext_trace_discard(ext_trace *t);
/* New Tracer for an input of aval to trace t. value (borrowed; NULL or None:
 * none) is what the input stands for when t is concrete: an Array of aval, or
 * a Tracer of aval whose source it shares (ignored when t is not concrete).
 * NULL with an exception on failure. */
PyObject *ext_trace_new_input(ext_trace *t, const oly_aval *aval, PyObject *value);
/* Close t: outputs are Tracers/arrays/scalars (converted as by bind); builds the
 * program. *captured receives a list of the outer values (Tracers of enclosing
 * traces, or Arrays) that were lifted into extra trailing inputs, in input order.
 * Returns 0 or -1 with an exception; the trace is popped either way. */
int ext_trace_finish(ext_trace *t, PyObject *const *outs, Py_ssize_t n_out,
                     oly_program **program, PyObject **captured);
/* The innermost open trace on this thread, or NULL (borrowed). While one is
 * open, every bind is staged into it (concrete values become constants). */
ext_trace *ext_trace_current(void);

/* Apply prim to Python args (Arrays, Tracers, array-likes): into the innermost
 * open trace of this thread (ext_trace_current; outer Tracers are captured,
 * concrete values become constants/literals), else eagerly; a Tracer whose
 * trace is closed raises UnexpectedTracerError. params: the prim's params
 * struct (NULL when it has none); subs: nested programs. Returns a new tuple of
 * results (always a tuple), or NULL with an exception. */
PyObject *ext_bind(const oly_prim *p, const void *params, PyObject *const *args, Py_ssize_t n,
                   oly_program *const *subs, int n_sub);
/* Emit prog's equations inline into the innermost open trace, its inputs bound
 * to args (as bind converts them). A new tuple of the outputs (Tracers, or
 * rank-0 Arrays for literal outputs), or NULL with an exception. */
PyObject *ext_trace_inline(oly_program *prog, PyObject *const *args, Py_ssize_t n);

/* ---------------------------------------------------------------- concrete.c */
/* Where the value of a concrete trace's Tracer comes from: the value itself,
 * or output index of a lazy operation that computes it when first asked.
 * A zeroed source has neither. */
typedef struct ext_lazy ext_lazy;
typedef struct ext_source {
    oly_array *value;  /* owned, or NULL */
    ext_lazy *node;    /* owned reference, or NULL */
    int index;
} ext_source;
void ext_source_clear(ext_source *s);
/* True when s has a value or a node that computes one. */
bool ext_source_known(const ext_source *s);
/* dst (cleared first) refers to what src refers to. */
void ext_source_copy(ext_source *dst, const ext_source *src);
/* The value of s, running the lazy operations it needs first (then s keeps
 * the value and drops its node): *out borrowed. 1, 0 when s has none, -1 with
 * an exception (a failing operation). */
int ext_source_value(ext_source *s, oly_array **out);
/* A lazy node running prog (borrowed; retained) on in (n_in sources, copied);
 * outs[0..n_out) (cleared first) are set to its first n_out outputs. 0, or -1
 * with an exception. */
int ext_lazy_of_program(oly_program *prog, const ext_source *in, int n_in, ext_source *outs,
                        int n_out);
/* A lazy node applying p (params, nested programs subs) to in (n_in sources of
 * avals, copied), whose n_out outputs are set into outs[0..n_out) (cleared
 * first). Plain-data params are copied and run through the eager cache;
 * others become a one-equation program. 0, or -1 with an exception. */
int ext_lazy_of_eqn(const oly_prim *p, const void *params, oly_program *const *subs, int n_sub,
                    const oly_aval *avals, const ext_source *in, int n_in, ext_source *outs,
                    int n_out);

/* ---------------------------------------------------------------- params.c */
/* Parse a params dict into the prim's params struct (caller supplies
 * params_size bytes, zeroed). Host-function fields are not parseable. */
int ext_params_from_dict(const oly_prim *p, PyObject *dict, void *params);

/* ---------------------------------------------------------------- operators.c */
/* The number-protocol and rich-comparison slots shared by Array and Tracer (one
 * implementation, NumPy-style promotion and broadcasting), ended by {0, NULL};
 * array.c appends them to Array's spec. */
extern const PyType_Slot ext_operator_slots[];
/* A new heap type for an array-like operand (Array, Tracer): the slots own[0..n_own)
 * followed by ext_operator_slots; __array_priority__ = 100 makes NumPy's operators
 * defer to ours, while NumPy functions (np.sin(x)) still take the value through
 * __array__, as with the reference system. A new reference, or NULL with
 * an exception set. */
PyObject *ext_operand_type_new(const char *name, int basicsize, const PyType_Slot *own,
                               int n_own);


/* ---------------------------------------------------------------- pytree.c */
int ext_pytree_init(PyObject *module);
/* Flatten: *leaves a new list, *treedef a new PyTreeDef. is_leaf may be NULL. */
int ext_tree_flatten(PyObject *tree, PyObject *is_leaf, PyObject **leaves, PyObject **treedef);
/* Rebuild from a sequence of leaves. New reference or NULL. */
PyObject *ext_tree_unflatten(PyObject *treedef, PyObject *leaves);
Py_ssize_t ext_treedef_num_leaves(PyObject *treedef);

/* ---------------------------------------------------------------- program.c */
int ext_program_init(PyObject *module);
/* A new Jaxpr owning p (stolen, released on failure); out_treedef may be NULL. */
PyObject *ext_program_wrap(oly_program *p, PyObject *out_treedef);
/* The program of a Jaxpr (borrowed), or NULL with a TypeError. */
oly_program *ext_program_get(PyObject *o);
/* The one aval -> Python conversion: a new ShapedArray, or NULL with an exception. */
PyObject *ext_aval_new(const oly_aval *a);
/* Python -> aval: (shape, dtype[, weak]) or an object with .shape/.dtype[/.weak_type];
 * the dtype as given (not canonicalised). 0, or -1 with an exception. */
int ext_aval_from_py(PyObject *o, oly_aval *out);
/* "float32[5,3]" (NumPy dtype names), and "ShapedArray(float32[5], weak_type=True)". */
void ext_format_shaped(char *buf, size_t n, const oly_aval *a);
PyObject *ext_aval_repr(const oly_aval *a);

/* ---------------------------------------------------------------- jit.c */
int ext_jit_init(PyObject *module);

/* ---------------------------------------------------------------- transform.c */
/* Trace/transform/call of programs, custom-rule thunks. */
extern PyMethodDef ext_transform_methods[];
/* Run p now on in (n borrowed arrays of p's input avals); out receives p's
 * outputs (new references). The GIL is released for large runs. 0, or -1
 * with an exception. */
int ext_program_run_arrays(oly_program *p, oly_array *const *in, Py_ssize_t n, oly_array **out);

/* ---------------------------------------------------------------- callback.c */
int ext_callback_init(PyObject *module);
/* The destructor of the error payload a Python callback attaches
 * (oly_error_set_payload(exc, ext_payload_free)): a Python exception instance,
 * decref'd with the GIL taken. ext_raise recognises payloads by this function. */
void ext_payload_free(void *p);
/* The same for an exception to re-raise unchanged (one a custom rule raised
 * while a transform traced it): ext_raise raises it as it is, not wrapped in
 * CallbackError. The one error channel from host code back to Python. */
void ext_payload_free_reraise(void *p);
/* For the other host adapters (buffer.c, ffi.c): whether this thread may take the GIL
 * to drop references; vmap_method from None or its name (ValueError
 * otherwise); result_avals from a sequence of (shape, dtype) (*out is
 * PyMem-allocated); and the pending Python exception turned into the error
 * payload and the message "<kind> failed: <name>: <Type>: <text>" (logged as
 * the other callbacks' failures are). */
int ext_python_alive(void);
/* Py_DECREF o from any thread, taking the GIL; leaked (not dropped) after
 * finalization. Accepts NULL. A host function's or payload's release. */
void ext_drop_with_gil(void *o);
int ext_parse_vmap_method(PyObject *o, int *out);
int ext_parse_result_avals(PyObject *obj, oly_aval **out, int *n_out);
oly_status ext_callback_fail(const char *kind, const char *name);
/* The frame of the innermost host call running Python on this thread (the
 * trampolines set it around the call, restoring the outer one); NULL outside
 * host calls. callback_context() reads it. */
extern _Thread_local const oly_callback_frame *ext_current_frame;

/* ---------------------------------------------------------------- buffer.c */
/* The Buffer and ExecutionContext types of buffer_callback. */
int ext_buffer_init(PyObject *module);
/* input_output_aliases as (input, output) pairs, checked against the K
 * flattened arguments and the M result avals with the reference's messages
 * (ffi_call shares them). *out is PyMem-allocated. 0 or -1. */
int ext_parse_aliases(PyObject *obj, PyObject *const *args, Py_ssize_t K, const oly_aval *res,
                      int M, oly_io_alias **out, int *n_out);

/* Module-level functions each file exports into the module's method table
 * (module.c collects them). */
extern PyMethodDef ext_array_methods[];    /* asarray, result_type? no: see tracer */
extern PyMethodDef ext_tracer_methods[];   /* bind */
extern PyMethodDef ext_operator_methods[]; /* result_type, broadcast_shapes, binop, unop */
extern PyMethodDef ext_jit_methods[];      /* jit, make_jaxpr */
extern PyMethodDef ext_pytree_methods[];   /* tree_flatten, tree_unflatten, register_pytree_node, ... */
extern PyMethodDef ext_callback_methods[]; /* callback */
extern PyMethodDef ext_buffer_methods[];   /* buffer_callback */
extern PyMethodDef ext_sharded_methods[];  /* make_sharded, assemble, run_on_devices, ... */

/* ---------------------------------------------------------------- sharded.c */
/* jit's call over leaves of which at least one is a sharded Array: the
 * Python hook (olympus._src.sharded) runs prog per shard when it can.
 * shard_cache: the cache entry's dict for per-shard programs (may be NULL).
 * Returns a new list of outputs, Py_NotImplemented (new reference) when the
 * call should run on the global values as usual, or NULL with an exception. */
PyObject *ext_jit_sharded(oly_program *prog, PyObject *leaves, PyObject **shard_cache);

/* ---------------------------------------------------------------- ffi.c */
int ext_ffi_init(PyObject *module);
extern PyMethodDef ext_ffi_methods[]; /* ffi_register, ffi_call, ... */

/* ---------------------------------------------------------------- distributed.c */
extern PyMethodDef ext_distributed_methods[]; /* distributed_initialize, process_index, ... */

#endif /* OLYMPUS_EXT_H */
