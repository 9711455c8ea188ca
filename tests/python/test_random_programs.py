"""Property tests over random programs: seeded random chains of olympus.numpy
ops (elementwise with broadcasting, reductions, reshape/transpose/slicing,
where, matmul, float32/int32/bool mixes) checked against the same chain on
NumPy eagerly, under jit, under vmap (vs a loop), and, for float chains, under
grad (vs central finite differences in float64)."""
import numpy as np
import pytest

import olympus
import olympus.numpy as jnp

SEEDS = list(range(40))


# ---------------------------------------------------------------- the generator
#
# A program is a list of steps over an environment of values (the inputs, then
# each step's result). A step is (text, fn, arg indices); fn(m, *vals) works on
# both m = numpy and m = olympus.numpy. The generator tracks each value's shape
# and kind ("f", "i", "b") through a NumPy float64/int64 evaluation.

# Unary ops: name -> fn(m, x). Restricted domains get valid inputs.
UNARY_FLOAT = {
    "sin": lambda m, x: m.sin(x),
    "cos": lambda m, x: m.cos(x),
    "tanh": lambda m, x: m.tanh(x),
    "exp(tanh)": lambda m, x: m.exp(m.tanh(x)),
    "log(|x|+1)": lambda m, x: m.log(m.abs(x) + 1),
    "sqrt(|x|+1)": lambda m, x: m.sqrt(m.abs(x) + 1),
    "arcsin(tanh/2)": lambda m, x: m.arcsin(m.tanh(x) * 0.5),
    "arctan": lambda m, x: m.arctan(x),
    "square": lambda m, x: m.square(x),
    "negative": lambda m, x: m.negative(x),
    "logistic": lambda m, x: 1 / (1 + m.exp(-m.tanh(x))),
}
UNARY_ANY = {
    "abs": lambda m, x: m.abs(x),
    "negative": lambda m, x: m.negative(x),
    "square": lambda m, x: m.square(x),
    "sign": lambda m, x: m.sign(x),
}
BINARY = {
    "add": lambda m, x, y: m.add(x, y),
    "subtract": lambda m, x, y: m.subtract(x, y),
    "multiply": lambda m, x, y: m.multiply(x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "minimum": lambda m, x, y: m.minimum(x, y),
    "x/(|y|+1)": lambda m, x, y: x / (m.abs(y) + 1),
}
INT_BINARY = {
    "x//(|y|+1)": lambda m, x, y: m.floor_divide(x, m.abs(y) + 1),
    "x%(|y|+1)": lambda m, x, y: m.remainder(x, m.abs(y) + 1),
}
COMPARE = {
    "less": lambda m, x, y: m.less(x, y),
    "greater_equal": lambda m, x, y: m.greater_equal(x, y),
    "not_equal": lambda m, x, y: m.not_equal(x, y),
}


class Gen:
    """Builds a random program and the float64 NumPy values of its steps."""

    def __init__(self, seed, float_only):
        self.rng = np.random.default_rng(seed)
        self.float_only = float_only
        self.steps = []
        self.vals = []   # NumPy reference values (float64 / int64 / bool)
        self.deps = []   # per value: does it depend on input 0
        self.inputs = []

    # values ----------------------------------------------------------
    def kind(self, i):
        return self.vals[i].dtype.kind

    def shape(self, i):
        return self.vals[i].shape

    def new_input(self, shape, kind):
        if kind == "f":
            v = self.rng.normal(size=shape).astype(np.float32)
        elif kind == "i":
            v = self.rng.integers(-3, 4, size=shape).astype(np.int32)
        else:
            v = self.rng.random(size=shape) < 0.5
        self.deps.append(not self.inputs)
        self.inputs.append(v)
        self.vals.append(v.astype(np.float64) if kind == "f" else
                         v.astype(np.int64) if kind == "i" else v)

    def random_shape(self, rank=None):
        if rank is None:
            rank = int(self.rng.choice([0, 1, 1, 2, 2, 2, 3, 3]))
        return tuple(int(d) for d in self.rng.integers(1, 5, size=rank))

    def pick(self, kinds=("f", "i", "b"), pred=None):
        cands = [i for i in range(len(self.vals))
                 if self.kind(i) in kinds and (pred is None or pred(i))]
        if not cands:
            return None
        if 0 in cands and not any(self.deps[len(self.inputs):]):
            return 0   # the first step that can reads input 0
        # favour recent values and those fed by input 0, so chains get deep
        w = np.arange(1, len(cands) + 1, dtype=float) ** 2
        w *= [4.0 if self.deps[i] else 1.0 for i in cands]
        return int(self.rng.choice(cands, p=w / w.sum()))

    def add(self, text, fn, args):
        m_vals = [self.vals[a] for a in args]
        out = np.asarray(fn(np, *m_vals))
        if out.dtype.kind not in "fib" or not np.all(np.isfinite(out.astype(np.float64))):
            return False
        if out.dtype.kind == "f" and np.max(np.abs(out), initial=0) > 1e4:
            return False
        if out.dtype.kind == "i" and np.max(np.abs(out), initial=0) > 1e6:
            return False
        if out.dtype == np.float32:     # NumPy float32 * int64 scalars: keep float64
            out = out.astype(np.float64)
        self.steps.append((text, fn, tuple(args)))
        self.vals.append(out)
        self.deps.append(any(self.deps[a] for a in args))
        return True

    # steps -----------------------------------------------------------
    def step(self):
        r = self.rng
        kinds = ("f",) if self.float_only else ("f", "i", "b")
        choice = r.choice(["unary", "binary", "compare", "reduce", "reshape", "transpose",
                           "slice", "where", "matmul", "astype", "structural"],
                          p=[.18, .18, .05, .1, .07, .07, .07, .06, .06, .04, .12])
        if choice == "unary":
            x = self.pick(kinds)
            if self.kind(x) == "f":
                name = r.choice(sorted(UNARY_FLOAT))
                return self.add(name, UNARY_FLOAT[name], [x])
            if self.kind(x) == "b":
                return self.add("astype(int32)", lambda m, v: v.astype(m.int32), [x])
            name = r.choice(sorted(UNARY_ANY))
            return self.add(name, UNARY_ANY[name], [x])
        if choice == "binary":
            x = self.pick(tuple(k for k in kinds if k != "b"))
            if x is None:
                return False
            name = r.choice(sorted(BINARY))
            if r.random() < 0.2:   # a Python scalar (weakly typed)
                c = float(r.choice([0.5, -1.5, 2.0])) if self.kind(x) == "f" else int(r.choice([1, -2, 3]))
                return self.add(f"{name}(x, {c})", lambda m, v, c=c, f=BINARY[name]: f(m, v, c), [x])
            y = self.pick(tuple(k for k in kinds if k != "b"), pred=lambda i: self._bcast(x, i))
            if y is None:
                return False
            return self.add(name, BINARY[name], [x, y])
        if choice == "compare" and not self.float_only:
            x = self.pick(("f", "i"))
            y = self.pick(("f", "i"), pred=lambda i: self._bcast(x, i))
            if x is None or y is None:
                return False
            name = r.choice(sorted(COMPARE))
            return self.add(name, COMPARE[name], [x, y])
        if choice == "reduce":
            x = self.pick(kinds, pred=lambda i: len(self.shape(i)) > 0)
            if x is None:
                return False
            nd = len(self.shape(x))
            axis = None if r.random() < 0.3 else (
                int(r.integers(-nd, nd)) if r.random() < 0.5 else
                tuple(sorted(int(a) for a in r.choice(nd, size=int(r.integers(1, nd + 1)), replace=False))))
            keep = bool(r.random() < 0.3)
            if self.kind(x) == "b":
                op = r.choice(["any", "all", "sum"])
            elif self.kind(x) == "i":
                op = r.choice(["sum", "max", "min"])
            else:
                op = r.choice(["sum", "max", "min", "mean"])
            return self.add(f"{op}(axis={axis}, keepdims={keep})",
                            lambda m, v, op=op, axis=axis, keep=keep:
                            getattr(m, op)(v, axis=axis, keepdims=keep), [x])
        if choice == "reshape":
            x = self.pick(kinds)
            n = int(np.prod(self.shape(x)))
            divs = [d for d in range(1, n + 1) if n % d == 0]
            a = int(r.choice(divs))
            shapes = [(n,), (a, -1), (-1, a), (a, n // a, 1)] if n != 1 else [(), (1,), (1, 1)]
            shape = tuple(int(d) for d in shapes[int(r.integers(len(shapes)))])
            return self.add(f"reshape{shape}", lambda m, v, s=shape: m.reshape(v, s), [x])
        if choice == "transpose":
            x = self.pick(kinds, pred=lambda i: len(self.shape(i)) >= 2)
            if x is None:
                return False
            perm = tuple(int(p) for p in r.permutation(len(self.shape(x))))
            return self.add(f"transpose{perm}", lambda m, v, p=perm: m.transpose(v, p), [x])
        if choice == "slice":
            x = self.pick(kinds, pred=lambda i: len(self.shape(i)) > 0 and max(self.shape(i)) > 1)
            if x is None:
                return False
            s = self.shape(x)
            ax = int(r.choice([i for i, d in enumerate(s) if d > 1]))
            kind = r.choice(["step", "tail", "head", "rev"])
            sl = {"step": slice(None, None, 2), "tail": slice(1, None),
                  "head": slice(None, -1), "rev": slice(None, None, -1)}[kind]
            idx = (slice(None),) * ax + (sl,)
            return self.add(f"[{ax}:{kind}]", lambda m, v, idx=idx: v[idx], [x])
        if choice == "where":
            c = self.pick(("f", "i"))
            if c is None:
                return False
            x = self.pick(kinds, pred=lambda i: self._bcast(c, i))
            y = self.pick(kinds, pred=lambda i: self._bcast(c, i) and self._bcast(x, i)
                          and (self.kind(i) == "b") == (self.kind(x) == "b"))
            if x is None or y is None:
                return False
            return self.add("where(c>0, x, y)", lambda m, cv, xv, yv: m.where(cv > 0, xv, yv), [c, x, y])
        if choice == "matmul":
            x = self.pick(tuple(k for k in kinds if k != "b"), pred=lambda i: 1 <= len(self.shape(i)) <= 2)
            if x is None:
                return False
            k = self.shape(x)[-1]
            y = self.pick(tuple(k2 for k2 in kinds if k2 != "b"),
                          pred=lambda i: 1 <= len(self.shape(i)) <= 2 and self.shape(i)[0] == k)
            if y is None:
                return False
            return self.add("matmul", lambda m, a, b: m.matmul(a, b), [x, y])
        if choice == "astype" and not self.float_only:
            x = self.pick(kinds)
            t = r.choice(["float32", "int32", "bool"])
            if t == "float32" and self.kind(x) == "f":
                return False   # a rounding the float64 reference would not see
            if t == "int32" and self.kind(x) == "f":
                # rint, not truncation: saturating ops (cos, tanh) land on integers,
                # exactly in float32 and just below in float64; halves are rare
                return self.add("rint->int32", lambda m, v: m.rint(v).astype(m.int32), [x])
            return self.add(f"astype({t})", lambda m, v, t=t: v.astype(getattr(m, t if t != "bool" else "bool_")), [x])
        if choice == "structural":
            return self.structural(kinds)
        return False

    def structural(self, kinds):
        """cumsum, flip, expand_dims, concatenate, clip, integer division."""
        r = self.rng
        what = r.choice(["cumsum", "flip", "expand_dims", "concatenate", "clip", "intdiv"])
        if what == "intdiv" and not self.float_only:
            x = self.pick(("i",))
            y = self.pick(("i",), pred=lambda i: x is not None and self._bcast(x, i))
            if x is None or y is None:
                return False
            name = r.choice(sorted(INT_BINARY))
            return self.add(name, INT_BINARY[name], [x, y])
        if what == "clip":
            x = self.pick(tuple(k for k in kinds if k != "b"))
            if x is None:
                return False
            return self.add("clip(-1, 2)", lambda m, v: m.clip(v, -1, 2), [x])
        x = self.pick(kinds, pred=lambda i: len(self.shape(i)) > 0)
        if x is None:
            return False
        nd = len(self.shape(x))
        ax = int(r.integers(-nd, nd))
        if what == "cumsum" and self.kind(x) != "b":
            return self.add(f"cumsum(axis={ax})", lambda m, v, a=ax: m.cumsum(v, axis=a), [x])
        if what == "flip":
            return self.add(f"flip(axis={ax})", lambda m, v, a=ax: m.flip(v, axis=a), [x])
        if what == "expand_dims":
            ax = int(r.integers(-nd - 1, nd + 1))
            return self.add(f"expand_dims({ax})", lambda m, v, a=ax: m.expand_dims(v, a), [x])
        if what == "concatenate":
            s = self.shape(x)
            y = self.pick((self.kind(x),), pred=lambda i: len(self.shape(i)) == nd and all(
                d == e for k, (d, e) in enumerate(zip(self.shape(i), s)) if k != ax % nd))
            if y is None:
                return False
            return self.add(f"concatenate(axis={ax})",
                            lambda m, u, v, a=ax: m.concatenate([u, v], axis=a), [x, y])
        return False

    def _bcast(self, a, b):
        try:
            np.broadcast_shapes(self.shape(a), self.shape(b))
            return True
        except ValueError:
            return False

    def build(self):
        n_in = int(self.rng.integers(1, 4))
        base = self.random_shape()
        for _ in range(n_in):
            # broadcast-friendly: a suffix of the base shape, some dims set to 1
            shape = list(base[len(base) - int(self.rng.integers(0, len(base) + 1)):])
            shape = tuple(1 if self.rng.random() < 0.2 else d for d in shape)
            if self.rng.random() < 0.15:
                shape = self.random_shape()
            kinds = ["f"] if self.float_only else ["f", "f", "i", "b"]
            self.new_input(shape, self.rng.choice(kinds) if self.inputs else "f")
        n_steps = int(self.rng.integers(3, 15))
        tries = 0
        while len(self.steps) < n_steps and tries < 60:
            tries += 1
            self.step()
        # outputs: the last value that depends on input 0, and maybe one more
        n_vals = len(self.vals)
        dep = [i for i in range(n_in, n_vals) if self.deps[i]] or [n_vals - 1]
        outs = [dep[-1]]
        if n_vals > n_in + 1 and self.rng.random() < 0.5:
            outs.append(int(self.rng.integers(n_in, n_vals)))
        return Program(self.steps, n_in, outs, self.inputs)


class Program:
    def __init__(self, steps, n_in, outs, inputs):
        self.steps, self.n_in, self.outs, self.inputs = steps, n_in, outs, inputs

    def __call__(self, m, *args):
        env = list(args)
        for _, fn, idx in self.steps:
            env.append(fn(m, *[env[i] for i in idx]))
        return tuple(env[i] for i in self.outs)

    def __repr__(self):
        lines = [f"inputs: {[(a.shape, a.dtype.name) for a in self.inputs]}"]
        for k, (text, _, idx) in enumerate(self.steps):
            lines.append(f"  v{self.n_in + k} = {text}({', '.join(f'v{i}' for i in idx)})")
        lines.append(f"  outputs: {self.outs}")
        return "\n".join(lines)


def _ref64(args):
    return [a.astype(np.float64) if a.dtype == np.float32 else
            a.astype(np.int64) if a.dtype == np.int32 else a for a in args]


def _check(got, want, prog, what):
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        g = np.asarray(g)
        w = np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}\n{prog}"
        assert g.dtype.kind == w.dtype.kind, f"{what}: dtype {g.dtype} vs {w.dtype}\n{prog}"
        assert g.dtype.itemsize <= 4, f"{what}: 64-bit {g.dtype} with x64 off\n{prog}"
        scale = max(1.0, float(np.max(np.abs(w.astype(np.float64)), initial=0)))
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                   rtol=2e-4, atol=2e-4 * scale, err_msg=f"{what}\n{prog}")


# ---------------------------------------------------------------- the properties

@pytest.mark.parametrize("seed", SEEDS)
def test_random_chain_eager_and_jit(seed):
    prog = Gen(seed, float_only=seed % 3 == 0).build()
    want = prog(np, *_ref64(prog.inputs))
    args = [jnp.asarray(a) for a in prog.inputs]
    _check(prog(jnp, *args), want, prog, "eager")
    _check(olympus.jit(lambda *a: prog(jnp, *a))(*args), want, prog, "jit")


@pytest.mark.parametrize("seed", SEEDS)
def test_random_chain_vmap(seed):
    """Input 0 is batched at axis 0; each other input at axis 0, at its last
    axis, or not at all."""
    prog = Gen(1000 + seed, float_only=seed % 3 == 0).build()
    rng = np.random.default_rng(seed)
    b = int(rng.integers(1, 4))
    in_axes, examples = [], []
    for i, x in enumerate(prog.inputs):
        ax = 0 if i == 0 else [None, 0, x.ndim][int(rng.integers(3))]
        in_axes.append(ax)
        if ax is None:
            examples.append([x] * b)
        elif x.dtype == np.bool_:
            examples.append([x] + [rng.random(size=x.shape) < 0.5 for _ in range(b - 1)])
        elif x.dtype == np.int32:
            examples.append([x] + [rng.integers(-3, 4, size=x.shape).astype(np.int32)
                                   for _ in range(b - 1)])
        else:
            examples.append([x] + [rng.normal(size=x.shape).astype(x.dtype) for _ in range(b - 1)])
    per = [prog(np, *_ref64([ex[e] for ex in examples])) for e in range(b)]
    want = tuple(np.stack([p[k] for p in per]) for k in range(len(prog.outs)))
    args = [jnp.asarray(ex[0] if ax is None else np.stack(ex, axis=ax))
            for ex, ax in zip(examples, in_axes)]
    f = olympus.vmap(lambda *a: prog(jnp, *a), in_axes=tuple(in_axes))
    what = f"vmap over {b}, in_axes={tuple(in_axes)}"
    _check(f(*args), want, prog, what)
    _check(olympus.jit(f)(*args), want, prog, f"jit({what})")


@pytest.mark.parametrize("seed", SEEDS)
def test_random_chain_grad_vs_finite_differences(seed):
    """grad of the sum of the outputs with respect to every input."""
    prog = Gen(2000 + seed, float_only=True).build()
    olympus.config.update("olympus_enable_x64", True)   # the fixture restores it
    x64 = [a.astype(np.float64) for a in prog.inputs]

    def loss(m, *a):
        return sum(m.sum(o) for o in prog(m, *a))

    argnums = tuple(range(len(x64)))
    grads = olympus.grad(lambda *a: loss(jnp, *a), argnums=argnums)(*[jnp.asarray(a) for a in x64])
    eps = 1e-6
    for i, g in enumerate(grads):
        g = np.asarray(g)
        assert g.shape == x64[i].shape and g.dtype == np.float64, f"input {i}\n{prog}"
        fd = np.zeros_like(x64[i])
        for idx in np.ndindex(x64[i].shape):
            hi = [a.copy() for a in x64]
            lo = [a.copy() for a in x64]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            fd[idx] = (loss(np, *hi) - loss(np, *lo)) / (2 * eps)
        scale = max(1.0, float(np.max(np.abs(fd), initial=0)))
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=f"d/d input {i}\n{prog}")
