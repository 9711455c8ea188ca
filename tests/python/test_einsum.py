"""jnp.einsum / einsum_path, convolve / correlate and the polynomial functions
(polyfit and roots included) against NumPy: values and dtypes (x64 off and
on), eagerly, under jit and vmap, gradients against finite differences, the
contraction order the path search picks, and the messages for bad subscripts."""
import re

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus.test_util import check_grads

_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
           np.dtype(np.float64): np.dtype(np.float32),
           np.dtype(np.complex128): np.dtype(np.complex64)}


def canon(dt):
    dt = np.dtype(dt)
    return dt if olympus.config.olympus_enable_x64 else _NARROW.get(dt, dt)


def rand(rng, shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-4, 5, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def check(got, want, dtype, rtol=2e-5, atol=2e-5):
    assert isinstance(got, olympus.Array), type(got)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert tuple(got.shape) == np.shape(want), (got.shape, np.shape(want))
    g = np.asarray(got)
    if np.issubdtype(np.dtype(dtype), np.inexact):
        np.testing.assert_allclose(g, np.asarray(want).astype(dtype), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(g, np.asarray(want).astype(dtype))


def count_prims(f, *args):
    text = str(olympus.make_jaxpr(f)(*args))
    return {name: len(re.findall(r"= %s\b" % name, text))
            for name in ("dot_general", "transpose", "reduce_sum", "gather", "mul")}


# ------------------------------------------------------------------ einsum values

CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),              # matrix product
    ("ij,jk", [(2, 3), (3, 4)]),                  # implicit output
    ("ba,cb", [(3, 2), (4, 3)]),                  # implicit: alphabetical (a, c)
    ("bij,bjk->bik", [(4, 2, 3), (4, 3, 5)]),     # batch matmul
    ("bij,bjk->kib", [(4, 2, 3), (4, 3, 5)]),     # batch matmul, permuted output
    ("i,j->ij", [(3,), (4,)]),                    # outer
    ("i,i->", [(5,), (5,)]),                      # inner
    ("i,i->i", [(5,), (5,)]),                     # Hadamard
    ("ii", [(4, 4)]),                             # trace
    ("ii->i", [(4, 4)]),                          # diagonal
    ("iii->i", [(3, 3, 3)]),                      # 3-way diagonal
    ("iij->ji", [(3, 3, 2)]),                     # diagonal with a free label
    ("ijji->ij", [(2, 3, 3, 2)]),                 # two diagonals
    ("ij->ji", [(2, 3)]),                         # transpose
    ("ij->", [(2, 3)]),                           # total sum
    ("ijk->j", [(2, 3, 4)]),                      # sum over axes
    ("ij", [(2, 3)]),                             # identity
    ("i,ij,j->", [(3,), (3, 4), (4,)]),           # bilinear form
    ("ij,ij->i", [(3, 4), (3, 4)]),               # row-wise dot
    ("ijk,ikl->", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),   # chains of 3, 4, 5 operands
    ("ij,jk,kl,lm->mi", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("ij,jk,kl,lm,mn->in", [(2, 3), (3, 4), (4, 5), (5, 6), (6, 2)]),
    ("ab,bc,ca->", [(3, 4), (4, 5), (5, 3)]),     # a ring
    ("ea,fb,abcd,gc,hd->efgh", [(2, 3), (2, 3), (3, 3, 3, 3), (2, 3), (2, 3)]),
    ("ij,ik,il->jkl", [(2, 3), (2, 4), (2, 2)]),  # a label in three operands
    ("ii,ij->j", [(3, 3), (3, 4)]),               # diagonal then contraction
    ("ij,k->ik", [(2, 3), (4,)]),                 # summed lonely label j
    ("...ij,...jk->...ik", [(5, 2, 3), (3, 4)]),  # ellipsis both sides, broadcast
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 4)]),   # implicit ellipsis output first
    ("i...->...", [(3, 2, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ij...,jk...->ik...", [(2, 3, 6), (3, 4, 6)]),
    ("...i->i", [(2, 3)]),                        # ellipsis dims summed
    ("ij,ij->ij", [(1, 3), (2, 3)]),              # size-1 broadcast, kept label
    ("ij,jk", [(2, 1), (3, 4)]),                  # size-1 broadcast, summed label
    ("i,i", [(1,), (3,)]),
    ("ij,jk,kl->il", [(2, 1), (3, 4), (1, 5)]),
    ("Ab,bA->A", [(3, 2), (2, 3)]),               # upper-case labels
    (",i->i", [(), (3,)]),                        # a scalar operand
    ("ij,jk->ik", [(0, 3), (3, 2)]),              # zero-size
    ("ij,jk->ik", [(2, 0), (0, 2)]),
]


@pytest.mark.parametrize("subscripts,shapes", CASES, ids=[c[0] for c in CASES])
def test_einsum_matches_numpy(subscripts, shapes, mode):
    rng = np.random.default_rng(0)
    xs = [rand(rng, s) for s in shapes]
    got = mode(lambda *a: jnp.einsum(subscripts, *a))(*xs)
    # optimize=True: NumPy's C path rejects '...i->i', its Python path sums
    check(got, np.einsum(subscripts, *[x.astype(np.float64) for x in xs], optimize=True),
          np.float32)


CHAINS = [
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ea,fb,abcd,gc,hd->efgh", [(2, 3), (2, 3), (3, 3, 3, 3), (2, 3), (2, 3)]),
    ("ab,bc,ca->", [(3, 4), (4, 5), (5, 3)]),
    ("i,ij,jk,k->", [(3,), (3, 4), (4, 2), (2,)]),
    ("ij,jk,kl->il", [(2, 1), (3, 4), (1, 5)]),
]


@pytest.mark.parametrize("optimize", ["greedy", "optimal", "auto", True, False, "no",
                                      ("greedy", 10), ("optimal", 10), "numpy-path",
                                      "numpy-one-step"])
@pytest.mark.parametrize("subscripts,shapes", CHAINS, ids=[c[0] for c in CHAINS])
def test_einsum_every_order_agrees(subscripts, shapes, optimize):
    rng = np.random.default_rng(1)
    xs = [rand(rng, s) for s in shapes]
    if optimize == "numpy-path":
        optimize = np.einsum_path(subscripts, *xs, optimize="greedy")[0]
    elif optimize == "numpy-one-step":    # ['einsum_path', (0, 1, ..., n-1)]: pairs in turn
        optimize = np.einsum_path(subscripts, *xs, optimize=False)[0]
    got = jnp.einsum(subscripts, *xs, optimize=optimize)
    check(got, np.einsum(subscripts, *[x.astype(np.float64) for x in xs]), np.float32)


def test_einsum_sublist_form(mode):
    rng = np.random.default_rng(2)
    a, b, c = rand(rng, (2, 3)), rand(rng, (3, 4)), rand(rng, (5, 3, 3))
    cases = [
        ((a, [0, 1], b, [1, 2], [0, 2]), "ij,jk->ik"),
        ((a, [0, 1], b, [1, 2]), "ij,jk"),
        ((a, [1, 0]), "ji"),                       # implicit output sorts by number
        ((c, [Ellipsis, 1, 1], [Ellipsis, 1]), "...jj->...j"),
        ((c, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2]), "...ij,jk->...ik"),
        ((a, [np.int64(26), 51], [51]), "ab->b"),  # NumPy ints, lower-case range
    ]
    for args, subs in cases:
        ops = [x for x in args if isinstance(x, np.ndarray)]
        got = mode(lambda *o: jnp.einsum(*_rebuild(args, o)))(*ops)
        check(got, np.einsum(subs, *[o.astype(np.float64) for o in ops]), np.float32)
        check(got, np.einsum(*args), np.float32)


def _rebuild(args, ops):
    it = iter(ops)
    return [next(it) if isinstance(x, np.ndarray) else x for x in args]


DTYPES = [
    ("ij,jk->ik", np.int32, np.int32),
    ("ij,jk->ik", np.int8, np.int8),
    ("ij,jk->ik", np.int64, np.int64),
    ("ii->", np.int32, None),
    ("ij,jk->ik", np.bool_, np.bool_),          # bool: or of ands, as NumPy
    ("iij->j", np.bool_, None),
    ("ij,jk->ik", np.complex64, np.complex64),
    ("ij,jk->ik", np.complex128, np.float64),
    ("ij,jk->ik", np.int32, np.float32),
    ("ij,jk->ik", np.int16, np.uint8),
    ("ij,jk->ik", np.float16, np.float16),
    ("ij,jk->ik", np.float32, np.float64),
    ("ij,jk->ik", np.float32, np.complex64),
    ("ij,jk,kl->il", np.int32, np.complex64),
]


@pytest.mark.parametrize("subscripts,dt1,dt2", DTYPES,
                         ids=[f"{s}-{np.dtype(a).name}-{np.dtype(b).name if b else ''}"
                              for s, a, b in DTYPES])
def test_einsum_dtypes(subscripts, dt1, dt2, x64, mode):
    rng = np.random.default_rng(3)
    n_ops = subscripts.split("->")[0].count(",") + 1
    terms = subscripts.split("->")[0].split(",")
    size = {"i": 2, "j": 3, "k": 4, "l": 2}
    shapes = [tuple(size[c] for c in t) for t in terms]
    dts = [dt1] + [dt2 or dt1] * (n_ops - 1)
    xs = [rand(rng, s, d) for s, d in zip(shapes, dts)]
    got = mode(lambda *a: jnp.einsum(subscripts, *a))(*xs)
    want_dt = jnp.result_type(*[canon(d) for d in dts])   # the jnp lattice, as matmul
    want = np.einsum(subscripts, *[x.astype(want_dt) for x in xs])
    tol = 2e-2 if want_dt == np.float16 else 1e-5
    check(got, want, want_dt, rtol=tol, atol=tol)


def test_einsum_python_scalars_are_weak(x64):
    x = np.ones(3, np.float32)
    got = jnp.einsum(",i->i", 2.0, x)
    check(got, 2 * x, np.float32)
    s = jnp.einsum(",", 2.0, 3.0)
    assert s.weak_type and float(s) == 6.0


def test_einsum_preferred_element_type(x64):
    a = np.full((2, 3), 100, np.int8)
    b = np.full((3, 2), 100, np.int8)
    # int8 wraps as in NumPy; int32 computes in int32 (no wrap)
    check(jnp.einsum("ij,jk->ik", a, b), np.einsum("ij,jk->ik", a, b), np.int8)
    got = jnp.einsum("ij,jk->ik", a, b, preferred_element_type=np.int32)
    check(got, np.full((2, 2), 30000), np.int32)
    got = jnp.einsum("ij,jk->ik", a, b, preferred_element_type=np.float32)
    check(got, np.full((2, 2), 30000.0), np.float32)
    f = np.ones((2, 3), np.float32) / 3
    got = jnp.einsum("ij,jk->ik", f, f.T, preferred_element_type=np.float16)
    check(got, np.full((2, 2), 1 / 3), np.float16, rtol=1e-3, atol=1e-3)
    got = jnp.einsum("ij,jk->ik", f, f.T, preferred_element_type=np.float64)
    check(got, np.full((2, 2), 1 / 3), canon(np.float64))


def test_einsum_out_is_not_supported():
    with pytest.raises(NotImplementedError, match="out="):
        jnp.einsum("i->i", np.ones(3), out=np.ones(3))


# ------------------------------------------------------------------ what runs

def test_einsum_one_dot_general_per_pair():
    rng = np.random.default_rng(4)
    a, b, c = rand(rng, (2, 3)), rand(rng, (3, 4)), rand(rng, (4, 5))
    n = count_prims(lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c), a, b, c)
    assert n["dot_general"] == 2 and n["gather"] == 0, n
    n = count_prims(lambda a, b: jnp.einsum("ij,jk->ik", a, b), a, b)
    assert n == {"dot_general": 1, "transpose": 0, "reduce_sum": 0, "gather": 0, "mul": 0}, n
    # batch dims stay where they are (dot_general takes any position); one
    # transpose at the end for the output order
    x, y = rand(rng, (3, 2, 4)), rand(rng, (4, 3, 5))
    n = count_prims(lambda x, y: jnp.einsum("bik,kbj->bij", x, y), x, y)
    assert n["dot_general"] == 1 and n["transpose"] == 0, n
    # a lonely label is summed once before the dot; a diagonal needs no gather
    n = count_prims(lambda x, y: jnp.einsum("ijj,kl->ik", x, y),
                    rand(rng, (2, 3, 3)), rand(rng, (4, 5)))
    assert n["dot_general"] == 1 and n["reduce_sum"] == 2 and n["gather"] == 0, n


