"""The transformations' Python API: vmap, jvp, linearize, vjp, grad,
value_and_grad, jacfwd, jacrev, hessian, linear_transpose, custom_jvp,
custom_vjp and checkpoint.

Every transformation follows one pattern (DESIGN.md §5, §7a): trace the
function once into a program (`_core.trace`, which also reports the outer
traced values the function closed over), transform the program in C
(`_core.vmap_program`, `jvp_program`, `linearize_program`,
`transpose_program`), then call the result on the values
(`_core.call_program`: eagerly, or inline into the enclosing trace, so that
transformations nest and compose with jit). Custom rules are traced lazily:
the C transform calls back into a Python rule when it first meets the
custom_jvp_call / custom_vjp_call equation, never before.

Outside jit the differentiating transformations trace concretely: the
tracers have the primal values (computed when asked for), so Python control
flow on them works as in JAX (docs/design.md, "Concrete autodiff").
"""
import functools
import inspect
import operator

import numpy as np

from olympus import _core
from olympus._src import dtypes as _dt
from olympus._src import parallel as _parallel

tree_flatten = _core.tree_flatten
tree_unflatten = _core.tree_unflatten

__all__ = ["vmap", "jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev",
           "hessian", "linear_transpose", "custom_jvp", "custom_vjp", "checkpoint", "remat",
           "closure_convert", "eval_shape"]


# ------------------------------------------------------------------ helpers

def _is_array_like(x):
    return (isinstance(x, (_core.Array, np.ndarray, np.generic, bool, int, float, complex))
            or _core.is_tracer(x))


def _aval(x):
    """(shape, dtype, weak) of an array-like leaf."""
    if isinstance(x, _core.Array) or _core.is_tracer(x):
        return (tuple(x.shape), x.dtype, bool(x.weak_type))
    if not _is_array_like(x):
        raise TypeError(f"Argument '{x!r}' of type {type(x)} is not a valid olympus type")
    dt, weak = _dt.dtype_and_weak(x)
    return (tuple(np.shape(x)), np.dtype(dt), bool(weak))


def _leaf_value(x):
    """x itself when it is an Array or Tracer, else a concrete Array."""
    if isinstance(x, _core.Array) or _core.is_tracer(x):
        return x
    return _core.asarray(x)


def _flat_fun(fun, in_tree, store, kw=True):
    """fun on (args, kwargs) rebuilt from leaves; records the output treedef."""
    def flat(*leaves):
        tree = tree_unflatten(in_tree, list(leaves))
        if kw:
            args, kwargs = tree
            out = fun(*args, **kwargs)
        else:
            out = fun(*tree)
        out_leaves, out_tree = tree_flatten(out)
        store.append(out_tree)
        return out_leaves
    return flat


def _trace(flat, avals, values=None, transparent=False):
    """(program, captured) of flat traced on avals.

    values: the leaves flat is differentiated at (Arrays, tracers or None).
    Outside jit they make the trace concrete (docs/design.md, "Concrete
    autodiff"): its tracers have values, computed when Python asks for one
    (bool, int, float, index, item), so control flow on primal values works,
    as in JAX; the program is then specific to the values and used once.
    transparent (vmap): the trace does not stop a concrete trace opened
    inside it."""
    return _core.trace(flat, list(avals), values, transparent)


def _is_float(dt):
    return _dt.is_inexact(np.dtype(dt))


def _zeros(aval):
    from olympus import numpy as jnp
    shape, dt, _ = aval
    return jnp.zeros(shape, dt)


def _ones_like(x):
    from olympus import numpy as jnp
    return jnp.ones(np.shape(x) if not hasattr(x, "shape") else x.shape, x.dtype)


def _fun_name(fun):
    return getattr(fun, "__name__", None) or type(fun).__name__


def _wraps(fun, prefix):
    def deco(f):
        try:
            functools.update_wrapper(f, fun)
            f.__name__ = f"{prefix}({_fun_name(fun)})"
            f.__qualname__ = f.__name__
        except Exception:  # noqa: BLE001 - callables without metadata
            pass
        return f
    return deco


def _cast_to(x, aval):
    """x (a leaf) converted and broadcast to aval (shape, dtype, weak)."""
    from olympus import lax
    from olympus import numpy as jnp
    shape, dt, _ = aval
    x = _leaf_value(x)
    if np.dtype(x.dtype) != np.dtype(dt):
        x = lax.convert_element_type(x, dt)
    if tuple(x.shape) != tuple(shape):
        x = jnp.broadcast_to(x, shape)
    return x


def _check_tangent_dtype(t, aval, rule_fn, name):
    """A custom JVP rule's tangent for a float or complex primal output must
    have the primal's dtype (a Python scalar, weakly typed, is converted)."""
    shape, dt, _ = aval
    if not _dt.is_inexact(np.dtype(dt)) or isinstance(t, (int, float, complex)):
        return
    tdt = np.dtype(t.dtype)
    if tdt != np.dtype(dt) and not (getattr(t, "weak_type", False) and _dt.is_inexact(tdt)):
        want = f"{np.dtype(dt).name}{list(shape)}"
        raise TypeError(f"Custom JVP rule {_fun_name(rule_fn)} for function {name} must "
                        "produce primal and tangent outputs with corresponding shapes and "
                        f"dtypes. Expected {want} (tangent type of {want}) but got "
                        f"{tdt.name}{list(t.shape)}.")


