"""olympus.catalyst: Catalyst's callback API over olympus's engine.

`import olympus.catalyst as catalyst` and `from olympus.catalyst import
pure_callback, callback, accelerate, qjit` read as Catalyst's documentation:

- `qjit(fn)`: compiles like `olympus.jit`, with Catalyst's 64-bit default.
  The x64 switch is on only while a qjit function traces and runs (an
  `olympus.enable_x64()` scope around the call), never flipped globally: code
  outside keeps olympus's default, and qjit's cache holds 64-bit programs only.
- `pure_callback(fn, result_type=None)`: a decorator; the result type comes
  from the return annotation (`-> float`, `int`, `complex`, `bool`, a
  `ShapeDtypeStruct`, or a pytree of them) or `result_type=`. Python types
  take the canonical dtype of their kind (float64 inside qjit). Called on
  concrete values outside a trace it just runs the function. `.fwd` / `.bwd`
  attach a custom VJP (both traced, like the primal: `fwd(*args) -> (out,
  residuals)`, `bwd(residuals, cotangent) -> tuple`); differentiating without
  them raises DifferentiableCompileError.
- `callback(fn)` (also `debug.callback`): a function with no result, called
  as an ordered effect that is never removed; a result other than None is an
  error.
- `accelerate(fn, dev=None)`: calls a jit-compatible function from compiled
  code as its own program on device `dev` (result shapes inferred with
  eval_shape); differentiable with no user rules (its VJP is itself an
  accelerated call, so higher orders work too).
- `debug.print`, `grad`, `value_and_grad`, `jacobian`, `jvp`, `vjp`, `vmap`.
"""
import functools
import inspect
import threading

import numpy as np

import olympus
from olympus import _core
from olympus import tree_util
from olympus._src import dtypes as _dt
from olympus.catalyst import debug  # noqa: F401

__all__ = ["qjit", "QJIT", "pure_callback", "callback", "accelerate", "grad", "value_and_grad",
           "jacobian", "jvp", "vjp", "vmap", "debug", "DifferentiableCompileError",
           "CompileError"]


class CompileError(Exception):
    """An error while compiling a qjit function (Catalyst's name)."""


class DifferentiableCompileError(CompileError):
    """Differentiating something that has no derivative rule (Catalyst's name)."""


def _tracing(*trees):
    """True when some leaf of the trees is a traced value."""
    return any(_core.is_tracer(leaf) for t in trees for leaf in tree_util.tree_leaves(t))


# ------------------------------------------------------------------ qjit

# Catalyst's qjit options; olympus compiles one way, so they are accepted and
# have no effect (except static_argnums / static_argnames).
_QJIT_OPTIONS = {"autograph", "autograph_include", "async_qnodes", "target", "keep_intermediate",
                 "verbose", "logfile", "pipelines", "abstracted_axes", "disable_assertions",
                 "seed", "experimental_capture", "circuit_transform_pipeline", "pass_plugins",
                 "dialect_plugins", "debug_info"}


class QJIT:
    """A qjit-compiled function: olympus.jit under a 64-bit scope."""

    def __init__(self, fn, static_argnums=None, static_argnames=None, **options):
        unknown = set(options) - _QJIT_OPTIONS
        if unknown:
            raise TypeError(f"qjit: unknown option(s) {sorted(unknown)}")
        self.original_function = fn
        self.compile_options = dict(options, static_argnums=static_argnums,
                                    static_argnames=static_argnames)
        self._jit = olympus.jit(fn, static_argnums=static_argnums,
                                static_argnames=static_argnames)
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        with olympus.enable_x64():
            return self._jit(*args, **kwargs)

    def jaxpr(self, *args, **kwargs):
        """The program this function compiles to for these arguments."""
        with olympus.enable_x64():
            return olympus.make_jaxpr(self.original_function)(*args, **kwargs)

    def __repr__(self):
        return f"QJIT({getattr(self.original_function, '__name__', 'fn')})"