def _flops(report):
    line = next(ln for ln in report.splitlines() if "Optimized FLOP count" in ln)
    return float(line.split(":")[1])


def test_einsum_path_picks_the_cheap_order():
    # (ij,jk) first would build a 1000 x 1000 intermediate; (jk,kl) a 2 x 2
    a, b, c = np.empty((1000, 2)), np.empty((2, 1000)), np.empty((1000, 2))
    for how in ("greedy", "optimal"):
        path, report = jnp.einsum_path("ij,jk,kl->il", a, b, c, optimize=how)
        assert path == ["einsum_path", (1, 2), (0, 1)], (how, path)
        assert "Complete contraction:  ij,jk,kl->il" in report
        assert _flops(report) == 16000.0, report
    # the other way round, the left pair is the cheap one
    a, b, c = np.empty((2, 1000)), np.empty((1000, 2)), np.empty((2, 1000))
    assert jnp.einsum_path("ij,jk,kl->il", a, b, c)[0] == ["einsum_path", (0, 1), (0, 1)]
    # left to right when asked, and a costlier report for it
    path, report = jnp.einsum_path("ij,jk,kl->il", np.empty((1000, 2)),
                                   np.empty((2, 1000)), np.empty((1000, 2)), optimize=False)
    assert path == ["einsum_path", (0, 1), (0, 1)]
    assert _flops(report) > 1e6
    # greedy counts the labels a later operand needs: (df, df) keeps f, 3
    # elements; (df, cef) would keep c, d, e, f, 36 of them
    ops = [np.empty((2, 3)), np.empty((2, 3)), np.empty((3, 2, 3))]
    assert jnp.einsum_path("df,df,cef", *ops)[0] == ["einsum_path", (0, 1), (0, 1)]