def install_tracer_item():
    """Tracer.item reads the value a concrete trace's tracer carries, as the
    reference's item() does for concrete tracers; other tracers raise as
    before. (tolist and numpy.asarray stay errors on every tracer, as in the
    reference.) Called after array_methods.install, which sets item on both
    types."""
    array_item = _core.Array.item

    @functools.wraps(array_item)
    def item(self, *args):
        v = _core.concrete_value(self)
        return array_item(self if v is None else v, *args)
    _core.Tracer.item = item


# ------------------------------------------------------------------ vmap

def _prefix_leaves(prefix, tree, what, is_axis):
    """The per-leaf values of a tree prefix `prefix` of `tree` (JAX's in_axes /
    out_axes convention: a leaf of the prefix applies to a whole subtree)."""
    if is_axis(prefix):
        return [prefix] * len(tree_flatten(tree)[0])
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)) \
            and len(prefix) == len(tree):
        out = []
        for p, t in zip(prefix, tree):
            out += _prefix_leaves(p, t, what, is_axis)
        return out
    if isinstance(prefix, dict) and isinstance(tree, dict) and set(prefix) == set(tree):
        out = []
        for k in sorted(tree):
            out += _prefix_leaves(prefix[k], tree[k], what, is_axis)
        return out
    raise ValueError(f"{what} specification must be a tree prefix of the corresponding "
                     f"value, got specification {prefix!r} for value tree "
                     f"{tree_flatten(tree)[1]}.")


def _is_axis(x):
    return x is None or (isinstance(x, (int, np.integer)) and not isinstance(x, bool))


def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """Vectorising map: `vmap(f)(xs)` computes `f` on every slice of xs along
    the mapped axes and stacks the results along out_axes.

    in_axes: an int, None (not mapped) or a tuple with one entry per positional
    argument (entries may themselves be pytree prefixes); negative axes count
    from the end. out_axes likewise for the output. axis_size is needed only
    when no input is mapped. Keyword arguments are mapped over axis 0.

    axis_name (a str) names the mapped axis for the collectives f calls
    (olympus.lax.psum, all_gather, axis_index, ...: they act over the batch);
    vmaps with different names nest. spmd_axis_name is accepted and has no
    effect (it places batches on mesh axes, and there is no mesh yet).
    """
    if not callable(fun):
        raise TypeError(f"vmap requires a callable argument, got {fun!r}")
    if axis_name is not None:
        _parallel.check_axis_name(axis_name)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (_is_axis(in_axes) or isinstance(in_axes, (tuple, dict))):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        f"to the positional arguments passed to the function, but got {in_axes}.")

    @_wraps(fun, "vmap")
    def vmap_f(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries "
                             "corresponding to the positional arguments passed to the function, "
                             f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
        axes = _prefix_leaves(in_axes, args, "vmap in_axes", _is_axis)
        axes += [0] * len(tree_flatten(kwargs)[0])
        leaves, in_tree = tree_flatten((args, kwargs))
        given = list(leaves)  # unmapped leaves reach fun as the user passed them
        leaves = [_leaf_value(x) if _is_array_like(x) else x for x in leaves]
        for x in leaves:
            if not _is_array_like(x):
                raise TypeError(f"vmap: argument of type {type(x)} is not a valid olympus type")
        avals, bdims, sizes = [], [], []
        for x, ax in zip(leaves, axes):
            shape, dt, weak = _aval(x)
            if ax is None:
                avals.append((shape, dt, weak))
                bdims.append(-1)
                continue
            ax = operator.index(ax)
            nd = len(shape)
            if not -nd <= ax < nd:
                raise ValueError(f"vmap was requested to map its argument along axis {ax}, which "
                                 f"implies that its rank should be at least {ax + 1 if ax >= 0 else -ax}, "
                                 f"but is only {nd} (its shape is {shape})")
            ax %= nd
            sizes.append((shape[ax], shape, ax))
            avals.append((shape[:ax] + shape[ax + 1:], dt, weak))
            bdims.append(ax)
        size_set = {s for s, _, _ in sizes}
        if axis_size is not None:
            size_set.add(operator.index(axis_size))
        if not sizes and axis_size is None:
            raise ValueError("vmap must have at least one non-None value in in_axes")
        if len(size_set) > 1:
            lines = [f"  * one axis had size {s}: axis {ax} of an argument of shape {shape}"
                     for s, shape, ax in sizes]
            if axis_size is not None:
                lines.append(f"  * axis_size was given as {axis_size}")
            raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n" +
                             "\n".join(lines))
        n = size_set.pop()
        store = []
        # Only mapped leaves are traced; unmapped ones are closed over as given
        # (a Python int stays an int, so range(n) works), as JAX does.
        mapped = [i for i, b in enumerate(bdims) if b >= 0]
        flat = _flat_fun(fun, in_tree, store)

        def flat_mapped(*xs):
            full = list(given)
            for i, x in zip(mapped, xs):
                full[i] = x
            return flat(*full)
        with _parallel.axis_frame(axis_name, n):
            prog, captured = _trace(flat_mapped, [avals[i] for i in mapped], transparent=True)
        leaves = [leaves[i] for i in mapped]
        bdims = [bdims[i] for i in mapped]
        out_tree = store[-1]
        n_out = prog.n_out
        dummy = tree_unflatten(out_tree, [0] * n_out)
        oaxes = _prefix_leaves(out_axes, dummy, "vmap out_axes", _is_axis)
        oax = []
        for ax, aval in zip(oaxes, prog.out_avals):
            if ax is None:
                oax.append(-1)
                continue
            ax = operator.index(ax)
            nd = len(aval.shape) + 1
            if not -nd <= ax < nd:
                raise ValueError(f"vmap out_axes {ax} is out of bounds for an output of rank {nd}")
            oax.append(ax % nd)
        try:
            with _parallel.axis_frame(axis_name, n):  # custom rules traced while batching
                bprog = _core.vmap_program(prog, bdims + [-1] * len(captured), n, oax,
                                           axis_name)
        except ValueError as e:
            if "out_axes" in str(e) or "must not depend" in str(e) or "depends on" in str(e):
                raise ValueError("vmap has mapped output but out_axes is None: " + str(e)) from None
            raise
        outs = _core.call_program(bprog, leaves + list(captured))
        return tree_unflatten(out_tree, list(outs))

    return vmap_f


