"""Structured control flow for olympus.lax: cond, switch, while_loop,
fori_loop, scan and map. Each body is traced once into a program (with the
outer traced values it closed over, which become the primitive's extra
operands) and bound as one `cond` / `while` / `scan` equation; vmap, jvp and
transpose then handle the equation through its rules (src/prims/cond.c, src/prims/loop.c).
"""
import operator

import numpy as np

from olympus import _core
from olympus._src import dtypes as _dt
from olympus._src.ad import _aval, _leaf_value, _is_array_like

tree_flatten = _core.tree_flatten
tree_unflatten = _core.tree_unflatten

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]


def _flatten_operands(tree, who):
    leaves, treedef = tree_flatten(tree)
    for x in leaves:
        if not _is_array_like(x):
            raise TypeError(f"{who}: operand of type {type(x).__name__} is not a valid "
                            "olympus type")
    leaves = [_leaf_value(x) for x in leaves]
    return leaves, treedef, [_aval(x) for x in leaves]


def _trace_body(fun, in_tree, avals, unpack):
    """(program, captured, out_treedef) of fun traced on avals."""
    store = []

    def flat(*leaves):
        args = tree_unflatten(in_tree, list(leaves))
        out = fun(*args) if unpack else fun(args)
        ol, ot = tree_flatten(out)
        store.append(ot)
        return ol
    prog, captured = _core.trace(flat, list(avals))
    return prog, list(captured), store[-1]


def _same(a, b):
    return tuple(a[0]) == tuple(b[0]) and np.dtype(a[1]) == np.dtype(b[1])


def _fmt(avals):
    return "[" + ", ".join(f"ShapedArray({np.dtype(d).name}{list(s)})" for s, d, _ in avals) + "]"


def _move_captured_first(prog, n_explicit, caps):
    """prog with inputs (explicit..., captured...) reordered to (captured..., explicit...)."""
    avals = prog.in_avals
    nc = len(caps)
    if nc == 0:
        return prog
    new_avals = list(avals[n_explicit:]) + list(avals[:n_explicit])
    mapping = [nc + i for i in range(n_explicit)] + list(range(nc))
    return _core.program_with_inputs(prog, new_avals, mapping)


def _promote_weak(leaves, avals, out_avals):
    """JAX's rule for loop carries: a weakly typed initial value (a Python
    scalar) takes the dtype the body gives it. (leaves, avals, changed)."""
    from olympus import lax
    changed = False
    leaves, avals = list(leaves), list(avals)
    for i, (a, o) in enumerate(zip(avals, out_avals)):
        if a[2] and tuple(a[0]) == tuple(o[0]) and np.dtype(a[1]) != np.dtype(o[1]):
            dt, weak = _core.result_type(leaves[i], np.dtype(o[1]))
            if np.dtype(dt) == np.dtype(a[1]):
                continue
            leaves[i] = lax.convert_element_type(leaves[i], dt, weak=bool(weak and o[2]))
            avals[i] = _aval(leaves[i])
            changed = True
    return leaves, avals, changed


def _union(lists):
    out = []
    for lst in lists:
        for v in lst:
            if not any(v is u for u in out):
                out.append(v)
    return out


def _with_union_inputs(prog, n_ops, op_avals, caps, all_caps):
    """prog (ops..., caps...) as a program taking (ops..., all_caps...)."""
    cap_avals = [_aval(c) for c in all_caps]
    mapping = list(range(n_ops))
    for c in caps:
        k = next(i for i, u in enumerate(all_caps) if u is c)
        mapping.append(n_ops + k)
    return _core.program_with_inputs(prog, list(op_avals) + cap_avals, mapping)


# ------------------------------------------------------------------ cond / switch

def _branches(branches, operands, who):
    leaves, in_tree, avals = _flatten_operands(tuple(operands), who)
    traced = [_trace_body(b, in_tree, avals, True) for b in branches]
    out_tree = traced[0][2]
    out_avals = traced[0][0].out_avals
    for prog, _, ot in traced[1:]:
        if ot != out_tree:
            raise TypeError(f"{who}: branch outputs must have the same pytree structure, got "
                            f"{out_tree} and {ot}")
        oa = prog.out_avals
        if len(oa) != len(out_avals) or not all(_same(a, b) for a, b in zip(oa, out_avals)):
            raise TypeError(f"{who}: branch outputs must have identical types, got "
                            f"{_fmt(out_avals)} and {_fmt(oa)}")
    all_caps = _union([c for _, c, _ in traced])
    progs = [_with_union_inputs(p, len(leaves), avals, c, all_caps) for p, c, _ in traced]
    return leaves, all_caps, progs, out_tree