def test_einsum_path_optimal_beats_greedy():
    # greedy frees the most memory first ((be, ae) -> ab) and pays for it;
    # the subset search finds the cheaper (be, b) first
    ops = [np.empty((3, 5)), np.empty((3,)), np.empty((8, 5))]
    g_path, g = jnp.einsum_path("be,b,ae->a", *ops, optimize="greedy")
    o_path, o = jnp.einsum_path("be,b,ae->a", *ops, optimize="optimal")
    assert g_path == ["einsum_path", (0, 2), (0, 1)]
    assert o_path == ["einsum_path", (0, 1), (0, 1)]
    assert _flops(o) < _flops(g)
    rng = np.random.default_rng(5)
    xs = [rand(rng, s.shape) for s in ops]
    want = np.einsum("be,b,ae->a", *xs)
    for p in (g_path, o_path):
        check(jnp.einsum("be,b,ae->a", *xs, optimize=p), want, np.float32)


def test_einsum_path_optimal_is_never_worse():
    rng = np.random.default_rng(6)
    letters = "abcdef"
    for _ in range(30):
        n = int(rng.integers(2, 6))
        terms = ["".join(sorted(set(rng.choice(list(letters), int(rng.integers(1, 4))))))
                 for _ in range(n)]
        size = {c: int(rng.integers(1, 9)) for c in letters}
        ops = [np.empty([size[c] for c in t]) for t in terms]
        subs = ",".join(terms)
        o = _flops(jnp.einsum_path(subs, *ops, optimize="optimal")[1])
        for how in ("greedy", False):
            assert o <= _flops(jnp.einsum_path(subs, *ops, optimize=how)[1]), (subs, size)


