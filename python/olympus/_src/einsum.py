"""einsum and einsum_path: NumPy's Einstein summation over olympus arrays.

einsum works in three steps, all on static shapes (so it runs the same eagerly,
under jit, vmap and grad: only lax ops with rules are emitted):

1. parse: string or interleaved sublist subscripts become one label string per
   operand and one for the output; `...` becomes letters no subscript uses
   (right-aligned, so the operands broadcast as NumPy does); a label's size is
   checked across operands (size 1 broadcasts).
2. path: the order of pairwise contractions -- greedy (the contraction that
   frees the most memory, then the fewest flops), optimal (dynamic programming
   over subsets of operands: fewest flops), left to right, or a path the caller
   gives (einsum_path's format: positions in the current operand list; the
   result goes to the end).
3. contract: an operand on its own first loses its repeated labels (diagonals by
   a reshape + strided slice, no gather) and the labels nobody else needs (one
   reduce_sum); then every pair is ONE lax.dot_general: batch dims are the shared
   labels still needed (by the output or a later operand), contracting dims the
   shared labels not needed. A label of size 1 facing a larger one is squeezed
   out of its operand first (that is NumPy's broadcasting). One transpose at the
   end puts the labels in output order.
"""
import builtins
import math
import operator
import string

import numpy as np

from olympus import lax
from olympus._src import dtypes as _dt
from olympus._src import jnp as _jnp

__all__ = ["einsum", "einsum_path"]

_LETTERS = string.ascii_letters            # the labels a subscript string may use
_SUBLIST = string.ascii_uppercase + string.ascii_lowercase  # sublist int k -> _SUBLIST[k]
_OPTIMAL_MAX = 12  # 'optimal' is O(3^n) in the number of operands


# ------------------------------------------------------------------ parsing

class _Spec:
    """A parsed einsum: `inputs` (one label string per operand, no repeats of
    '...'), `output`, `sizes` (label -> size after broadcasting), `ellipsis`
    (the letters standing for the dims under '...'), `text` (for messages)."""
    __slots__ = ("inputs", "output", "sizes", "ellipsis", "text")


def _sublist_labels(sub, what):
    """A sublist ([0, 1, Ellipsis]) as a subscript string ('AB...')."""
    out = []
    try:
        items = list(sub)
    except TypeError:
        raise TypeError(f"einsum: {what} must be a list of ints in [0, 52) or Ellipsis, "
                        f"got {sub!r}") from None
    for s in items:
        if s is Ellipsis:
            out.append("...")
            continue
        try:
            k = operator.index(s)
        except TypeError:
            k = None
        if k is None or not 0 <= k < len(_SUBLIST):
            raise ValueError(f"einsum: {what} must hold ints in [0, 52) or Ellipsis, "
                             f"got {s!r} in {sub!r}")
        out.append(_SUBLIST[k])
    return "".join(out)


def _split_args(subscripts, operands):
    """(subscript string, operands) from either calling form."""
    if isinstance(subscripts, str):
        return subscripts, list(operands)
    # interleaved: op0, sub0, op1, sub1, ..., [out]
    args = [subscripts] + list(operands)
    ops = args[0::2]
    subs = args[1::2]
    out = None
    if len(args) % 2 == 1:          # a trailing output sublist
        out = ops.pop()
        out = _sublist_labels(out, "the output sublist")
    terms = [_sublist_labels(s, f"the sublist of operand {i}") for i, s in enumerate(subs)]
    text = ",".join(terms) + ("" if out is None else "->" + out)
    return text, ops


def _check_chars(text):
    for c in text:
        if c not in _LETTERS and c not in ",.->":
            raise ValueError(f"einsum: invalid subscript {c!r} in {text!r}; subscripts are "
                             f"the letters a-z and A-Z, ',' '->' and '...'")


def _split_ellipsis(term, where, text):
    """(letters before '...', letters after, has_ellipsis) of one term."""
    n = term.count(".")
    if n == 0:
        return term, "", False
    if n != 3 or "..." not in term:
        raise ValueError(f"einsum: {where} {term!r} in {text!r} has a '.' that is not part "
                         f"of one '...'")
    head, tail = term.split("...")
    return head, tail, True


