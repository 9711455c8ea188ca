"""olympus.experimental.progress / progress_bar: bars on compiled loops
(docs/beyond.md). Values match the plain loops; the printed lines, the number
of taps (bounded, never one per iteration) and the closing on failure are
checked. No timings are asserted."""
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import olympus
import olympus.numpy as jnp
from olympus import lax
from olympus.experimental import collect_callback_stats, progress, progress_bar
from olympus.experimental import host_callback as hcb

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
f32 = np.float32


@pytest.fixture(autouse=True)
def delivered():
    """Every tap a test sent is delivered before the next test starts."""
    yield
    hcb.barrier_wait()
    progress.close_all()


def body(i, x):
    return x * f32(0.5) + i


def plain(**kw):
    """A plain-text bar writing to a StringIO; returns (bar, stream)."""
    out = io.StringIO()
    kw.setdefault("terminal", False)
    return progress_bar(file=out, **kw), out


def lines(out):
    hcb.barrier_wait()
    return out.getvalue().splitlines()


def pcts(ls):
    return [int(re.search(r"(\d+)%", s).group(1)) for s in ls]


LINE = re.compile(r"^(?P<indent> *)(?P<desc>\w+): +(?P<pct>\d+)% (?P<done>\d+)/(?P<total>\d+) "
                  r"\[\d\d:\d\d<(\d\d:\d\d|\?), ([\d.]+[kMG]? it/s|\? it/s)\]"
                  r"(?P<batch> \(batch of \d+\))?(?P<intr> \(interrupted\))?$")


def taps(stats):
    return sum(r.calls for r in stats if r.flavour == "id_tap")


# ---------------------------------------------------------------- keyword loops

@pytest.mark.parametrize("jit", [False, True])
def test_fori_loop_keyword_values_lines_and_bounded_taps(jit):
    bar, out = plain(desc="fit")
    f = (lambda x: progress.fori_loop(0, 1000, body, x, progress=bar))
    f = olympus.jit(f) if jit else f
    with collect_callback_stats(wait=True) as stats:
        got = f(f32(1.0))
    np.testing.assert_allclose(got, lax.fori_loop(0, 1000, body, f32(1.0)))
    ls = lines(out)
    assert all(LINE.match(s) for s in ls), ls
    assert pcts(ls) == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert ls[-1].startswith("fit: 100% 1000/1000 [")
    # 100 chunks of 10 iterations: a start, 100 updates, an end
    assert taps(stats) == 102


def test_fori_loop_remainder_every_and_int_bounds():
    bar, out = plain(desc="r", every=300)
    with collect_callback_stats(wait=True) as stats:
        got = olympus.jit(lambda x: progress.fori_loop(np.int32(5), 1005, body, x,
                                                       progress=bar))(f32(0))
    np.testing.assert_allclose(got, lax.fori_loop(5, 1005, body, f32(0)))
    assert taps(stats) == 2 + 3                      # 3 chunks of 300, a tail of 100
    assert [int(LINE.match(s).group("done")) for s in lines(out)] == [0, 300, 600, 900, 1000]


def test_fori_loop_traced_bounds_learn_the_total_when_running():
    bar, out = plain(desc="dyn", every=7)
    got = olympus.jit(lambda n, x: progress.fori_loop(0, n, body, x, progress=bar))(20, f32(0))
    np.testing.assert_allclose(got, lax.fori_loop(0, 20, body, f32(0)))
    ls = lines(out)
    assert ls[0].startswith("dyn:   0% 0/20 ") and ls[-1].startswith("dyn: 100% 20/20 ")