def test_einsum_path_report_and_shapes_only():
    path, report = jnp.einsum_path("ij,jk->ik", np.empty((2, 3)), np.empty((3, 4)))
    assert path == ["einsum_path", (0, 1)]
    lines = report.splitlines()
    assert lines[0] == "  Complete contraction:  ij,jk->ik"
    assert "scaling" in lines[8] and "current" in lines[8] and "remaining" in lines[8]
    assert lines[10].split() == ["3", "ij,jk->ik", "ik->ik"]
    assert jnp.einsum_path("ii->i", np.empty((3, 3)))[0] == ["einsum_path", (0,)]


def test_einsum_optimal_rejects_too_many_operands():
    subs = ",".join("ab" for _ in range(13))
    with pytest.raises(ValueError, match="at most 12 operands, got 13"):
        jnp.einsum_path(subs, *[np.empty((2, 2))] * 13, optimize="optimal")
    # greedy takes them
    got = jnp.einsum(subs + "->", *[np.ones((2, 2), np.float32)] * 13)
    assert float(got) == 4.0


# ------------------------------------------------------------------ transformations

GRADS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii,ij->j", [(3, 3), (3, 2)]),
    ("iij->ji", [(3, 3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 2)]),
    ("ij,jk", [(2, 1), (3, 4)]),
    ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ijk->j", [(2, 3, 2)]),
]


@pytest.mark.parametrize("subscripts,shapes", GRADS, ids=[g[0] for g in GRADS])
def test_einsum_grads(subscripts, shapes):
    rng = np.random.default_rng(7)
    xs = tuple(rand(rng, s, np.float64) for s in shapes)
    with olympus.enable_x64():
        check_grads(lambda *a: jnp.einsum(subscripts, *a), xs, order=2 if len(xs) == 1
                    else 1)


def test_einsum_grads_complex_and_float32():
    rng = np.random.default_rng(8)
    a, b = rand(rng, (2, 3), np.complex64), rand(rng, (3, 2), np.complex64)
    # check_grads' "rev" check conjugates one side of <u, J v> = <J^T u, v>, which
    # holds for real f only (it fails for a plain complex multiply too), so the
    # complex vjp is checked against its formula: J^T u, no conjugation, as in JAX
    check_grads(lambda a, b: jnp.einsum("ij,jk->ik", a, b), (a, b), order=1, modes="fwd")
    u = rand(rng, (2, 2), np.complex64)
    _, pullback = olympus.vjp(lambda a, b: jnp.einsum("ij,jk->ik", a, b), a, b)
    ga, gb = pullback(u)
    check(ga, u @ b.T, np.complex64)
    check(gb, a.T @ u, np.complex64)
    x, y = rand(rng, (3, 3)), rand(rng, (3, 4))
    check_grads(lambda x, y: jnp.einsum("ii,ij->j", x, y), (x, y), order=2)


def test_einsum_grad_of_scalar_loss():
    rng = np.random.default_rng(9)
    a, b = rand(rng, (2, 3), np.float64), rand(rng, (3, 4), np.float64)
    with olympus.enable_x64():
        ga, gb = olympus.grad(lambda a, b: jnp.einsum("ij,jk->", a, b), (0, 1))(a, b)
    np.testing.assert_allclose(np.asarray(ga), np.broadcast_to(b.sum(1), (2, 3)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gb), np.broadcast_to(a.sum(0)[:, None], (3, 4)),
                               rtol=1e-12)


def test_einsum_vmap():
    rng = np.random.default_rng(10)
    A, B, C = rand(rng, (5, 3, 3)), rand(rng, (3, 4)), rand(rng, (4, 5, 2))
    f = lambda a, b: jnp.einsum("ii,ij->j", a, b)   # noqa: E731
    got = olympus.vmap(f, in_axes=(0, None))(A, B)
    check(got, np.einsum("nii,ij->nj", A, B), np.float32)
    g = lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c)   # noqa: E731
    got = olympus.vmap(g, in_axes=(0, None, 1), out_axes=1)(A, B, C)
    check(got, np.einsum("nij,jk,knl->inl", A, B, C), np.float32)
    got = olympus.jit(olympus.vmap(lambda a: jnp.einsum("...ij->...j", a)))(A)
    check(got, A.sum(1), np.float32)


# ------------------------------------------------------------------ errors