def _parse(subscripts, shapes):
    """The _Spec of subscripts (a string) for operands of the given shapes."""
    text = subscripts.replace(" ", "")
    _check_chars(text)
    if text.count("->") > 1 or text.count("-") != text.count("->") or \
            text.count(">") != text.count("->"):
        raise ValueError(f"einsum: subscripts {text!r} must hold at most one '->' and no "
                         f"other '-' or '>'")
    if "->" in text:
        lhs, out_term = text.split("->")
    else:
        lhs, out_term = text, None
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: subscripts {text!r} name {len(terms)} operand"
                         f"{'s' if len(terms) != 1 else ''} but {len(shapes)} "
                         f"{'were' if len(shapes) != 1 else 'was'} given")
    if out_term is not None and "," in out_term:
        raise ValueError(f"einsum: the output subscripts {out_term!r} in {text!r} must not "
                         f"hold ','")

    parts = []
    used = set(c for c in text if c in _LETTERS)
    n_ell = 0
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        head, tail, ell = _split_ellipsis(term, f"operand {i}'s subscripts", text)
        named = len(head) + len(tail)
        if (not ell and named != len(shape)) or (ell and named > len(shape)):
            raise ValueError(f"einsum: operand {i} has {len(shape)} dims (shape "
                             f"{tuple(shape)}) but its subscripts {term!r} name "
                             f"{'at most ' if ell else ''}{named}"
                             f"{' (plus ...)' if ell else ''}")
        k = len(shape) - named if ell else 0
        n_ell = builtins.max(n_ell, k)
        parts.append((head, tail, k))

    free = [c for c in _LETTERS if c not in used]
    if n_ell > len(free):
        raise ValueError(f"einsum: {text!r} needs {n_ell} labels for the dims under '...' "
                         f"but only {len(free)} letters are unused")
    ell_labels = "".join(free[:n_ell])
    inputs = [head + ell_labels[n_ell - k:] + tail for head, tail, k in parts]

    sizes, seen = {}, {}
    for i, (labels, shape) in enumerate(zip(inputs, shapes)):
        local = {}
        for c, d in zip(labels, shape):
            d = operator.index(d)
            name = "a dim under '...'" if c in ell_labels else f"label {c!r}"
            if c in local and local[c] != d:
                raise ValueError(f"einsum: {name} is repeated in operand {i} (subscripts "
                                 f"{terms[i]!r}, shape {tuple(shape)}) with sizes {local[c]} "
                                 f"and {d}; a diagonal needs equal sizes")
            local[c] = d
            if c not in sizes or sizes[c] == 1:
                sizes[c] = d
                seen[c] = i
            elif d != 1 and d != sizes[c]:
                raise ValueError(f"einsum: {name} has size {sizes[c]} in operand {seen[c]} "
                                 f"(shape {tuple(shapes[seen[c]])}) but size {d} in operand "
                                 f"{i} (shape {tuple(shape)}) in {text!r}; sizes must be "
                                 f"equal or 1")

    if out_term is None:
        flat = "".join(inputs)
        once = sorted(c for c in set(flat) if c not in ell_labels and flat.count(c) == 1)
        output = ell_labels + "".join(once)
    else:
        head, tail, ell = _split_ellipsis(out_term, "the output subscripts", text)
        output = head + (ell_labels if ell else "") + tail
        for c in head + tail:
            if (head + tail).count(c) > 1:
                raise ValueError(f"einsum: output label {c!r} appears more than once in "
                                 f"{out_term!r}")
            if c not in sizes:
                raise ValueError(f"einsum: output label {c!r} in {text!r} does not appear "
                                 f"in the input subscripts {lhs!r}")
    spec = _Spec()
    spec.inputs, spec.output, spec.sizes = inputs, output, sizes
    spec.ellipsis, spec.text = ell_labels, text
    return spec


# ------------------------------------------------------------------ path search

def _size(labels, sizes):
    return math.prod(sizes[c] for c in labels)