def qjit(fn=None, *, static_argnums=None, static_argnames=None, **options):
    """Compiles fn as olympus.jit does, with 64-bit types while it traces and
    runs. Usable as @qjit or @qjit(static_argnums=...)."""
    if fn is None:
        return functools.partial(qjit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, **options)
    return QJIT(fn, static_argnums=static_argnums, static_argnames=static_argnames, **options)


# ------------------------------------------------------------------ result types

_PY_TYPES = {float: np.float64, int: np.int64, complex: np.complex128, bool: np.bool_}


def _result_shapes(result_type, name):
    """The ShapeDtypeStruct pytree of a result annotation (Python scalar types
    take their kind's canonical dtype: 64-bit under qjit)."""
    if result_type is None or result_type is inspect.Signature.empty:
        raise TypeError("A function using pure_callback requires return types to be passed in "
                        f"as a parameter or type annotation (callback {name!r} has neither)")

    def one(t):
        if t in _PY_TYPES:
            return olympus.ShapeDtypeStruct((), _dt.canonicalize(np.dtype(_PY_TYPES[t])))
        if hasattr(t, "shape") and hasattr(t, "dtype"):
            return olympus.ShapeDtypeStruct(tuple(t.shape), _dt.canonicalize(np.dtype(t.dtype)))
        if isinstance(t, (type, np.dtype)) and np.issubdtype(np.dtype(t), np.generic):
            return olympus.ShapeDtypeStruct((), _dt.canonicalize(np.dtype(t)))
        raise TypeError(f"pure_callback {name!r}: unsupported result type {t!r}; expected "
                        "float, int, complex, bool, a ShapeDtypeStruct or a pytree of them")

    is_leaf = lambda t: t in _PY_TYPES or hasattr(t, "dtype") or isinstance(t, type)  # noqa: E731
    return tree_util.tree_map(one, result_type, is_leaf=is_leaf)


def _name(fn):
    return getattr(fn, "__name__", type(fn).__name__)


# ------------------------------------------------------------------ pure_callback

_state = threading.local()


class _PureCallback:
    """A Catalyst pure callback: call it like the function."""

    def __init__(self, fn, result_type):
        self.func = fn
        self._result_type = result_type
        self._fwd = None
        self._bwd = None
        self._with_vjp = None
        functools.update_wrapper(self, fn)

    def fwd(self, func):
        """Registers the forward pass of the custom VJP: fwd(*args) -> (out, residuals)."""
        self._fwd = func
        self._with_vjp = None
        return func

    def bwd(self, func):
        """Registers the backward pass: bwd(residuals, cotangent) -> tuple of input cotangents."""
        self._bwd = func
        self._with_vjp = None
        return func

    def _raw(self, *args):
        shapes = _result_shapes(self._result_type, _name(self.func))
        return olympus.pure_callback(self._host(shapes), shapes, *args, vmap_method="sequential")

    def _host(self, shapes):
        """The function, with results annotated by a Python type (`-> float`)
        converted to the dtype traced for them (a float32 NumPy scalar is a float
        too); other results pass as they are, for pure_callback to check."""
        py = tree_util.tree_leaves(tree_util.tree_map(
            lambda t: t in _PY_TYPES, self._result_type, is_leaf=lambda t: t in _PY_TYPES))
        if not any(py):
            return self.func
        dtypes = [s.dtype for s in tree_util.tree_leaves(shapes)]

        def host(*args):
            leaves, tree = tree_util.tree_flatten(self.func(*args))
            if len(leaves) != len(dtypes):
                return tree_util.tree_unflatten(tree, leaves)  # pure_callback reports it
            return tree_util.tree_unflatten(tree, [np.asarray(v, d) if p else v
                                                   for v, d, p in zip(leaves, dtypes, py)])
        return host

    def _differentiable(self):
        if self._with_vjp is not None:
            return self._with_vjp
        name = _name(self.func)
        fwd_fn, bwd_fn = self._fwd, self._bwd

        @olympus.custom_vjp
        def call(*args):
            return self._raw(*args)

        def fwd(*args):
            if fwd_fn is None:
                raise DifferentiableCompileError(
                    f"pure_callback {name!r} is differentiated but has no VJP rule: define one "
                    f"with {name}.fwd and {name}.bwd (Catalyst cannot differentiate host code)")
            _state.raw = getattr(_state, "raw", 0) + 1  # the user's fwd calls the raw callback
            try:
                out, res = fwd_fn(*args)
            finally:
                _state.raw -= 1
            return out, res

        def bwd(res, ct):
            out = bwd_fn(res, ct)
            return tuple(out) if isinstance(out, (list, tuple)) else (out,)

        call.defvjp(fwd, bwd)
        self._with_vjp = call
        return call

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"pure_callback {_name(self.func)!r}: pass arguments positionally")
        if (self._fwd is None) != (self._bwd is None):
            missing = "forward" if self._fwd is None else "reverse"
            raise DifferentiableCompileError(
                f"Function {_name(self.func)} differentiated but missing {missing} pass")
        if not _tracing(args):
            return self.func(*args)  # concrete values, outside a trace: just run it
        if getattr(_state, "raw", 0):
            return self._raw(*args)
        return self._differentiable()(*args)