ERRORS = [
    ("ij,jk->ik", [(2, 3)], ValueError, "name 2 operands but 1 was given"),
    ("ij->ij", [(2, 3), (3, 4)], ValueError, "name 1 operand but 2 were given"),
    ("ij,jk->ik", [(2, 3), (4, 5)],
     ValueError, r"label 'j' has size 3 in operand 0 \(shape \(2, 3\)\) but size 4 in "
                 r"operand 1"),
    ("ij,jk->il", [(2, 3), (3, 4)], ValueError, "output label 'l'.*does not appear"),
    ("ij->ii", [(2, 2)], ValueError, "output label 'i' appears more than once"),
    ("ijk->i", [(2, 3)], ValueError,
     r"operand 0 has 2 dims \(shape \(2, 3\)\) but its subscripts 'ijk' name 3"),
    ("...ijk->i", [(2, 3)], ValueError, "name at most 3"),
    ("ii->i", [(2, 3)], ValueError, "repeated in operand 0.*sizes 2 and 3"),
    ("i1->i", [(2, 2)], ValueError, "invalid subscript '1'"),
    ("i.j->i", [(2, 2)], ValueError, r"'\.' that is not part of one '\.\.\.'"),
    ("i->j->i", [(2,)], ValueError, "at most one '->'"),
    ("...i,...i->...i", [(2, 3), (4, 3)], ValueError,
     r"a dim under '\.\.\.' has size 2 in operand 0"),
]


@pytest.mark.parametrize("subscripts,shapes,exc,msg", ERRORS, ids=[e[0] for e in ERRORS])
def test_einsum_errors(subscripts, shapes, exc, msg):
    with pytest.raises(exc, match=msg):
        jnp.einsum(subscripts, *[np.ones(s, np.float32) for s in shapes])


def test_einsum_error_bad_arguments():
    with pytest.raises(ValueError, match="at least one operand"):
        jnp.einsum("")
    with pytest.raises(ValueError, match=r"ints in \[0, 52\)"):
        jnp.einsum(np.ones(2), [52])
    with pytest.raises(ValueError, match="optimize must be"):
        jnp.einsum("ij,jk", np.ones((2, 2)), np.ones((2, 2)), optimize="fastest")
    with pytest.raises(ValueError, match="optimize must be"):
        jnp.einsum("ij", np.ones((2, 2)), optimize="fastest")
    with pytest.raises(ValueError, match=r"path step 0 \(0, 2\) must name distinct "
                                         r"positions in \[0, 2\)"):
        jnp.einsum("ij,jk", np.ones((2, 2)), np.ones((2, 2)), optimize=[(0, 2)])
    with pytest.raises(ValueError, match="leaves 2 operands"):
        jnp.einsum("ij,jk,kl", *[np.ones((2, 2))] * 3, optimize=["einsum_path", (0, 1)])


# ------------------------------------------------------------------ convolve / correlate

@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_convolve_correlate_match_numpy(name, dtype):
    rng = np.random.default_rng(11)
    f = getattr(jnp, name)
    for n in range(1, 7):
        for m in range(1, 7):
            a, v = rand(rng, (n,), dtype), rand(rng, (m,), dtype)
            for mode in ("full", "same", "valid"):
                wide = np.complex128 if dtype == np.complex64 else np.float64
                want = getattr(np, name)(a.astype(wide), v, mode)
                check(f(a, v, mode), want, dtype)
    a, v = rand(rng, (5,), dtype), rand(rng, (3,), dtype)
    check(f(a, v), getattr(np, name)(a, v), dtype)       # default modes differ


@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_convolve_correlate_jit_and_dtypes(name, x64, mode):
    f = mode(getattr(jnp, name))
    g = getattr(np, name)
    rng = np.random.default_rng(12)
    for d1, d2 in [(np.int32, np.int32), (np.int8, np.int8), (np.bool_, np.bool_),
                   (np.int32, np.float32), (np.float32, np.complex64),
                   (np.float64, np.float64)]:
        a, v = rand(rng, (6,), d1), rand(rng, (4,), d2)
        dt = jnp.result_type(canon(d1), canon(d2))
        check(f(a, v), g(a.astype(dt), v.astype(dt), "valid" if name == "correlate"
                         else "full"), dt)


def test_convolve_preferred_element_type_and_scalars():
    a = np.full(4, 100, np.int8)
    got = jnp.convolve(a, a, preferred_element_type=np.int32)
    check(got, np.convolve(a.astype(np.int32), a.astype(np.int32)), np.int32)
    check(jnp.convolve(3.0, np.array([1.0, 2.0], np.float32)), [3.0, 6.0], np.float32)
    check(jnp.correlate([1, 2, 3], [0, 1, 0.5], "same"),
          np.correlate([1, 2, 3], [0, 1, 0.5], "same"), np.float32)
    # one dot_general, no gather, whatever the lengths
    n = count_prims(lambda a, v: jnp.convolve(a, v, "same"), np.ones(50), np.ones(7))
    assert n["dot_general"] == 1 and n["gather"] == 0, n


def test_convolve_grads_and_vmap():
    rng = np.random.default_rng(13)
    with olympus.enable_x64():
        check_grads(lambda a, v: jnp.convolve(a, v, "same"),
                    (rand(rng, (5,), np.float64), rand(rng, (3,), np.float64)), order=2)
        check_grads(lambda a, v: jnp.correlate(a, v, "full"),
                    (rand(rng, (3,), np.float64), rand(rng, (5,), np.float64)), order=1)
        # complex: forward mode only (check_grads' "rev" check assumes real f)
        check_grads(lambda a, v: jnp.correlate(a, v, "valid"),
                    (rand(rng, (4,), np.complex128), rand(rng, (2,), np.complex128)),
                    order=1, modes="fwd")
    A, v = rand(rng, (3, 6)), rand(rng, (4,))
    got = olympus.vmap(lambda a: jnp.convolve(a, v, "valid"))(A)
    check(got, np.stack([np.convolve(a, v, "valid") for a in A]), np.float32)
    got = olympus.vmap(jnp.correlate, in_axes=(None, 0))(v, A)
    check(got, np.stack([np.correlate(v, a) for a in A]), np.float32)