def test_progress_true_and_description_forms():
    out = io.StringIO()
    sys_err, sys.stderr = sys.stderr, out
    try:
        progress.fori_loop(0, 10, body, f32(0))
        progress.fori_loop(0, 10, body, f32(0), progress="named")
        progress.fori_loop(0, 10, body, f32(0), progress=None)
        hcb.barrier_wait()
    finally:
        sys.stderr = sys_err
    ls = out.getvalue().splitlines()
    assert ls[0].startswith("body:   0% 0/10") and ls[-1].startswith("named: 100% 10/10")
    assert len([s for s in ls if "100%" in s]) == 2


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_keyword_matches_lax_scan(reverse):
    def step(c, x):
        return c + x["a"] * 2, (c, x["b"].sum())
    xs = {"a": jnp.arange(23.0), "b": jnp.ones((23, 3))}
    bar, out = plain(desc="s", every=5)
    with collect_callback_stats(wait=True) as stats:
        c, ys = olympus.jit(lambda c, xs: progress.scan(step, c, xs, reverse=reverse,
                                                        progress=bar))(f32(1), xs)
    rc, rys = lax.scan(step, f32(1), xs, reverse=reverse)
    np.testing.assert_allclose(c, rc)
    for a, b in zip(ys, rys):
        np.testing.assert_allclose(a, b)
    assert taps(stats) == 2 + 4                      # 4 chunks of 5, a tail of 3
    done = [int(LINE.match(s).group("done")) for s in lines(out)]
    assert done == ([0, 5, 10, 15, 20, 23] if not reverse else [0, 8, 13, 18, 23])


def test_scan_with_length_and_no_xs():
    bar, out = plain(desc="n")
    c, ys = progress.scan(lambda c, _: (c + 1, c * 2), 0, None, length=7, progress=bar)
    assert int(c) == 7 and list(np.asarray(ys)) == [0, 2, 4, 6, 8, 10, 12]
    assert lines(out)[-1].startswith("n: 100% 7/7 ")


def test_while_loop_unknown_total_shows_count_and_rate():
    bar, out = plain(desc="w", every=100)
    got = progress.while_loop(lambda x: x < 250, lambda x: x + 1, jnp.int32(0), progress=bar)
    assert int(got) == 250
    ls = lines(out)
    assert re.match(r"^w: 0 it \[00:00, \? it/s\]$", ls[0]), ls
    assert re.match(r"^w: 250 it \[\d\d:\d\d, [\d.]+[kMG]? it/s\]$", ls[-1]), ls


def test_while_loop_with_total():
    bar, out = plain(desc="w", total=40, every=10)
    got = olympus.jit(lambda x: progress.while_loop(lambda x: x < 40, lambda x: x + 1, x,
                                                    progress=bar))(jnp.int32(0))
    assert int(got) == 40
    assert pcts(lines(out)) == [0, 25, 50, 75, 100]


def test_method_forms():
    bar, out = plain(desc="m", every=50)
    got = bar.fori_loop(0, 100, body, f32(0))
    np.testing.assert_allclose(got, lax.fori_loop(0, 100, body, f32(0)))
    c, _ = bar.scan(lambda c, x: (c + x, None), f32(0), jnp.arange(10.0))
    assert float(c) == 45
    assert int(bar.while_loop(lambda x: x < 5, lambda x: x + 1, 0)) == 5


# ---------------------------------------------------------------- the decorator

@pytest.mark.parametrize("jit", [False, True])
def test_decorator_on_a_fori_body(jit):
    bar, out = plain(total=1000, desc="deco")
    f = lambda x: lax.fori_loop(0, 1000, bar(body), x)  # noqa: E731
    f = olympus.jit(f) if jit else f
    with collect_callback_stats(wait=True) as stats:
        got = f(f32(1.0))
    np.testing.assert_allclose(got, lax.fori_loop(0, 1000, body, f32(1.0)))
    ls = lines(out)
    assert pcts(ls) == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert ls[-1].startswith("deco: 100% 1000/1000 ")
    assert taps(stats) == 101                        # i = 0, 10, ..., 990 and the last