# ------------------------------------------------------------------ forward mode

def _check_tuple(x, who, what):
    if not isinstance(x, (tuple, list)):
        raise TypeError(f"{what} arguments to {who} must be tuples or lists; found "
                        f"{type(x).__name__}.")


def jvp(fun, primals, tangents, has_aux=False):
    """(fun(*primals), the directional derivative of fun at primals along
    tangents). With has_aux, fun returns (out, aux) and jvp returns
    (out, tangent_out, aux)."""
    _check_tuple(primals, "olympus.jvp", "primal")
    _check_tuple(tangents, "olympus.jvp", "tangent")
    if len(primals) != len(tangents):
        raise ValueError("jvp called with different primal and tangent structures: "
                         f"{len(primals)} primals and {len(tangents)} tangents")
    leaves, in_tree = tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_flatten(tuple(tangents))
    if in_tree != t_tree:
        raise TypeError("primal and tangent arguments to olympus.jvp must have the same tree "
                        f"structure; primals have tree structure {in_tree} whereas tangents "
                        f"have tree structure {t_tree}.")
    leaves = [_leaf_value(x) for x in leaves]
    avals = [_aval(x) for x in leaves]
    for (ps, pd, _), t in zip(avals, t_leaves):
        ts = tuple(np.shape(t)) if not hasattr(t, "shape") else tuple(t.shape)
        if ts != ps:
            raise ValueError("olympus.jvp called with different primal and tangent shapes; "
                             f"Got primal shape {ps} and tangent shape as {ts}")
    store = []
    flat = _flat_fun(lambda *a: _aux_split(fun(*a), has_aux, store), in_tree, [], kw=False)
    prog, captured = _trace(flat, avals, leaves)
    out_tree, aux_tree, n_main = store[-1]
    nz = [_is_float(a[1]) for a in avals] + [False] * len(captured)
    jprog, nz_out = _core.jvp_program(prog, nz)
    t_args = [_cast_to(t, a) for t, a, z in zip(t_leaves, avals, nz) if z]
    outs = _core.call_program(jprog, leaves + list(captured) + t_args)
    n_out = prog.n_out
    primal_out = list(outs[:n_out])
    tans = iter(outs[n_out:])
    tan_out = [next(tans) if z else _zeros(a) for z, a in zip(nz_out, prog.out_avals)]
    y = tree_unflatten(out_tree, primal_out[:n_main])
    ty = tree_unflatten(out_tree, tan_out[:n_main])
    if has_aux:
        return y, ty, tree_unflatten(aux_tree, primal_out[n_main:])
    return y, ty


def _aux_split(out, has_aux, store):
    """Flatten (out, aux) into one list of leaves, recording both treedefs."""
    if has_aux:
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("has_aux=True requires the function to return a pair (out, aux), "
                            f"got {type(out).__name__}")
        main, aux = out
    else:
        main, aux = out, None
    m_leaves, m_tree = tree_flatten(main)
    a_leaves, a_tree = tree_flatten(aux)
    store.append((m_tree, a_tree, len(m_leaves)))
    return m_leaves + a_leaves