def test_convolve_errors():
    with pytest.raises(ValueError, match="convolve: v cannot be empty"):
        jnp.convolve(np.ones(3), np.ones(0))
    with pytest.raises(ValueError, match="correlate: a cannot be empty"):
        jnp.correlate(np.ones(0), np.ones(3))
    with pytest.raises(ValueError, match=r"a must be 1-D, got shape \(2, 2\)"):
        jnp.convolve(np.ones((2, 2)), np.ones(3))
    with pytest.raises(ValueError, match="mode must be 'full', 'same' or 'valid', got 'x'"):
        jnp.convolve(np.ones(3), np.ones(3), "x")


# ------------------------------------------------------------------ polynomials

def test_polyval(x64, mode):
    p = np.array([1.5, -2.0, 0.5, 3.0])
    x = np.linspace(-2, 2, 7)
    check(mode(jnp.polyval)(p, x), np.polyval(p, x), canon(np.float64))
    check(mode(jnp.polyval)(p.astype(np.float32), np.float32(2.0)), np.polyval(p, 2.0),
          np.float32)
    ip, ix = np.array([2, 0, -1], np.int32), np.arange(4, dtype=np.int32)
    check(mode(jnp.polyval)(ip, ix), np.polyval(ip, ix), np.int32)
    check(jnp.polyval(np.zeros(0, np.float32), x.astype(np.float32)), np.zeros(7), np.float32)


def test_polyval_grad_and_vmap():
    with olympus.enable_x64():
        p, x = np.array([1.0, -2.0, 3.0, 0.5]), np.array([0.3, -1.2])
        check_grads(jnp.polyval, (p, x), order=2)
    P = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = olympus.vmap(jnp.polyval, in_axes=(0, None))(P, np.float32(0.5))
    check(got, [np.polyval(p, 0.5) for p in P], np.float32)


POLY_PAIRS = [([1, 2], [1]), ([0, 0, 1], [1]), ([1], [1, 2, 3]), ([1.5, 2.5], [3, 4, 5]),
              ([2, -1, 0.5], [0.25, 1, 2])]


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul"])
def test_polyadd_sub_mul(name, x64, mode):
    for a1, a2 in POLY_PAIRS:
        # NumPy's polymul drops leading zeros of its inputs (polyadd does not);
        # olympus does so only when asked, since the shape depends on values
        ref = np.convolve if name == "polymul" else getattr(np, name)
        want = ref(np.asarray(a1), np.asarray(a2))
        got = mode(getattr(jnp, name))(np.asarray(a1), np.asarray(a2))
        check(got, want, canon(want.dtype))
        if name == "polymul":
            want = np.polymul(a1, a2)
            check(jnp.polymul(a1, a2, trim_leading_zeros=True), want, canon(want.dtype))


def test_polymul_trim_needs_concrete_inputs():
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="trim_leading_zeros"):
        olympus.jit(lambda a: jnp.polymul(a, a, trim_leading_zeros=True))(np.ones(2))


def test_polyder_polyint(x64):
    p = np.array([3.0, -2.0, 1.5, 4.0])
    for m in range(0, 5):
        check(jnp.polyder(p, m), np.polyder(p, m), canon(np.float64))
    ip = np.array([4, 3, 2, 1])
    check(jnp.polyder(ip, 2), np.polyder(ip, 2), canon(np.int64))
    check(olympus.jit(jnp.polyder, static_argnums=1)(p, 1), np.polyder(p, 1),
          canon(np.float64))
    for m, k in [(1, None), (2, None), (2, [1.0, -2.0]), (3, 5.0), (0, None)]:
        check(jnp.polyint(p, m, k), np.polyint(p, m, k), canon(np.float64))
    check(jnp.polyint(ip), np.polyint(ip), canon(np.float64))
    with olympus.enable_x64():
        check_grads(lambda p: jnp.polyint(jnp.polyder(p), k=1.0), (p,), order=1)
    with pytest.raises(ValueError, match="must hold m = 2 integration constants, got 1"):
        jnp.polyint(p, 2, [1.0])
    with pytest.raises(ValueError, match="m must be >= 0, got -1"):
        jnp.polyder(p, -1)


def test_poly_from_roots(x64, mode):
    for r in ([1.0, 2.0, 3.0], [0.5], [-1.0, -1.0, 2.0, 4.5]):
        check(mode(jnp.poly)(np.asarray(r)), np.poly(r), canon(np.float64))
    check(jnp.poly(np.array([1, 2], np.int32)), np.poly([1, 2]), canon(np.float64))
    check(jnp.poly(np.array([1, 2], np.float32)), np.poly([1, 2]), np.float32)
    check(jnp.poly(np.zeros(0)), np.poly([]), canon(np.float64))
    # complex roots give complex coefficients, also for conjugate pairs (NumPy: real)
    z = np.array([1j, -1j, 2.0])
    check(jnp.poly(z), np.poly(z).astype(np.complex128), canon(np.complex128))