def test_decorator_with_start_and_every():
    bar, out = plain(total=30, start=10, every=10, desc="d")
    with collect_callback_stats(wait=True) as stats:
        lax.fori_loop(10, 40, bar(body), f32(0))
    assert taps(stats) == 4                          # i = 10, 20, 30, 39
    assert [int(LINE.match(s).group("done")) for s in lines(out)] == [0, 10, 20, 30]


@pytest.mark.parametrize("n", [1, 2, 9, 10, 11, 26])
def test_decorator_scalar_body_on_registers_same_values_and_taps(n):
    """A scalar body with the bar's gated tap runs on registers (the tap a
    test of the counter; tests/c/test_callback_beyond.c checks the program):
    the values of the loop without the bar, bit for bit, odd and even trip
    counts, and a tap at every 5th counter and the last one."""
    bar, out = plain(total=n, every=5, desc="reg")
    f = olympus.jit(lambda x: lax.fori_loop(0, n, bar(body), x))
    with collect_callback_stats(wait=True) as stats:
        got = f(f32(1.0))
    np.testing.assert_array_equal(got, olympus.jit(
        lambda x: lax.fori_loop(0, n, body, x))(f32(1.0)))
    want = f32(1.0)
    for i in range(n):
        want = want * f32(0.5) + f32(i)
    np.testing.assert_array_equal(got, want)
    sent = [i for i in range(n) if i % 5 == 0 or i == n - 1]
    assert taps(stats) == len(sent)
    assert [int(LINE.match(s).group("done")) for s in lines(out)][-1] == n


def test_decorator_errors():
    with pytest.raises(ValueError, match=r"progress_bar used as a decorator needs total="):
        progress_bar()(body)
    with pytest.raises(TypeError, match="decorates a loop body"):
        progress_bar(3)(5)
    with pytest.raises(TypeError, match="first argument must be the integer index"):
        lax.scan(lambda c, x: (progress_bar(3)(lambda a, b: a)(c, x), None), f32(0),
                 jnp.arange(3.0))
    with pytest.raises(ValueError, match="total must be >= 0"):
        progress_bar(-1)
    with pytest.raises(ValueError, match="every must be >= 1"):
        progress_bar(3, every=0)
    with pytest.raises(TypeError, match="progress= takes True, a description"):
        progress.fori_loop(0, 3, body, f32(0), progress=3)


# ---------------------------------------------------------------- vmap, nesting

@pytest.mark.parametrize("form", ["keyword", "decorator"])
def test_vmap_one_bar_batch_aware(form):
    bar, out = plain(total=100, desc="v", every=25)
    if form == "keyword":
        f = lambda x: progress.fori_loop(0, 100, body, x, progress=bar)  # noqa: E731
    else:
        f = lambda x: lax.fori_loop(0, 100, bar(body), x)  # noqa: E731
    xs = jnp.arange(4.0)
    got = olympus.jit(olympus.vmap(f))(xs)
    np.testing.assert_allclose(got, olympus.vmap(lambda x: lax.fori_loop(0, 100, body, x))(xs))
    ls = lines(out)
    assert ls and all(s.endswith("(batch of 4)") for s in ls), ls
    assert ls[0].startswith("v:   0% 0/100") and ls[-1].startswith("v: 100% 100/100")
    assert len([s for s in ls if s.startswith("v:   0%")]) == 1  # one bar, not one per element


def test_nested_vmap_multiplies_the_batch():
    bar, out = plain(desc="nv", every=50)
    f = lambda x: progress.fori_loop(0, 100, body, x, progress=bar)  # noqa: E731
    olympus.vmap(olympus.vmap(f))(jnp.ones((2, 3)))
    assert all(s.endswith("(batch of 6)") for s in lines(out))