class _Linearized:
    """What linearize/vjp keep: the linear program, residuals and masks."""

    def __init__(self, fun, primals, has_aux):
        leaves, in_tree = tree_flatten(tuple(primals))
        leaves = [_leaf_value(x) for x in leaves]
        self.in_tree = in_tree
        self.avals = [_aval(x) for x in leaves]
        store = []
        flat = _flat_fun(lambda *a: _aux_split(fun(*a), has_aux, store), in_tree, [], kw=False)
        prog, captured = _trace(flat, self.avals, leaves)
        self.out_tree, self.aux_tree, self.n_main = store[-1]
        self.nz = [_is_float(a[1]) for a in self.avals]
        nz = self.nz + [False] * len(captured)
        try:
            primal, self.linear, self.n_res, nz_out = _core.linearize_program(prog, nz)
        except RuntimeError as e:
            if "depends on tangents" in str(e) and "while[" in str(prog):
                raise ValueError(
                    "Reverse-mode differentiation does not work for lax.while_loop or "
                    "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                    "using fori_loop with static start/stop.") from e
            raise
        self.out_avals = prog.out_avals
        self.nz_out = nz_out
        outs = _core.call_program(primal, leaves + list(captured))
        self.n_out = prog.n_out
        self.outs = list(outs[:self.n_out])
        self.res = list(outs[self.n_out:])
        self._t = None

    def primal_out(self):
        return tree_unflatten(self.out_tree, self.outs[:self.n_main])

    def aux(self):
        return tree_unflatten(self.aux_tree, self.outs[self.n_main:])

    def jvp(self, tangents):
        t_leaves, t_tree = tree_flatten(tuple(tangents))
        if t_tree != self.in_tree:
            raise ValueError(f"linearized function called on tangent values with tree structure "
                             f"{t_tree}, expected {self.in_tree}")
        args = [_cast_to(t, a) for t, a, z in zip(t_leaves, self.avals, self.nz) if z]
        outs = iter(_core.call_program(self.linear, self.res + args))
        tan = [next(outs) if z else _zeros(a) for z, a in zip(self.nz_out, self.out_avals)]
        return tree_unflatten(self.out_tree, tan[:self.n_main])

    def vjp(self, ct):
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != self.out_tree:
            raise ValueError("unexpected tree structure of argument to vjp function: got "
                             f"{ct_tree}, but expected to match {self.out_tree}")
        if self._t is None:
            self._t = _core.transpose_program(self.linear, self.n_res)
        main_nz = self.nz_out[:self.n_main]
        args = []
        for c, a, z in zip(ct_leaves, self.out_avals, main_nz):
            if z:
                cs = tuple(np.shape(c)) if not hasattr(c, "shape") else tuple(c.shape)
                if cs != tuple(a[0]):
                    raise ValueError(f"unexpected shape of cotangent: got {cs}, expected "
                                     f"{tuple(a[0])}")
                args.append(_cast_to(c, a))
        # cotangents of aux outputs that the linear program still returns are zero
        for a, z in zip(self.out_avals[self.n_main:], self.nz_out[self.n_main:]):
            if z:
                args.append(_zeros(a))
        outs = iter(_core.call_program(self._t, self.res + args))
        cts = [next(outs) if z else _zeros(a) for z, a in zip(self.nz, self.avals)]
        return tree_unflatten(self.in_tree, cts)


def linearize(fun, *primals, has_aux=False):
    """(fun(*primals), f_jvp) where f_jvp(*tangents) evaluates the linearised
    function (the JVP at primals) without re-running fun's primal part."""
    lin = _Linearized(fun, primals, has_aux)

    def f_jvp(*tangents):
        return lin.jvp(tangents)
    if has_aux:
        return lin.primal_out(), f_jvp, lin.aux()
    return lin.primal_out(), f_jvp


def vjp(fun, *primals, has_aux=False):
    """(fun(*primals), vjp_fn) where vjp_fn(ct) returns the cotangents of the
    primals (a tuple with one entry per primal)."""
    lin = _Linearized(fun, primals, has_aux)

    def vjp_fn(ct):
        return lin.vjp(ct)
    if has_aux:
        return lin.primal_out(), vjp_fn, lin.aux()
    return lin.primal_out(), vjp_fn


def _argnums_tuple(argnums, nargs, who):
    single = isinstance(argnums, (int, np.integer))
    nums = (argnums,) if single else tuple(argnums)
    out = []
    for a in nums:
        a = operator.index(a)
        if not -nargs <= a < nargs:
            raise TypeError(f"{who}: argnums {a} is out of bounds for a function of "
                            f"{nargs} positional arguments")
        out.append(a % nargs)
    if len(set(out)) != len(out):
        raise ValueError(f"{who}: argnums {nums} has duplicates (after resolving negative "
                         f"indices: {tuple(out)}); each argument may appear once")
    return single, tuple(out)


def _partial_args(fun, args, nums, kwargs):
    def f_partial(*dyn):
        full = list(args)
        for i, v in zip(nums, dyn):
            full[i] = v
        return fun(*full, **kwargs)
    return f_partial


def _check_input_dtype(x, who, allow_int):
    for leaf in tree_flatten(x)[0]:
        dt = np.dtype(_aval(leaf)[1])
        if not _dt.is_inexact(dt) and not allow_int:
            raise TypeError(f"{who} requires real- or complex-valued inputs (input dtype that is "
                            f"a sub-dtype of np.inexact), but got {dt.name}. If you want to use "
                            "Boolean- or integer-valued inputs, use vjp or set allow_int to True.")


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """A function returning (fun(*args), the gradient of fun with respect to
    the arguments argnums). fun must return a scalar (with has_aux: a pair
    (scalar, aux), and the result is ((value, aux), grad))."""
    if not callable(fun):
        raise TypeError(f"grad requires a callable argument, got {fun!r}")

    @_wraps(fun, "value_and_grad")
    def vg(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "grad")
        dyn = [args[i] for i in nums]
        for d in dyn:
            _check_input_dtype(d, "grad", allow_int)
        lin = _Linearized(_partial_args(fun, args, nums, kwargs), dyn, has_aux)
        out_leaves = lin.outs[:lin.n_main]
        if len(out_leaves) != 1 or lin.out_avals[0].shape != ():
            shape = lin.out_avals[0].shape if out_leaves else None
            raise TypeError("Gradient only defined for scalar-output functions. Output "
                            + (f"had shape: {shape}." if len(out_leaves) == 1 else
                               f"was: {lin.primal_out()!r}."))
        odt = lin.out_avals[0].dtype
        if not _dt.is_inexact(odt):
            raise TypeError("grad requires real-valued outputs (output dtype that is a sub-dtype "
                            f"of np.floating), but got {odt.name}. For holomorphic "
                            "differentiation, pass holomorphic=True.")
        y = out_leaves[0]
        g = lin.vjp(tree_unflatten(lin.out_tree, [_ones_like(y)]))
        g = g[0] if single else tuple(g)
        value = lin.primal_out()
        if has_aux:
            return (value, lin.aux()), g
        return value, g

    return vg


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of scalar-valued fun with respect to argument argnums (an
    int or a tuple of ints). With has_aux, fun returns (scalar, aux) and the
    result is (grad, aux)."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @_wraps(fun, "grad")
    def g(*args, **kwargs):
        (v, g_), = [vg(*args, **kwargs)]
        if has_aux:
            return g_, v[1]
        return g_
    return g


# ------------------------------------------------------------------ Jacobians

def _std_basis(leaves):
    """An identity basis over the flattened leaves: per leaf, (N, *shape)."""
    from olympus import numpy as jnp
    sizes = [int(np.prod(np.shape(x) if not hasattr(x, "shape") else x.shape, dtype=np.int64))
             for x in leaves]
    n = sum(sizes)
    dt = _dt.result_type(*[_aval(x)[1] for x in leaves]) if leaves else np.float32
    if not _dt.is_inexact(np.dtype(dt)):
        dt = _dt.default_float()
    eye = np.eye(n, dtype=dt)
    out, k = [], 0
    for x, s in zip(leaves, sizes):
        shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
        out.append(jnp.asarray(eye[:, k:k + s].reshape((n,) + tuple(shape))))
        k += s
    return out


def _split_axis(x, sizes, axis):
    """x split along axis into pieces of the given sizes."""
    from olympus import lax
    out, k = [], 0
    nd = len(x.shape)
    axis %= nd
    for s in sizes:
        out.append(lax.slice_in_dim(x, k, k + s, axis=axis))
        k += s
    return out


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of fun by forward mode: vmap of jvp over a standard basis.
    For an output of shape O and an input of shape I the block has shape O + I."""
    from olympus import numpy as jnp

    @_wraps(fun, "jacfwd")
    def jacfun(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "jacfwd")
        dyn = tuple(args[i] for i in nums)
        for d in dyn:
            _check_input_dtype(d, "jacfwd", allow_int)
        f_partial = _partial_args(fun, args, nums, kwargs)
        in_leaves, in_tree = tree_flatten(dyn)
        in_leaves = [_leaf_value(x) for x in in_leaves]
        basis = _std_basis(in_leaves)

        def push(*b):
            t = tree_unflatten(in_tree, list(b))
            if has_aux:
                y, ty, aux = jvp(f_partial, tree_unflatten(in_tree, in_leaves), t, has_aux=True)
                return y, ty, aux
            y, ty = jvp(f_partial, tree_unflatten(in_tree, in_leaves), t)
            return y, ty
        out_axes = (None, -1, None) if has_aux else (None, -1)
        res = vmap(push, in_axes=0, out_axes=out_axes)(*basis)
        y, jac = res[0], res[1]
        sizes = [int(np.prod(x.shape, dtype=np.int64)) for x in in_leaves]
        shapes = [tuple(x.shape) for x in in_leaves]

        def unravel(j):
            pieces = _split_axis(j, sizes, -1)
            blocks = [jnp.reshape(p, tuple(j.shape[:-1]) + s) for p, s in zip(pieces, shapes)]
            tree = tree_unflatten(in_tree, blocks)
            return tree[0] if single else tree
        j_leaves, j_tree = tree_flatten(jac)
        out = tree_unflatten(j_tree, [unravel(j) for j in j_leaves])
        if has_aux:
            return out, res[2]
        return out
    return jacfun


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of fun by reverse mode: vmap of vjp over a standard basis
    of the outputs. For an output of shape O and an input of shape I the
    block has shape O + I."""
    from olympus import numpy as jnp

    @_wraps(fun, "jacrev")
    def jacfun(*args, **kwargs):
        single, nums = _argnums_tuple(argnums, len(args), "jacrev")
        dyn = tuple(args[i] for i in nums)
        for d in dyn:
            _check_input_dtype(d, "jacrev", allow_int)
        f_partial = _partial_args(fun, args, nums, kwargs)
        if has_aux:
            y, pullback, aux = vjp(f_partial, *dyn, has_aux=True)
        else:
            y, pullback = vjp(f_partial, *dyn)
        y_leaves, y_tree = tree_flatten(y)
        y_leaves = [_leaf_value(v) for v in y_leaves]
        basis = _std_basis(y_leaves)
        jac = vmap(lambda *b: pullback(tree_unflatten(y_tree, list(b))))(*basis)
        # jac: tuple over dyn args of trees with leaves (M, *in_shape)
        sizes = [int(np.prod(v.shape, dtype=np.int64)) for v in y_leaves]
        out_shapes = [tuple(v.shape) for v in y_leaves]
        in_leaves, in_tree = tree_flatten(jac)
        per_out = [[] for _ in y_leaves]
        for j in in_leaves:
            pieces = _split_axis(j, sizes, 0)
            for k, (p, s) in enumerate(zip(pieces, out_shapes)):
                per_out[k].append(jnp.reshape(p, s + tuple(j.shape[1:])))
        blocks = []
        for k in range(len(y_leaves)):
            tree = tree_unflatten(in_tree, per_out[k])
            blocks.append(tree[0] if single else tree)
        out = tree_unflatten(y_tree, blocks)
        if has_aux:
            return out, aux
        return out
    return jacfun


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian of scalar fun: jacfwd(jacrev(fun))."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux), argnums, has_aux=has_aux)


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function fun, traced at the shapes and
    dtypes of primals: `linear_transpose(f, x)(ct)` returns a tuple with one
    cotangent per primal. Integer inputs get zero cotangents."""
    leaves, in_tree = tree_flatten(tuple(primals))
    avals = [_aval(_leaf_value(x)) for x in leaves]
    store = []
    prog, captured = _trace(_flat_fun(fun, in_tree, store, kw=False), avals)
    out_tree = store[-1]
    nz = [_is_float(a[1]) for a in avals]
    n_lin = sum(nz)
    # the linear inputs last, everything else (ints, captured values) first
    rest = [i for i, z in enumerate(nz) if not z]
    order = rest + list(range(len(avals), len(avals) + len(captured))) + \
        [i for i, z in enumerate(nz) if z]
    all_avals = avals + list(prog.in_avals[len(avals):])
    mapping = [0] * len(all_avals)
    for new, old in enumerate(order):
        mapping[old] = new
    p2 = _core.program_with_inputs(prog, [all_avals[i] for i in order], mapping)
    n_res = len(all_avals) - n_lin
    tprog = _core.transpose_program(p2, n_res)
    out_avals = prog.out_avals

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        ct_leaves, ct_tree = tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: cotangent tree structure {ct_tree} does not "
                            f"match the output structure {out_tree}")
        res_vals = [_zeros(avals[i]) for i in rest] + list(captured)
        outs = iter(_core.call_program(tprog, res_vals + [_cast_to(c, a) for c, a in
                                                          zip(ct_leaves, out_avals)]))
        out = [next(outs) if z else _zeros(a) for z, a in zip(nz, avals)]
        return tree_unflatten(in_tree, out)
    return transposed


# ------------------------------------------------------------------ custom rules

def _resolve_args(fun, args, kwargs):
    """kwargs folded into positional arguments through fun's signature."""
    if not kwargs:
        return tuple(args)
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        raise TypeError("keyword arguments to a custom_jvp/custom_vjp function need a "
                        "function with an inspectable signature") from None
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    return tuple(ba.args) + tuple(ba.kwargs.values())


class _Split:
    """Arguments split into static nondiff values and dynamic leaves."""

    def __init__(self, args, nondiff_argnums):
        self.args = args
        self.nondiff = tuple(sorted({operator.index(i) % len(args) if args else i
                                     for i in nondiff_argnums}))
        self.static = {i: args[i] for i in self.nondiff if not _is_array_tree(args[i])}
        self.dyn_pos = [i for i in range(len(args)) if i not in self.static]
        dyn = tuple(args[i] for i in self.dyn_pos)
        leaves, self.in_tree = tree_flatten(dyn)
        self.leaves = [_leaf_value(x) for x in leaves]
        self.avals = [_aval(x) for x in self.leaves]

    def rebuild(self, dyn_leaves):
        """The full argument list from dynamic leaves (tracers)."""
        dyn = tree_unflatten(self.in_tree, list(dyn_leaves))
        full = [None] * len(self.args)
        for i, v in self.static.items():
            full[i] = v
        for i, v in zip(self.dyn_pos, dyn):
            full[i] = v
        return full

    def diff_split(self, full):
        """(nondiff values, diff values) of a full argument list."""
        return ([full[i] for i in self.nondiff],
                tuple(full[i] for i in range(len(full)) if i not in self.nondiff))


def _is_array_tree(x):
    leaves = tree_flatten(x)[0]
    return bool(leaves) and all(_is_array_like(v) and not isinstance(v, (bool, int, float,
                                                                         complex))
                                or _core.is_tracer(v) for v in leaves)


def _custom_values(leaves):
    """The values a custom_jvp / custom_vjp function is traced at: its leaves
    inside an open trace (made concrete when no jit is open, so the function
    and, later, its rules see primal values, as in JAX); None at top level,
    where the function is traced abstractly and run as one program."""
    return list(leaves) if _core.tracing() else None


def _rule_values(known, avals):
    """known (values of a rule's first inputs, or None) padded with None for
    the rest of avals (tangents, cotangents: never concrete). A value of
    another shape or dtype than its input (a rule traced for a batched
    equation) is dropped."""
    if known is None or len(known) > len(avals):
        return None
    out = [None] * len(avals)
    for i, (v, a) in enumerate(zip(known, avals)):
        if v is not None and tuple(v.shape) == tuple(a.shape) and \
                np.dtype(v.dtype) == np.dtype(a.dtype):
            out[i] = v
    return out


def _remap_captured(prog, cap, primal_caps, n, n_in, who):
    """A rule program whose trace captured outer values: each must be one the
    primal function captured too (it is then the primal input n + its index
    there); the rule program is rewired to take its n_in inputs only."""
    if not cap:
        return prog
    mapping = list(range(n_in))
    for c in cap:
        k = next((i for i, u in enumerate(primal_caps) if u is c), None)
        if k is None:
            _no_capture([c], who)
        mapping.append(n + k)
    return _core.program_with_inputs(prog, list(prog.in_avals[:n_in]), mapping)


def _no_capture(captured, who):
    if captured:
        raise TypeError(f"the {who} rule of a custom derivative closes over a traced value of "
                        "an enclosing transformation; pass such values as arguments instead")


class custom_jvp:
    """A function with a custom JVP rule: `f = custom_jvp(f)`, then
    `@f.defjvp def f_jvp(primals, tangents): return primal_out, tangent_out`.
    The rule is traced lazily, only when a transformation needs it, so it may
    call f itself (each differentiation level expands one layer)."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=False):
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        if self.nondiff_argnums:
            raise TypeError("Can't use defjvps with nondiff_argnums.")

        def jvp(primals, tangents):
            primal_out = self(*primals)
            outs = [f(t, primal_out, *primals) for f, t in zip(jvps, tangents) if f is not None]
            if not outs:
                from olympus import tree_util
                return primal_out, tree_util.tree_map(lambda y: y * 0, primal_out)
            from olympus import tree_util
            tan = functools.reduce(lambda a, b: tree_util.tree_map(operator.add, a, b), outs)
            return primal_out, tan
        self.defjvp(jvp)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _resolve_args(self.fun, args, kwargs)
        sp = _Split(args, self.nondiff_argnums)
        store = []

        def flat(*leaves):
            out = self.fun(*sp.rebuild(leaves))
            ol, ot = tree_flatten(out)
            store.append(ot)
            return ol
        values = _custom_values(sp.leaves)
        prog, captured = _trace(flat, sp.avals, values)
        out_tree = store[-1]
        out_avals = prog.out_avals
        n = len(sp.leaves)
        rule_fn = self.jvp
        # the rule sees the primal values the function was called at
        known = None if values is None else values + list(captured)

        def rule(avals, nz):
            k = len(avals)

            def flat_rule(*xs):
                prim, tan = xs[:n], xs[k:k + n]
                full_p = sp.rebuild(prim)
                full_t = sp.rebuild(tan)
                nd, primals = sp.diff_split(full_p)
                _, tangents = sp.diff_split(full_t)
                res = rule_fn(*nd, primals, tangents)
                if not (isinstance(res, (tuple, list)) and len(res) == 2):
                    raise TypeError(f"Custom JVP rule {_fun_name(rule_fn)} for function {name} "
                                    "must produce a pair (list or tuple of length two) "
                                    "representing primal and tangent outputs, but got "
                                    f"{res!r}.")
                p_out, t_out = res
                pl, pt = tree_flatten(p_out)
                tl, tt = tree_flatten(t_out)
                if pt != out_tree:
                    raise TypeError(f"Custom JVP rule {_fun_name(rule_fn)} for function {name} "
                                    "must produce primal and tangent outputs with equal "
                                    f"container (pytree) structures, but got {pt} and "
                                    f"expected {out_tree}.")
                if tt != pt:
                    raise TypeError(f"Custom JVP rule {_fun_name(rule_fn)} for function {name} "
                                    "must produce primal and tangent outputs with equal "
                                    f"container (pytree) structures, but got {pt} and {tt} "
                                    "respectively.")
                pl = [_cast_to(v, a) for v, a in zip(pl, out_avals)]
                for v, a in zip(tl, out_avals):
                    _check_tangent_dtype(v, a, rule_fn, name)
                tl = [_cast_to(v, a) for v, a in zip(tl, out_avals)]
                return pl + tl
            prog_r, cap = _trace(flat_rule, list(avals) + list(avals),
                                 _rule_values(known, list(avals) + list(avals)))
            return _remap_captured(prog_r, cap, captured, n, 2 * k, "custom_jvp")
        outs = _core.custom_jvp_call(name, prog, rule, sp.leaves + list(captured))
        return tree_unflatten(out_tree, list(outs))


class custom_vjp:
    """A function with a custom VJP: `f = custom_vjp(f)`, then
    `f.defvjp(fwd, bwd)` with fwd(*args) -> (out, residuals) and
    bwd(residuals, out_cotangent) -> a tuple with one cotangent per argument
    (None for zero)."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def defvjp(self, fwd, bwd, symbolic_zeros=False, optimize_remat=False):
        self.fwd = fwd
        self.bwd = bwd

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        name = _fun_name(self.fun)
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _resolve_args(self.fun, args, kwargs)
        sp = _Split(args, self.nondiff_argnums)
        store = []

        def flat(*leaves):
            out = self.fun(*sp.rebuild(leaves))
            ol, ot = tree_flatten(out)
            store.append(ot)
            return ol
        values = _custom_values(sp.leaves)
        prog, captured = _trace(flat, sp.avals, values)
        out_tree = store[-1]
        out_avals = prog.out_avals
        n = len(sp.leaves)
        n_cap = len(captured)
        fwd_fn, bwd_fn = self.fwd, self.bwd
        res_tree = []
        # fwd sees the primal values, bwd the residuals' values fwd computed
        known = None if values is None else values + list(captured)
        res_known = []

        def fwd_rule(avals, nz):
            def flat_fwd(*xs):
                res = fwd_fn(*sp.rebuild(xs[:n]))
                if not (isinstance(res, (tuple, list)) and len(res) == 2):
                    raise TypeError(f"Custom VJP fwd rule {_fun_name(fwd_fn)} for function "
                                    f"{name} must produce a pair (list or tuple of length two) "
                                    "where the first element represents the primal output and "
                                    "the second element represents residuals.")
                out, r = res
                ol, ot = tree_flatten(out)
                if ot != out_tree:
                    raise TypeError(f"Custom VJP fwd rule {_fun_name(fwd_fn)} for function "
                                    f"{name} must produce a primal output with the structure "
                                    f"{out_tree} of the function's output, got {ot}.")
                rl, rt = tree_flatten(r)
                # array-valued nondiff arguments travel to bwd as extra residuals
                full = sp.rebuild(xs[:n])
                nd_dyn = [full[i] for i in sp.nondiff if i not in sp.static]
                nd_leaves, nd_tree = tree_flatten(nd_dyn)
                res_tree.append((rt, len(rl), nd_tree))
                ol = [_cast_to(v, a) for v, a in zip(ol, out_avals)]
                res = [_leaf_value(v) for v in rl] + [_leaf_value(v) for v in nd_leaves]
                res_known.append(res)
                return ol + res
            p, cap = _trace(flat_fwd, avals, _rule_values(known, avals))
            return _remap_captured(p, cap, captured, n, len(avals), "custom_vjp fwd")

        def bwd_rule(avals, nz):
            m = len(out_avals)
            r = len(avals) - m
            diff_pos = [i for i in range(len(sp.args)) if i not in sp.nondiff]

            def flat_bwd(*xs):
                rt, n_user, nd_tree = res_tree[-1]
                res = tree_unflatten(rt, list(xs[:n_user]))
                nd_dyn = iter(tree_unflatten(nd_tree, list(xs[n_user:r])))
                ct = tree_unflatten(out_tree, list(xs[r:]))
                nd_vals = [sp.static[i] if i in sp.static else next(nd_dyn) for i in sp.nondiff]
                cts = bwd_fn(*nd_vals, res, ct)
                if not isinstance(cts, (tuple, list)):
                    raise TypeError(f"Custom VJP bwd rule {_fun_name(bwd_fn)} must produce a "
                                    "tuple of length equal to the number of primal inputs, "
                                    f"got {type(cts).__name__}")
                cts = tuple(cts)
                if len(cts) != len(diff_pos):
                    raise TypeError(f"Custom VJP bwd rule must produce an output with the same "
                                    f"container (pytree) structure as the args tuple of the "
                                    f"primal function, and in particular must produce a tuple "
                                    f"of length equal to the number of arguments to the primal "
                                    f"function, but got bwd output of length {len(cts)} for "
                                    f"{len(diff_pos)} arguments.")
                full = list(sp.args)
                for i, c in zip(diff_pos, cts):
                    full[i] = c
                outs = []
                for i in sp.dyn_pos:
                    a_leaves = tree_flatten(sp.args[i])[0]
                    if i in sp.nondiff or full[i] is None:
                        outs += [None] * len(a_leaves)
                    else:
                        c_leaves = tree_flatten(full[i], is_leaf=lambda x: x is None)[0]
                        if len(c_leaves) != len(a_leaves):
                            raise TypeError("Custom VJP bwd rule must produce an output with "
                                            "the same container (pytree) structure as the args "
                                            "tuple of the primal function")
                        outs += c_leaves
                return [_zeros(a) if c is None else _cast_to(c, a)
                        for c, a in zip(outs, sp.avals)] + \
                    [_zeros(a) for a in prog.in_avals[n:n + n_cap]]
            rk = res_known[-1] if res_known and known is not None else None
            p, cap = _trace(flat_bwd, avals, _rule_values(rk, avals))
            _no_capture(cap, "custom_vjp bwd")
            return p
        outs = _core.custom_vjp_call(name, prog, fwd_rule, bwd_rule, sp.leaves + list(captured))
        return tree_unflatten(out_tree, list(outs))


def checkpoint(fun, prevent_cse=True, policy=None, static_argnums=()):
    """Rematerialisation: fun becomes one `remat` equation, which
    differentiation keeps whole, so the backward pass recomputes fun's primal
    part from its inputs instead of saving intermediates — callbacks inside
    fun run again in the backward pass. static_argnums are passed as Python
    values; policy is accepted and ignored (nothing is saved)."""
    static = tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else \
        ((static_argnums,) if static_argnums is not None else ())

    @_wraps(fun, "checkpoint")
    def remat_f(*args, **kwargs):
        nd = {operator.index(i) % len(args) for i in static} if args else set()
        dyn_pos = [i for i in range(len(args)) if i not in nd]
        leaves, in_tree = tree_flatten(([args[i] for i in dyn_pos], kwargs))
        leaves = [_leaf_value(x) for x in leaves]
        store = []

        def flat(*xs):
            dyn, kw = tree_unflatten(in_tree, list(xs))
            full = list(args)
            for i, v in zip(dyn_pos, dyn):
                full[i] = v
            out = fun(*full, **kw)
            ol, ot = tree_flatten(out)
            store.append(ot)
            return ol
        prog, captured = _trace(flat, [_aval(x) for x in leaves])
        outs = _core.bind_subs("remat", leaves + list(captured),
                               {"name": _fun_name(fun), "n_out": prog.n_out}, [prog])
        return tree_unflatten(store[-1], list(outs))
    return remat_f


remat = checkpoint


def eval_shape(fun, *args, **kwargs):
    """The output of fun(*args, **kwargs) as ShapeDtypeStructs, found by
    tracing (nothing runs). Arguments may be arrays or objects with
    .shape and .dtype (ShapeDtypeStruct)."""
    from olympus._src.api import ShapeDtypeStruct

    def leaf_aval(x):
        if _is_array_like(x):
            return _aval(_leaf_value(x))
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return (tuple(x.shape), np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
        raise TypeError(f"eval_shape: argument of type {type(x).__name__} is not an array "
                        "or a ShapeDtypeStruct")
    leaves, in_tree = tree_flatten((args, kwargs))
    store = []
    prog, _ = _trace(_flat_fun(fun, in_tree, store), [leaf_aval(x) for x in leaves])
    outs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in prog.out_avals]
    return tree_unflatten(store[-1], outs)


def closure_convert(fun, *example_args):
    """(fun, []) — olympus's custom rules accept closures over concrete values."""
    return fun, []