def pure_callback(callback_fn, result_type=None):
    """A pure host function callable from compiled code (see the module
    docstring); result_type defaults to callback_fn's return annotation."""
    if result_type is None:
        try:
            result_type = inspect.signature(callback_fn).return_annotation
        except (TypeError, ValueError):
            result_type = None
    _result_shapes(result_type, _name(callback_fn))  # fails early on a bad type
    return _PureCallback(callback_fn, result_type)


# ------------------------------------------------------------------ callback

def callback(func):
    """A host function with no result, called in program order as an effect
    that is never removed (Catalyst's debug.callback)."""
    name = _name(func)

    def checked(*args, **kwargs):
        out = func(*args, **kwargs)
        if out is not None:
            raise TypeError(f"callback {name!r} must return None (it is called for its effect), "
                            f"got {type(out).__name__}; use pure_callback for results")

    @functools.wraps(func)
    def call(*args, **kwargs):
        if not _tracing(args, kwargs):
            return checked(*args, **kwargs)
        olympus.debug.callback(checked, *args, ordered=True, **kwargs)
    return call


# ------------------------------------------------------------------ accelerate

def _on_device(tree, dev):
    if dev is None:
        return tree
    return tree_util.tree_map(lambda x: olympus.device_put(x, dev), tree)


def _positional(func, args, kwargs):
    """args with kwargs bound into positions (accelerated calls are positional)."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"accelerate: cannot pass keyword arguments to {_name(func)!r}: {e}")
    if bound.kwargs:
        raise TypeError(f"accelerate: {_name(func)!r} takes keyword-only arguments; pass "
                        "them with functools.partial")
    return bound.args


def accelerate(func=None, *, dev=None):
    """Calls a jit-compatible func from compiled code as its own compiled
    program on device dev (default: the default device), with its result
    shapes inferred; differentiable without user rules."""
    if func is None:
        return functools.partial(accelerate, dev=dev)
    if dev is not None and not (hasattr(dev, "platform") and hasattr(dev, "id")):
        raise TypeError(f"accelerate: dev must be a device from olympus.devices(), got {dev!r}")
    name = _name(func)
    jitted = olympus.jit(func)
    backward = []  # the accelerated VJP, made when first differentiated

    def run(*args):
        return jitted(*_on_device(args, dev))

    @olympus.custom_vjp
    def call(*args):
        try:
            shapes = olympus.eval_shape(func, *args)
        except Exception as e:
            raise ValueError(f"Function {name} must be jax.jit-able, but tracing it failed: "
                             f"{e}") from e
        return olympus.pure_callback(run, shapes, *args, vmap_method="sequential")

    def fwd(*args):
        return call(*args), args

    def bwd(args, ct):
        if not backward:  # itself accelerated: higher orders differentiate it again
            backward.append(accelerate(lambda a, c: olympus.vjp(func, *a)[1](c), dev=dev))
        return tuple(backward[0](args, ct))

    call.defvjp(fwd, bwd)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        args = _positional(func, args, kwargs)
        if not _tracing(args):
            return run(*args)
        return call(*args)
    return wrapper


# ------------------------------------------------------------------ differentiation

def _check_method(method, h, who):
    if method not in (None, "auto", "fd"):
        raise ValueError(f"{who}: method must be 'auto' or 'fd', got {method!r}")
    if method == "fd" and h is not None and not h > 0:
        raise ValueError(f"{who}: the finite-difference step h must be positive, got {h!r}")


def _fd_jacobian(f, argnums, h):
    """Forward differences (Catalyst's method='fd'): (f(x + h e_i) - f(x)) / h."""
    import olympus.numpy as jnp
    h = 1e-7 if h is None else h

    def jac(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        f0 = jnp.asarray(f(*args))
        outs = []
        for n in nums:
            x = jnp.asarray(args[n])
            flat = jnp.ravel(x)

            def at(i, flat=flat, n=n, x=x):
                moved = flat.at[i].add(h).reshape(x.shape)
                a = list(args)
                a[n] = moved
                return (jnp.asarray(f(*a)) - f0) / h
            cols = jnp.stack([at(i) for i in range(flat.shape[0])], axis=-1)
            outs.append(jnp.reshape(cols, f0.shape + x.shape))
        return outs[0] if isinstance(argnums, int) else tuple(outs)
    return jac


def _derivative(who, auto, fd):
    """A Catalyst differentiation operator: method None / 'auto' is autodiff
    (auto(f, argnums)), 'fd' forward differences with step h (fd(f, jac))."""
    def op(f=None, *, method=None, h=None, argnums=0):
        if f is None:
            return functools.partial(op, method=method, h=h, argnums=argnums)
        _check_method(method, h, who)
        if method == "fd":
            return fd(f, _fd_jacobian(f, argnums, h))
        return auto(f, argnums=argnums)
    op.__name__ = op.__qualname__ = who
    return op


grad = _derivative("grad", olympus.grad, lambda f, jac: jac)
grad.__doc__ = """The gradient of scalar f (Catalyst's grad: method 'auto' is autodiff,
'fd' forward differences with step h)."""
value_and_grad = _derivative("value_and_grad", olympus.value_and_grad,
                             lambda f, jac: lambda *a: (f(*a), jac(*a)))
value_and_grad.__doc__ = """(f(x), grad f(x))."""
jacobian = _derivative("jacobian", olympus.jacrev, lambda f, jac: jac)
jacobian.__doc__ = """The Jacobian of f (reverse mode; 'fd': forward differences)."""


def jvp(f, params, tangents, *, method=None, h=None, argnums=None):
    """(f(*params), the Jacobian-vector product) as Catalyst's jvp: params
    and tangents are sequences."""
    _check_method(method, h, "jvp")
    return olympus.jvp(f, tuple(params), tuple(tangents))


def vjp(f, params, cotangents, *, method=None, h=None, argnums=None):
    """(f(*params), the vector-Jacobian product) as Catalyst's vjp:
    cotangents is a sequence matching f's outputs."""
    _check_method(method, h, "vjp")
    out, pullback = olympus.vjp(f, *params)
    ct = cotangents[0] if isinstance(cotangents, (list, tuple)) and len(cotangents) == 1 and \
        not isinstance(out, (list, tuple)) else cotangents
    return out, pullback(ct)


def vmap(fn=None, in_axes=0, out_axes=0, axis_size=None):
    """olympus.vmap under Catalyst's name."""
    if fn is None:
        return functools.partial(vmap, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)
    return olympus.vmap(fn, in_axes=in_axes, out_axes=out_axes, axis_size=axis_size)