def test_nested_loops_one_line_per_level():
    outer, out = plain(desc="outer")
    inner = progress_bar(desc="inner", file=out, terminal=False, min_interval=0, every=50)

    def ob(i, x):
        return progress.fori_loop(0, 100, body, x, progress=inner)

    with collect_callback_stats(wait=True) as stats:
        got = olympus.jit(lambda x: progress.fori_loop(0, 3, ob, x, progress=outer))(f32(0))
    ref = lax.fori_loop(0, 3, lambda i, x: lax.fori_loop(0, 100, body, x), f32(0))
    np.testing.assert_allclose(got, ref)
    ls = lines(out)
    top = [s for s in ls if s.startswith("outer:")]
    sub = [s for s in ls if s.startswith("  inner:")]
    assert len(top) + len(sub) == len(ls)
    assert top[0].startswith("outer:   0% 0/3") and top[-1].startswith("outer: 100% 3/3")
    assert len([s for s in sub if "100%" in s]) == 3   # the inner bar ran three times
    # the outer loop: start, 3 updates, end; each inner run: start, 2 updates, end
    assert taps(stats) == 5 + 3 * 4


def test_nested_plain_inner_bars_are_quiet_by_default():
    outer, out = plain(desc="outer")
    inner = progress_bar(desc="inner", file=out, terminal=False)
    progress.fori_loop(0, 50, lambda i, x: progress.fori_loop(0, 10, body, x, progress=inner),
                       f32(0), progress=outer)
    ls = lines(out)
    assert len([s for s in ls if s.startswith("  inner:")]) <= 2  # at most one a second
    assert ls[-1].startswith("outer: 100% 50/50")


def test_nested_inner_bar_uses_fewer_updates():
    outer, out = plain(desc="o")
    inner = progress_bar(desc="i", file=out, terminal=False, min_interval=0)
    with collect_callback_stats(wait=True) as stats:
        progress.fori_loop(0, 2, lambda i, x: progress.fori_loop(0, 1000, body, x,
                                                                 progress=inner),
                           f32(0), progress=outer)
    # nested: 10 updates per inner run (not 100)
    assert taps(stats) == (2 + 2) + 2 * (2 + 10)


# ---------------------------------------------------------------- terminal output

def test_terminal_bar_is_redrawn_in_place():
    bar = progress_bar(desc="t", file=io.StringIO(), terminal=True, min_interval=0, every=250)
    progress.fori_loop(0, 1000, body, f32(0), progress=bar)
    hcb.barrier_wait()
    text = bar.file.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    frames = text.split("\r\x1b[2K")[1:]
    assert len(frames) == 6
    assert re.match(r"t: +0%\|\s+\| 0/1000 \[00:00<\?, \? it/s\]", frames[0]), frames[0]
    assert re.match(r"t: 100%\|#+\| 1000/1000 \[", frames[-1]), frames[-1]


def test_terminal_nested_block():
    out = io.StringIO()
    outer = progress_bar(desc="o", file=out, terminal=True, min_interval=0)
    inner = progress_bar(desc="i", file=out, terminal=True, min_interval=0, every=5)
    progress.fori_loop(0, 2, lambda i, x: progress.fori_loop(0, 10, body, x, progress=inner),
                       f32(0), progress=outer)
    hcb.barrier_wait()
    text = out.getvalue()
    assert "\n\x1b[2K  i:" in text          # the inner line drawn below the outer one
    assert "\x1b[1F" in text                # and the block redrawn from its first line
    assert text.endswith("\n") and re.search(r"o: 100%\|#+\| 2/2 \[[^\n]*\n$", text)


# ---------------------------------------------------------------- closing

def failing_body(i, x):
    return olympus.pure_callback(
        lambda i, x: (_ for _ in ()).throw(ValueError("stop")) if i == 25 else x,
        olympus.ShapeDtypeStruct((), f32), i, x)


def test_failed_run_is_closed_as_interrupted():
    bar, out = plain(total=50, desc="fails", every=10)
    with pytest.raises(olympus.CallbackError):
        with bar:
            olympus.jit(lambda x: lax.fori_loop(0, 50, bar(failing_body), x))(f32(0))
    ls = lines(out)
    assert ls[-1].endswith("(interrupted)") and ls[-1].startswith("fails:  40% 20/50 ")
    # a later run of the same bar starts afresh and finishes
    lax.fori_loop(0, 50, bar(body), f32(0))
    assert lines(out)[-1].startswith("fails: 100% 50/50")