def _scalar_index(x, who):
    shape = tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)
    if shape != ():
        raise TypeError(f"{who}: the predicate/index must be a scalar, got shape {shape}")


def cond(pred, true_fun, false_fun, *operands, operand=None):
    """true_fun(*operands) if pred else false_fun(*operands), as one `cond`
    equation: both branches are traced, only one runs (under vmap with a
    batched predicate both run and the results are selected)."""
    if operand is not None:
        operands = (operand,) + operands
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun arguments should be callable.")
    _scalar_index(pred, "cond")
    pred = _leaf_value(pred)
    dt = np.dtype(pred.dtype)
    if dt != np.bool_:
        pred = pred != 0
    leaves, caps, progs, out_tree = _branches([false_fun, true_fun], operands, "cond")
    outs = _core.bind_subs("cond", [pred] + leaves + caps, {"n_out": progs[0].n_out}, progs)
    return tree_unflatten(out_tree, list(outs))


def switch(index, branches, *operands, operand=None):
    """branches[index](*operands) with index clamped to [0, len(branches) - 1]."""
    if operand is not None:
        operands = (operand,) + operands
    branches = list(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    for b in branches:
        if not callable(b):
            raise TypeError("switch: every branch must be callable")
    _scalar_index(index, "switch")
    index = _leaf_value(index)
    dt = np.dtype(index.dtype)
    if not (_dt.is_integer(dt) or dt == np.bool_):
        raise TypeError(f"Index type must be an integer, got {index!r}.")
    from olympus import lax
    if dt != np.int32:
        index = lax.convert_element_type(index, np.int32)
    if len(branches) == 1:
        leaves, caps, progs, out_tree = _branches(branches, operands, "switch")
        outs = _core.call_program(progs[0], leaves + caps)
        return tree_unflatten(out_tree, list(outs))
    leaves, caps, progs, out_tree = _branches(branches, operands, "switch")
    outs = _core.bind_subs("cond", [index] + leaves + caps, {"n_out": progs[0].n_out}, progs)
    return tree_unflatten(out_tree, list(outs))


# ------------------------------------------------------------------ loops

def while_loop(cond_fun, body_fun, init_val):
    """Repeat val = body_fun(val) while cond_fun(val); returns the final val."""
    leaves, tree, avals = _flatten_operands(init_val, "while_loop")
    cprog, ccaps, ctree = _trace_body(cond_fun, tree, avals, False)
    co = cprog.out_avals
    if len(co) != 1 or tuple(co[0][0]) != () or np.dtype(co[0][1]) != np.bool_:
        raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                        f"{_fmt(co)}.")
    bprog, bcaps, btree = _trace_body(body_fun, tree, avals, False)
    if btree == tree:
        leaves, avals, changed = _promote_weak(leaves, avals, bprog.out_avals)
        if changed:
            cprog, ccaps, ctree = _trace_body(cond_fun, tree, avals, False)
            bprog, bcaps, btree = _trace_body(body_fun, tree, avals, False)
    bo = bprog.out_avals
    if btree != tree or len(bo) != len(avals) or not all(_same(a, b) for a, b in zip(bo, avals)):
        raise TypeError("body_fun output and input must have identical types, got\n"
                        f"{btree} {_fmt(bo)}\nand\n{tree} {_fmt(avals)}.")
    cprog = _move_captured_first(cprog, len(leaves), ccaps)
    bprog = _move_captured_first(bprog, len(leaves), bcaps)
    outs = _core.bind_subs("while", ccaps + bcaps + leaves,
                           {"cond_nconsts": len(ccaps), "body_nconsts": len(bcaps)},
                           [cprog, bprog])
    return tree_unflatten(tree, list(outs))