def test_poly_of_a_matrix(x64):
    """The characteristic polynomial, through the eigenvalues: complex
    coefficients (as JAX; NumPy drops a zero imaginary part)."""
    m = np.array([[1.0, 2.0, 0.5], [3.0, 4.0, -1.0], [0.0, 2.0, 1.5]])
    check(jnp.poly(m), np.poly(m).astype(np.complex128), canon(np.complex128), rtol=1e-4)
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])     # eigenvalues +-i: x^2 + 1
    check(jnp.poly(rot), np.array([1.0, 0.0, 1.0], np.complex128), canon(np.complex128))


def test_poly_grad():
    with olympus.enable_x64():
        check_grads(jnp.poly, (np.array([0.5, -1.5, 2.0]),), order=1)


def test_trim_zeros():
    x = np.array([0, 0, 1, 0, 2, 0, 0])
    for trim in ("fb", "f", "b", "F", "B"):
        check(jnp.trim_zeros(x, trim), np.trim_zeros(x, trim), canon(np.int64))
    check(jnp.trim_zeros(np.zeros(3)), np.zeros(0), np.float32)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="trim_zeros"):
        olympus.jit(jnp.trim_zeros)(x)


DIVS = [([1, 2, 3, 4], [1, 1]), ([1, 2], [1, 1, 1]), ([1, 2, 1], [1, 1]),
        ([3.0, -2.0, 0.5, 1.0, 4.0], [2.0, 0.0, 1.0]), ([6.0], [2.0])]


@pytest.mark.parametrize("u,v", DIVS, ids=[str(d) for d in range(len(DIVS))])
def test_polydiv(u, v, x64):
    q_want, r_want = np.polydiv(u, v)
    dt = canon(np.float64)
    q, r = jnp.polydiv(u, v, trim_leading_zeros=True)
    check(q, q_want, dt)
    check(r, r_want, dt)
    # untrimmed (and under jit): r keeps len(u) entries, zeros in front
    q, r = olympus.jit(jnp.polydiv)(np.asarray(u, dt), np.asarray(v, dt))
    check(q, q_want, dt)
    assert r.shape == (len(u),)
    check(r[len(u) - len(r_want):], r_want, dt)
    np.testing.assert_array_equal(np.asarray(r[:len(u) - len(r_want)]), 0)


def test_polydiv_grad():
    with olympus.enable_x64():
        check_grads(lambda u, v: jnp.polydiv(u, v), (np.array([1.0, 2.0, 3.0, 4.0]),
                                                     np.array([2.0, 1.0])), order=1)


# ------------------------------------------------------------------ polyfit

def _fit_data(n=25, k=None):
    rng = np.random.default_rng(11)
    x = np.sort(rng.uniform(-2, 3, n))
    y = 0.5 * x ** 3 - 2 * x + 1 + 0.1 * rng.standard_normal(n)
    if k is not None:
        y = np.stack([y * (j + 1) + j * x for j in range(k)], axis=1)
    return x, y


@pytest.mark.parametrize("deg", [0, 1, 3, 5])
def test_polyfit_matches_numpy(deg, x64):
    x, y = _fit_data()
    dt = canon(np.float64)
    tol = dict(rtol=1e-10, atol=1e-10) if x64 else dict(rtol=2e-3, atol=2e-3)
    check(jnp.polyfit(x.astype(dt), y.astype(dt), deg), np.polyfit(x, y, deg), dt, **tol)
    jitted = olympus.jit(jnp.polyfit, static_argnums=2)
    check(jitted(x.astype(dt), y.astype(dt), deg), np.polyfit(x, y, deg), dt, **tol)
    # an exact polynomial comes back
    p = np.array([0.25, -0.5, 2.0, -1.0, 0.5, 3.0])[-deg - 1:]
    check(jnp.polyfit(x, np.polyval(p, x), deg), p, dt, **tol)


def test_polyfit_2d_weights_full_and_cov():
    olympus.config.update("olympus_enable_x64", True)
    x, Y = _fit_data(k=3)
    w = np.linspace(0.5, 2.0, x.size)
    tol = dict(rtol=1e-10, atol=1e-12)
    check(jnp.polyfit(x, Y, 2), np.polyfit(x, Y, 2), np.float64, **tol)
    check(jnp.polyfit(x, Y[:, 0], 3, w=w), np.polyfit(x, Y[:, 0], 3, w=w), np.float64, **tol)
    check(jnp.polyfit(x, Y, 3, w=w), np.polyfit(x, Y, 3, w=w), np.float64, **tol)
    got, want = jnp.polyfit(x, Y, 3, full=True), np.polyfit(x, Y, 3, full=True)
    assert len(got) == 5
    for g, v in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), v, **tol)
    for y in (Y[:, 1], Y):
        for kind in (True, "unscaled"):
            c, V = jnp.polyfit(x, y, 2, w=w, cov=kind)
            c_want, V_want = np.polyfit(x, y, 2, w=w, cov=kind)
            check(c, c_want, np.float64, **tol)
            check(V, V_want, np.float64, **tol)
    # rcond drops the small singular values: a degree far too high for 4 points
    xs = np.array([0.0, 1.0, 2.0, 3.0])
    c, _, rank, _, rcond = jnp.polyfit(xs, xs ** 2, 5, full=True, rcond=1e-3)
    assert int(rank) == 4 and float(rcond) == 1e-3
    np.testing.assert_allclose(np.polyval(np.asarray(c), xs), xs ** 2, atol=1e-10)