def _flops(labels, summed, n_terms, sizes):
    """NumPy's flop estimate of a contraction touching `labels`: one multiply
    per extra term for every element of the joint iteration space, plus one
    add when some label is summed."""
    return _size(labels, sizes) * (builtins.max(1, n_terms - 1) + (1 if summed else 0))


def _left_to_right(n):
    return [(0,)] if n == 1 else [(0, 1)] * (n - 1)


def _greedy(sets, output, sizes, limit):
    """Pairwise path: each step contracts the pair whose result frees the most
    memory (input sizes minus result size), fewer flops breaking ties; pairs
    sharing a label go first, outer products only when no pair does. A result
    over `limit` elements is avoided while any other pair fits."""
    sets = [frozenset(s) for s in sets]
    path = []
    while len(sets) > 1:
        count = {}
        for s in sets:
            for c in s:
                count[c] = count.get(c, 0) + 1
        pairs = [(i, j) for i in range(len(sets)) for j in range(i + 1, len(sets))]
        linked = [(i, j) for i, j in pairs if sets[i] & sets[j]]
        best = None
        for i, j in linked or pairs:
            a, b = sets[i], sets[j]
            both = a | b
            result = frozenset(c for c in both
                               if c in output or count[c] > (c in a) + (c in b))
            rsize = _size(result, sizes)
            key = (limit is not None and rsize > limit,
                   rsize - _size(a, sizes) - _size(b, sizes),
                   _flops(both, len(result) < len(both), 2, sizes))
            if best is None or key < best[0]:
                best = (key, i, j, result)
        _, i, j, result = best
        path.append((i, j))
        sets = [s for k, s in enumerate(sets) if k not in (i, j)] + [result]
    return path or [(0,)]


def _optimal(sets, output, sizes, limit):
    """The pairwise path of fewest flops: dynamic programming over subsets of
    operands (best[S] = cheapest way to reduce the operands in S to one), so
    O(3^n) for n operands; an intermediate over `limit` elements is not allowed
    unless it is the final result."""
    n = len(sets)
    if n > _OPTIMAL_MAX:
        raise ValueError(f"einsum: optimize='optimal' searches all contraction orders and "
                         f"takes at most {_OPTIMAL_MAX} operands, got {n}; use 'greedy'")
    if n == 1:
        return [(0,)]
    total = {}
    for s in sets:
        for c in s:
            total[c] = total.get(c, 0) + 1
    full = (1 << n) - 1
    labels = [None] * (full + 1)   # labels[S]: the labels S's result keeps
    inside = [None] * (full + 1)   # per-label count of operands of S holding it
    inside[0] = {}
    for S in range(1, full + 1):
        low = (S & -S).bit_length() - 1
        cnt = dict(inside[S & (S - 1)])
        for c in sets[low]:
            cnt[c] = cnt.get(c, 0) + 1
        inside[S] = cnt
        labels[S] = frozenset(c for c in cnt if c in output or cnt[c] < total[c])
    best = [None] * (full + 1)     # (flops, largest intermediate, split)
    for i in range(n):
        best[1 << i] = (0, 0, None)
    for S in range(1, full + 1):
        if S & (S - 1) == 0:
            continue
        rsize = _size(labels[S], sizes)
        if limit is not None and rsize > limit and S != full:
            continue
        low = S & -S
        rest = S ^ low
        choice = None
        A = rest
        while True:                # every split {low | A, S minus that}, A a submask of rest
            L = low | A
            R = S ^ L
            if R and best[L] is not None and best[R] is not None:
                both = labels[L] | labels[R]
                cost = best[L][0] + best[R][0] + \
                    _flops(both, len(labels[S]) < len(both), 2, sizes)
                big = builtins.max(best[L][1], best[R][1], rsize)
                if choice is None or (cost, big) < choice[:2]:
                    choice = (cost, big, (L, R))
            if A == 0:
                break
            A = (A - 1) & rest
        best[S] = choice
    if best[full] is None:         # only when a limit rules out every order
        return _greedy(sets, output, sizes, None)
    # the tree as a path: positions in the current list, results appended
    current = [1 << i for i in range(n)]   # ids: operand i is 1 << i, a result its subset
    path = []

    def emit(S):
        split = best[S][2]
        if split is None:
            return
        L, R = split
        emit(L)
        emit(R)
        i, j = sorted((current.index(L), current.index(R)))
        path.append((i, j))
        del current[j], current[i]
        current.append(S)
    emit(full)
    return path