def test_restart_closes_an_unfinished_run():
    bar, out = plain(total=50, desc="re", every=10)
    with pytest.raises(olympus.CallbackError):
        lax.fori_loop(0, 50, bar(failing_body), f32(0))
    lax.fori_loop(0, 50, bar(body), f32(0))
    ls = lines(out)
    assert [s for s in ls if s.endswith("(interrupted)")] == [ls[3]]
    assert ls[-1].startswith("re: 100% 50/50")


def test_close_all_and_exit_in_a_subprocess():
    code = (
        "import numpy as np, olympus\n"
        "from olympus import lax\n"
        "from olympus.experimental import progress_bar\n"
        "bar = progress_bar(50, desc='job', every=10)\n"
        "def b(i, x):\n"
        "    return olympus.pure_callback(lambda i, x: (_ for _ in ()).throw(KeyError('k'))"
        " if i == 35 else x, olympus.ShapeDtypeStruct((), np.float32), i, x)\n"
        "olympus.jit(lambda x: lax.fori_loop(0, 50, bar(b), x))(np.float32(0))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    err = r.stderr
    # stderr is not a terminal: plain lines; the bar is closed before the traceback
    assert "job:  60% 30/50 " in err and "(interrupted)" in err
    # (the first traceback is the callback's failure, logged when it happened)
    assert err.index("(interrupted)") < err.rindex("Traceback (most recent call last)")
    assert "KeyError" in err


def test_results_and_grad_unchanged():
    def f(x):
        return progress.fori_loop(0, 20, lambda i, w: w * 0.9 + x, x,
                                  progress=progress_bar(desc="g", file=io.StringIO()))
    g = olympus.grad(f)(f32(1.0))
    ref = olympus.grad(lambda x: lax.fori_loop(0, 20, lambda i, w: w * 0.9 + x, x))(f32(1.0))
    np.testing.assert_allclose(g, ref, rtol=1e-5)


class Watched(io.StringIO):
    """A stream that notes, per line, whether the run was still going."""

    def __init__(self):
        super().__init__()
        self.running = False
        self.seen = []

    def write(self, text):
        self.seen.append(self.running)
        return super().write(text)


@pytest.mark.parametrize("form", ["keyword", "decorator"])
def test_updates_are_drawn_while_the_run_holds_the_gil(form):
    """A small jitted program keeps the GIL while it runs; progress taps let it
    go for a moment, so the receiver draws during the run, not after it. The
    run's last step clears `running` from C (a partial of setattr: no Python
    bytecode, so the GIL cannot change hands before it). The body works on a
    vector so the run lasts long enough to be seen (a scalar body runs as a
    register program, ~7 ns an iteration: the whole loop could end between two
    draws)."""
    import functools

    def vbody(i, x):
        return jnp.sin(x) * f32(0.5) + jnp.astype(i, jnp.float32)
    out = Watched()
    bar = progress_bar(1_000_000, desc="live", file=out, terminal=False)
    done = functools.partial(setattr, out, "running", False)

    def run(x):
        if form == "keyword":
            y = progress.fori_loop(0, 1_000_000, vbody, x, progress=bar)
        else:
            y = lax.fori_loop(0, 1_000_000, bar(vbody), x)
        olympus.debug.callback(done)
        return y
    f = olympus.jit(run)
    x0 = jnp.zeros(64, jnp.float32)
    f(x0)
    hcb.barrier_wait()
    out.seen.clear()
    out.running = True
    f(x0)
    hcb.barrier_wait()
    assert not out.running
    assert sum(out.seen) >= 3, out.seen  # the start and updates, drawn during the run