def _static_int(x):
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, (_core.Array, np.ndarray)) and np.shape(x) == () and \
            _dt.is_integer(np.dtype(x.dtype)):
        return int(x)
    return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """for i in range(lower, upper): val = body_fun(i, val). With static
    bounds it is a scan (reverse-mode differentiable); else a while_loop."""
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        from olympus import numpy as jnp
        idt = _dt.result_type(lower, upper)
        n = max(hi - lo, 0)
        # Both bounds must fit the index dtype (else the index would wrap):
        # an OverflowError, as for traced bounds.
        jnp.asarray(hi, dtype=idt)

        def step(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None
        i0 = jnp.asarray(lo, dtype=idt)
        (_, out), _ = scan(step, (i0, init_val), None, length=n)
        return out
    from olympus import lax

    lower = _leaf_value(lower)
    upper = _leaf_value(upper)
    idt = _dt.result_type(lower, upper)
    lower = lax.convert_element_type(lower, idt)
    upper = lax.convert_element_type(upper, idt)

    def c(carry):
        return carry[0] < carry[1]

    def b(carry):
        i, u, x = carry
        return i + 1, u, body_fun(i, x)
    return while_loop(c, b, (lower, upper, init_val))[2]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """Loop f(carry, x) -> (carry, y) over the leading axis of xs; returns
    (final carry, ys stacked along a new leading axis)."""
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {f!r}")
    c_leaves, c_tree, c_avals = _flatten_operands(init, "scan")
    x_leaves, x_tree, x_avals = _flatten_operands(xs, "scan")
    sizes = []
    for a in x_avals:
        if len(a[0]) == 0:
            raise ValueError("scan got value with no leading axis to scan over: "
                             f"ShapedArray({np.dtype(a[1]).name}[])")
        sizes.append(a[0][0])
    if length is not None:
        length = operator.index(length)
        if any(s != length for s in sizes):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {sizes}.")
    else:
        if not sizes:
            raise ValueError("scan got no values to scan over and `length` not provided.")
        if len(set(sizes)) > 1:
            raise ValueError("scan got values with different leading axis sizes: " +
                             ", ".join(str(s) for s in sizes) + ".")
        length = sizes[0]
    slice_avals = [(tuple(a[0][1:]), a[1], a[2]) for a in x_avals]
    store = []
    nc = len(c_leaves)

    def flat(*leaves):
        carry = tree_unflatten(c_tree, list(leaves[:nc]))
        x = tree_unflatten(x_tree, list(leaves[nc:]))
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError("scan body output must be a pair, got "
                            f"{type(out).__name__}.")
        new_c, y = out
        cl, ct = tree_flatten(new_c)
        yl, yt = tree_flatten(y)
        store.append((ct, yt, len(cl)))
        return cl + yl
    prog, caps = _core.trace(flat, c_avals + slice_avals)
    ct, yt, ncl = store[-1]
    if ct == c_tree and ncl == nc:
        c_leaves, c_avals, changed = _promote_weak(c_leaves, c_avals, prog.out_avals[:nc])
        if changed:
            prog, caps = _core.trace(flat, c_avals + slice_avals)
            ct, yt, ncl = store[-1]
    caps = list(caps)
    oa = prog.out_avals
    if ct != c_tree or ncl != nc or not all(_same(a, b) for a, b in zip(oa[:nc], c_avals)):
        raise TypeError("scan body function carry input and carry output must have equal "
                        f"types (pytree structure, shapes and dtypes), but they differ: carry "
                        f"input {c_tree} {_fmt(c_avals)}, carry output {ct} {_fmt(oa[:ncl])}")
    body = _move_captured_first(prog, nc + len(x_leaves), caps)
    n_out = prog.n_out
    outs = _core.bind_subs("scan", caps + c_leaves + x_leaves,
                           {"length": length, "num_consts": len(caps), "num_carry": nc,
                            "reverse": bool(reverse), "n_out": n_out}, [body])
    outs = list(outs)
    return tree_unflatten(c_tree, outs[:nc]), tree_unflatten(yt, outs[nc:])


def map(f, xs, *, batch_size=None):
    """[f(x) for x in xs] along the leading axis, as a scan."""
    _, ys = scan(lambda _, x: ((), f(x)), (), xs)
    return ys