def _check_path(path, n):
    """An explicit path validated against n operands: a list of tuples of
    distinct positions in the current operand list, ending with one operand."""
    steps = list(path)
    if steps and isinstance(steps[0], str):
        if steps[0] != "einsum_path":
            raise ValueError(f"einsum: an explicit path starts with 'einsum_path' or a "
                             f"tuple, got {steps[0]!r}")
        steps = steps[1:]
    out, live = [], n
    for k, step in enumerate(steps):
        try:
            t = tuple(operator.index(p) for p in step)
        except TypeError:
            raise ValueError(f"einsum: path step {k} must be a tuple of operand positions, "
                             f"got {step!r}") from None
        if not t or len(set(t)) != len(t) or builtins.any(not 0 <= p < live for p in t):
            raise ValueError(f"einsum: path step {k} {step!r} must name distinct positions "
                             f"in [0, {live}) (the operands left at that step)")
        out.append(t)
        live -= len(t) - 1
    if live != 1:
        raise ValueError(f"einsum: the path {list(path)!r} leaves {live} operands for "
                         f"{n} given; it must contract them to one")
    return out


def _is(how, name):
    return isinstance(how, str) and how == name


def _own_sets(spec):
    """Each operand's labels once it has been reduced on its own (what the
    contraction steps see): the labels another operand or the output needs."""
    out = frozenset(spec.output)
    sets = []
    for i, term in enumerate(spec.inputs):
        others = set().union(*(spec.inputs[:i] + spec.inputs[i + 1:])) | out
        sets.append(frozenset(c for c in term if c in others))
    return sets


def _find_path(spec, optimize):
    n = len(spec.inputs)
    sets = _own_sets(spec)
    out = frozenset(spec.output)
    limit = None
    how = optimize
    if isinstance(optimize, (list, tuple)) and len(optimize) == 2 and \
            isinstance(optimize[0], str) and optimize[0] != "einsum_path" and \
            not isinstance(optimize[1], (list, tuple)):
        how, limit = optimize[0], optimize[1]       # ('greedy', memory_limit)
    if isinstance(how, (list, tuple)):
        return _check_path(how, n)
    if how is False or how is None or _is(how, "no"):
        return _left_to_right(n)
    if not (how is True or builtins.any(_is(how, k) for k in ("greedy", "optimal", "auto"))):
        raise ValueError(f"einsum: optimize must be 'greedy', 'optimal', 'auto', True, "
                         f"False, 'no', (kind, memory_limit) or a path list, got "
                         f"{optimize!r}")
    if n == 1:
        return [(0,)]
    if how is True or _is(how, "greedy") or (_is(how, "auto") and n > 4):
        return _greedy(sets, out, spec.sizes, limit)
    return _optimal(sets, out, spec.sizes, limit)


# ------------------------------------------------------------------ contraction

def _reduce_alone(x, labels, keep):
    """(x, labels) with repeated labels made one (the diagonal) and the labels
    not in `keep` summed out."""
    while True:
        dup = next((c for c in labels if labels.count(c) > 1), None)
        if dup is None:
            break
        pos = [i for i, c in enumerate(labels) if c == dup]
        rest = [i for i, c in enumerate(labels) if c != dup]
        n, k = x.shape[pos[0]], len(pos)
        x = lax.transpose(x, rest + pos) if rest + pos != list(range(len(labels))) else x
        lead = tuple(x.shape[:len(rest)])
        x = lax.reshape(x, lead + (n ** k,))
        # element (i, i, ..., i) of the k flattened dims sits at i * (1 + n + ... + n^(k-1))
        stride = builtins.sum(n ** e for e in range(k))
        x = lax.slice(x, (0,) * len(lead) + (0,), lead + (n ** k,),
                      (1,) * len(lead) + (stride,))
        labels = "".join(labels[i] for i in rest) + dup
    gone = tuple(i for i, c in enumerate(labels) if c not in keep)
    if gone:
        if np.dtype(x.dtype) == np.bool_:
            x = lax.reduce_or(x, gone)
        else:
            x = lax.reduce_sum(x, gone)
        labels = "".join(c for c in labels if c in keep)
    return x, labels


