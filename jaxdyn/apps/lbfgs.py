"""L-BFGS whose compiled program evaluates the loss at one call site.

The direction is optax's two-loop recursion (``optax.scale_by_lbfgs``, Nocedal and Wright
1999, Algorithms 7.4-7.5); the step length comes from a bracketing search for the strong Wolfe
conditions (Nocedal and Wright, Algorithms 3.5-3.6).  :func:`lbfgs_minimize` runs the start's
evaluation, every line-search trial and every L-BFGS step in one ``lax.while_loop`` whose body
evaluates the value and gradient once: the program holds one copy of the loss (optax's zoom
line search holds three: the start and both branches of a ``lax.cond``, which ``jax.vmap``
turns into a ``select`` that evaluates both at every trial), and under ``jax.vmap`` over starts
each start runs its own trials, none waits for another's search.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .common import optax_promotion, tree_where

C1, C2 = 1e-4, 0.9
"""Sufficient-decrease and curvature constants of the strong Wolfe conditions."""
APPROX_RTOL = 1e-6
"""Hager and Zhang's (2005) approximate decrease: f(x + t d) <= f(x) + APPROX_RTOL |f(x)|."""
MAX_TRIALS = 30
"""Trials per line search."""


class Search(NamedTuple):
    """The state of one line search along d from x (slope s = g . d)."""
    k: jax.Array          # trials made
    t: jax.Array          # the next trial step
    f0: jax.Array         # f(x)
    s0: jax.Array         # slope at x (< 0)
    lo: jax.Array         # the best step so far satisfying sufficient decrease (0: none)
    f_lo: jax.Array
    s_lo: jax.Array       # slope at lo
    g_lo: object          # gradient at lo
    hi: jax.Array         # the other end of the bracket (inf: none yet); may lie below lo
    f_hi: jax.Array
    done: jax.Array       # the Wolfe conditions hold at t
    a_lo: object = None   # the loss's auxiliary output at lo (None: no aux)


def _vdot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def _axpy(t, d, x):
    return jax.tree_util.tree_map(lambda a, b: a + t.astype(a.dtype) * b, x, d)


def search_start(f0, g0, d, t0=1.0, a0=None) -> Search:
    """A line search along d from a point with value f0, gradient g0 (and auxiliary output a0
    of the loss, if any); first trial t0."""
    s0 = _vdot(g0, d)
    z = jnp.zeros((), jnp.result_type(f0))
    return Search(jnp.asarray(0), jnp.asarray(t0, z.dtype), f0, s0, z, f0, s0, g0, jnp.asarray(jnp.inf, z.dtype),
                  f0, jnp.asarray(False), a0)


def search_update(st: Search, f, g, d, aux=None) -> Search:
    """The search after its trial st.t gave value f and gradient g (and auxiliary output aux).

    Sufficient decrease is f <= f0 + C1 t s0 (or, where f's rounding hides a decrease near a
    minimum, Hager-Zhang's f <= f0 + APPROX_RTOL |f0| with slope <= (2 C1 - 1) s0), and no
    worse than the best step so far; the search is done when the slope also satisfies
    |s| <= C2 |s0|.  Until a trial is too long or past the minimum, t doubles; then the
    bracket [lo, hi] shrinks to the safeguarded minimizer of the quadratic through (lo, f, s)
    and (hi, f).  A non-finite value or slope counts as too long."""
    t, f0, s0 = st.t, st.f0, st.s0
    s = _vdot(g, d)
    tol = APPROX_RTOL * jnp.abs(f0)
    finite = jnp.isfinite(f) & jnp.isfinite(s)
    decrease = finite & (((f <= f0 + C1 * t * s0) & (f <= st.f_lo))
                         | ((f <= f0 + tol) & (s <= (2 * C1 - 1) * s0) & (f <= st.f_lo + tol)))
    done = decrease & (jnp.abs(s) <= -C2 * s0)
    past = decrease & (s * (st.hi - t) >= 0)          # the minimum lies between the old lo and t
    hi = jnp.where(decrease, jnp.where(past, st.lo, st.hi), t)
    f_hi = jnp.where(decrease, jnp.where(past, st.f_lo, st.f_hi), jnp.where(finite, f, jnp.inf))
    lo, f_lo, s_lo, g_lo, a_lo = tree_where(decrease, (t, f, s, g, aux), (st.lo, st.f_lo, st.s_lo, st.g_lo, st.a_lo))
    h = hi - lo
    curv = (f_hi - f_lo - s_lo * h) / (h * h)                        # quadratic through lo and hi
    inner = jnp.where(jnp.isfinite(curv) & (curv > 0), lo - s_lo / (2 * jnp.where(curv > 0, curv, 1.0)),
                      lo + 0.5 * h)
    a, b = jnp.minimum(lo, hi), jnp.maximum(lo, hi)
    inner = jnp.clip(inner, a + 0.1 * (b - a), b - 0.1 * (b - a))
    nxt = jnp.where(jnp.isinf(hi), 2.0 * t, inner)
    return Search(st.k + 1, jnp.where(done, t, nxt), f0, s0, lo, f_lo, s_lo, g_lo, hi, f_hi, done, a_lo)