def test_polyfit_grad_and_errors():
    olympus.config.update("olympus_enable_x64", True)
    x, y = _fit_data(n=8)
    # the fit is linear in y: its gradient is a row of the pseudo-inverse
    g = olympus.grad(lambda v: jnp.polyfit(x, v, 2)[0])(y)
    np.testing.assert_allclose(g, np.linalg.pinv(np.vander(x, 3))[0], rtol=1e-9, atol=1e-12)
    check_grads(lambda v: jnp.polyfit(x, v, 2), (y,), order=1)
    with pytest.raises(ValueError, match="deg >= 0"):
        jnp.polyfit(x, y, -1)
    with pytest.raises(TypeError, match="1D vector for x"):
        jnp.polyfit(x[:, None], y, 1)
    with pytest.raises(TypeError, match="same length"):
        jnp.polyfit(x, y[:-1], 1)
    with pytest.raises(TypeError, match="1D or 2D"):
        jnp.polyfit(x, y[:, None, None], 1)
    with pytest.raises(TypeError, match="weights"):
        jnp.polyfit(x, y, 1, w=np.ones((8, 1)))
    with pytest.raises(ValueError, match="exceed order"):
        jnp.polyfit(x[:3], y[:3], 2, cov=True)
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="deg"):
        olympus.jit(jnp.polyfit)(x, y, 2)


# ------------------------------------------------------------------ roots

def _sorted(r):
    r = np.asarray(r)
    return r[np.lexsort((np.round(r.imag, 6), np.round(r.real, 6)))]


ROOTS = [[1.0, -6.0, 11.0, -6.0],            # 1, 2, 3
         [1.0, 0.0, 1.0],                    # +-i
         [2.0, -3.0, 0.0, 0.0],              # trailing zeros: roots at 0
         [0.0, 0.0, 1.0, -3.0, 2.0],         # leading zeros are stripped
         [1.0, 2.0, 3.0, 4.0, 5.0],
         [3.0], [0.0, 5.0], []]


@pytest.mark.parametrize("p", ROOTS, ids=[str(i) for i in range(len(ROOTS))])
def test_roots_matches_numpy(p, x64):
    want = np.roots(p) if len(p) else np.zeros(0)
    got = jnp.roots(np.asarray(p, canon(np.float64)))
    assert got.dtype == canon(np.complex128)
    assert got.shape == want.shape
    tol = dict(rtol=1e-10, atol=1e-10) if x64 else dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_sorted(got), _sorted(want.astype(np.complex128)), **tol)


def test_roots_integer_and_complex_coefficients():
    check(jnp.roots(np.array([1, -3, 2], np.int32)), np.array([2.0, 1.0]), np.complex64)
    p = np.array([1.0, -1j, 2.0 + 1j], np.complex64)
    got = jnp.roots(p)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(_sorted(got), _sorted(np.roots(p.astype(np.complex128))),
                               rtol=1e-5, atol=1e-5)


def test_roots_without_stripping_under_jit():
    """strip_zeros=False keeps len(p) - 1 roots, nan where a leading zero took
    one away, and works under jit; strip_zeros=True needs a concrete p."""
    p = np.array([0.0, 0.0, 1.0, -3.0, 2.0], np.float32)
    for f in (lambda v: jnp.roots(v, strip_zeros=False),
              olympus.jit(lambda v: jnp.roots(v, strip_zeros=False))):
        got = np.asarray(f(p))
        assert got.shape == (4,) and got.dtype == np.complex64
        np.testing.assert_allclose(np.sort(got[:2].real), [1.0, 2.0], rtol=1e-5)
        assert np.isnan(got[2:]).all() and np.all(got[:2].imag == 0)
    got = np.asarray(jnp.roots(np.array([1.0, -1.0, 0.0]), strip_zeros=False))
    np.testing.assert_allclose(np.sort(got.real), [0.0, 1.0], atol=1e-6)   # a real root at 0
    assert np.isnan(np.asarray(jnp.roots(np.zeros(3), strip_zeros=False))).all()
    with pytest.raises(olympus.errors.ConcretizationTypeError, match="strip_zeros=False"):
        olympus.jit(jnp.roots)(p)
    with pytest.raises(ValueError, match="rank-1"):
        jnp.roots(np.ones((2, 2)))


def test_roots_vmap_and_poly_round_trip():
    olympus.config.update("olympus_enable_x64", True)
    P = np.array([[1.0, -3.0, 2.0], [1.0, 0.0, -4.0], [2.0, 2.0, 1.0]])
    got = olympus.vmap(lambda v: jnp.roots(v, strip_zeros=False))(P)
    for g, p in zip(np.asarray(got), P):
        np.testing.assert_allclose(_sorted(g), _sorted(np.roots(p).astype(complex)),
                                   atol=1e-12)
    r = np.array([0.5, -1.5, 2.0, 3.0])
    np.testing.assert_allclose(_sorted(jnp.roots(jnp.poly(r))), _sorted(r.astype(complex)),
                               atol=1e-10)