def _squeeze(x, labels, drop):
    pos = tuple(i for i, c in enumerate(labels) if c in drop)
    if not pos:
        return x, labels
    return lax.squeeze(x, pos), "".join(c for c in labels if c not in drop)


def _contract_pair(x, lx, y, ly, keep, precision):
    """x and y (labels lx, ly) contracted to one array holding the labels in
    `keep`: one dot_general (after squeezing broadcast size-1 labels and summing
    labels only one side has and nobody keeps)."""
    x, lx = _reduce_alone(x, lx, keep | set(ly))
    y, ly = _reduce_alone(y, ly, keep | set(lx))
    sx = dict(zip(lx, x.shape))
    sy = dict(zip(ly, y.shape))
    x_ones = {c for c in lx if c in sy and sx[c] == 1 and sy[c] != 1}
    y_ones = {c for c in ly if c in sx and sy[c] == 1 and sx[c] != 1}
    if x_ones or y_ones:
        x, lx = _squeeze(x, lx, x_ones)
        y, ly = _squeeze(y, ly, y_ones)
        x, lx = _reduce_alone(x, lx, keep | set(ly))
        y, ly = _reduce_alone(y, ly, keep | set(lx))
    shared = [c for c in lx if c in ly]
    batch = [c for c in shared if c in keep]
    summed = [c for c in shared if c not in keep]
    dims = (((tuple(lx.index(c) for c in summed), tuple(ly.index(c) for c in summed)),
             (tuple(lx.index(c) for c in batch), tuple(ly.index(c) for c in batch))))
    out = lax.dot_general(x, y, dims, precision=precision)
    labels = "".join(batch) + "".join(c for c in lx if c not in ly) + \
        "".join(c for c in ly if c not in lx)
    return out, labels


def _run(spec, operands, path, precision):
    """The einsum of operands (one dtype) along path."""
    items = list(zip(operands, spec.inputs))
    output = set(spec.output)

    def needed(others):
        s = set(output)
        for _, lab in others:
            s.update(lab)
        return s

    # each operand on its own first: diagonals, and labels no one else has
    items = [_reduce_alone(x, lab, needed(items[:i] + items[i + 1:]))
             for i, (x, lab) in enumerate(items)]
    for step in path:
        picked = [items[p] for p in step]
        rest = [it for k, it in enumerate(items) if k not in step]
        x, lx = picked[0]
        if len(picked) == 1:
            x, lx = _reduce_alone(x, lx, needed(rest))
        for k in range(1, len(picked)):
            y, ly = picked[k]
            x, lx = _contract_pair(x, lx, y, ly, needed(rest + picked[k + 1:]), precision)
        items = rest + [(x, lx)]
    (x, labels), = items
    x, labels = _reduce_alone(x, labels, output)
    if labels != spec.output:
        x = lax.transpose(x, tuple(labels.index(c) for c in spec.output))
    want = tuple(spec.sizes[c] for c in spec.output)
    if tuple(x.shape) != want:     # defensive: a size-1 label never met its larger partner
        x = _jnp.broadcast_to(x, want)
    return x


def _dtypes(operands, preferred_element_type):
    """(dtype to compute in, weak, dtype of the result)."""
    dt, weak = _dt.result_type(*operands, return_weak=True)
    if preferred_element_type is None:
        return dt, weak, dt
    pref = _dt.canonicalize(preferred_element_type)
    wider = _dt.result_type(dt, pref)   # compute in pref when it holds every operand
    return (pref if wider == pref else dt), False, pref