def search_over(st: Search):
    """Whether the search has ended (Wolfe conditions met, or MAX_TRIALS trials)."""
    return st.done | (st.k >= MAX_TRIALS)


def search_result(st: Search):
    """(t, f, g, ok) of an ended search: the Wolfe step (ok); else the best step satisfying
    sufficient decrease or, if none did, t = 0 with the start's f0 and g0."""
    return st.lo, st.f_lo, st.g_lo, st.done


def search_aux(st: Search):
    """The loss's auxiliary output at :func:`search_result`'s step."""
    return st.a_lo


class _Run(NamedTuple):
    k: jax.Array          # L-BFGS steps completed
    started: jax.Array    # f, g at x evaluated
    x: object
    d: object             # the search direction at x
    search: Search
    memory: object        # optax.scale_by_lbfgs state
    hist: jax.Array


def lbfgs_minimize(loss, x0, steps, memory_size=20, aux0=None):
    """``steps`` L-BFGS steps on ``loss`` from x0 (a pytree of float arrays), call under jit.

    One ``lax.while_loop`` whose body makes one evaluation of ``jax.value_and_grad(loss)``: the
    start's, then line-search trials (:func:`search_update`); when a search ends the step is
    taken and the next direction computed by ``optax.scale_by_lbfgs(memory_size)`` (the first
    is -g / max(1, |g|); every search's first trial is t = 1).  A direction that is not a
    descent direction (rounding in the memory) is replaced by -g.  A search that does not meet
    the Wolfe conditions in MAX_TRIALS trials ends the minimization after its best step (none if
    no trial decreased the loss): along d the loss is flat to its rounding, where further
    steps would only spend MAX_TRIALS evaluations each without changing it.  The loss is
    evaluated at x0 even when ``steps`` is 0; its value is cast to x0's dtype.

    Returns (x, history (steps,) of the loss before each step; after an early end, the loss at
    the returned x).  With ``aux0`` (a pytree of
    arrays of the shapes of the loss's auxiliary output), ``loss`` returns (value, aux) and the
    result is (x, history, aux at x): what a caller needs at the minimizer (e.g. constraint
    values) without evaluating the loss again."""
    import optax
    has_aux = aux0 is not None
    direction = optax.scale_by_lbfgs(memory_size)
    value_and_grad = jax.value_and_grad(loss, has_aux=has_aux)
    with optax_promotion():
        mem0 = direction.init(x0)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, x0)
    dtype = jnp.result_type(*jax.tree_util.tree_leaves(x0))
    f_nan = jnp.full((), jnp.nan, dtype)
    run0 = _Run(jnp.asarray(0), jnp.asarray(False), x0, zeros, search_start(f_nan, zeros, zeros, 0.0, aux0), mem0,
                jnp.full((steps,), jnp.nan, dtype))

    def body(r):
        st = r.search
        out, g = value_and_grad(_axpy(jnp.where(r.started, st.t, 0.0), r.d, r.x))
        f, a = out if has_aux else (out, None)
        f = f.astype(dtype)
        a = jax.tree_util.tree_map(lambda v, w: v.astype(w.dtype), a, aux0)
        st = search_update(st, f, g, r.d, a)
        ended = r.started & search_over(st)
        t, f_new, g_new, ok = search_result(st)
        stop = ended & ~ok                            # flat to rounding along d: the last step
        x_new = _axpy(t, r.d, r.x)
        # the point the next direction starts from: x0 (first evaluation) or the step's end
        xs, fs, gs, as_ = tree_where(r.started, (x_new, f_new, g_new, search_aux(st)), (r.x, f, g, a))
        with optax_promotion():
            h, mem = direction.update(gs, r.memory, xs)
        descent = _vdot(gs, h) > 0
        d = jax.tree_util.tree_map(lambda a, b: -jnp.where(descent, a, b), h, gs)
        new = ended | ~r.started                      # a new search starts from xs along d
        k = jnp.where(stop, steps, r.k + ended.astype(r.k.dtype))
        i = jnp.arange(steps)
        hist = jnp.where(ended & (i == r.k), st.f0, jnp.where(stop & (i > r.k), f_new, r.hist))
        return _Run(k, jnp.asarray(True), tree_where(new, xs, r.x), tree_where(new, d, r.d),
                    tree_where(new, search_start(fs, gs, d, 1.0, as_), st), tree_where(new, mem, r.memory), hist)

    r = lax.while_loop(lambda r: (r.k < steps) | ~r.started, body, run0)
    return (r.x, r.hist, r.search.a_lo) if has_aux else (r.x, r.hist)