def einsum(subscripts, *operands, out=None, optimize="greedy", precision=None,
           preferred_element_type=None):
    """NumPy's einsum: the Einstein sum `subscripts` of the operands.

    subscripts is a string ('ij,jk->ik'; implicit output: the labels seen once,
    sorted; '...' broadcasts) or the interleaved form einsum(a, [0, 1], b,
    [1, 2], [0, 2]). optimize picks the contraction order: 'greedy' (default),
    'optimal' (at most 12 operands), 'auto' (optimal for up to 4 operands),
    False / 'no' (left to right), ('greedy' or 'optimal', memory_limit), or a
    path as einsum_path returns it. Every pairwise contraction is one
    lax.dot_general. The operands are promoted to their result_type;
    preferred_element_type sets the result dtype (computing in it when it
    holds the operands' type). out= is not supported (arrays are immutable).
    """
    if out is not None:
        raise NotImplementedError("einsum: out= is not supported; olympus arrays are "
                                  "immutable, use the returned array")
    text, ops = _split_args(subscripts, operands)
    if not ops:
        raise ValueError("einsum: expected at least one operand, got none")
    ops = [_jnp._arr(x) for x in ops]
    spec = _parse(text, [tuple(x.shape) for x in ops])
    path = _find_path(spec, optimize)
    compute, weak, result = _dtypes(ops, preferred_element_type)
    ops = [_jnp._convert(x, compute, weak) for x in ops]
    y = _run(spec, ops, path, precision)
    if np.dtype(y.dtype) != result:
        y = lax.convert_element_type(y, result)
    return y


# ------------------------------------------------------------------ einsum_path

def _report(spec, path):
    """NumPy's einsum_path text for spec contracted along path. The steps'
    costs are those of the operands reduced on their own first (diagonals and
    lonely labels summed, counted as one add per element of the operand)."""
    sizes = spec.sizes
    every = frozenset(spec.inputs[0]).union(*spec.inputs[1:])
    summed = builtins.sum(len(set(s)) for s in spec.inputs) > len(every)
    naive = _flops(every, summed, len(spec.inputs), sizes)
    sets = _own_sets(spec)
    out = frozenset(spec.output)
    cost = builtins.sum(_size(t, sizes) for t, s in zip(spec.inputs, sets) if len(t) != len(s))
    terms = list(spec.inputs)
    rows, biggest, scale = [], 0, 0
    for step in path:
        picked = [sets[p] for p in step]
        rest = [s for k, s in enumerate(sets) if k not in step]
        keep = out.union(*rest) if rest else out
        both = frozenset().union(*picked)
        result = both & keep
        cost += _flops(both, len(result) < len(both), len(step), sizes)
        biggest = builtins.max(biggest, _size(result, sizes))
        scale = builtins.max(scale, len(both))
        lab = "".join(sorted(result))
        current = ",".join(terms[p] for p in step) + "->" + lab
        terms = [t for k, t in enumerate(terms) if k not in step] + [lab]
        sets = rest + [result]
        rows.append((len(both), current, ",".join(terms) + "->" + spec.output))
    speedup = naive / cost if cost else 1.0
    lines = [
        f"  Complete contraction:  {','.join(spec.inputs)}->{spec.output}",
        f"         Naive scaling:  {len(every)}",
        f"     Optimized scaling:  {scale}",
        f"      Naive FLOP count:  {naive:.3e}",
        f"  Optimized FLOP count:  {cost:.3e}",
        f"   Theoretical speedup:  {speedup:3.3f}",
        f"  Largest intermediate:  {float(biggest):.3e} elements",
        "-" * 74,
        f"{'scaling':>6} {'current':>24} {'remaining':>40}",
        "-" * 74,
    ]
    lines += [f"{s:>4}    {c:>24} {r:>40}" for s, c, r in rows]
    return "\n".join(lines)


def einsum_path(subscripts, *operands, optimize="greedy"):
    """(path, text): the contraction order einsum would use for these operands
    (only their shapes are read), as ['einsum_path', (i, j), ...], and NumPy's
    printable report of its cost. optimize as in einsum; False gives the
    left-to-right pairwise path einsum then runs."""
    text, ops = _split_args(subscripts, operands)
    if not ops:
        raise ValueError("einsum_path: expected at least one operand, got none")
    shapes = [tuple(x.shape) if hasattr(x, "shape") else np.shape(x) for x in ops]
    spec = _parse(text, shapes)
    path = _find_path(spec, optimize)
    return ["einsum_path"] + path, _report(spec, path)
