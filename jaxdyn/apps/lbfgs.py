"""L-BFGS with a Wolfe line search whose loop evaluates the loss at one call site.

The direction is optax's two-loop recursion (``optax.scale_by_lbfgs``, Nocedal and Wright
1999, Algorithms 7.4-7.5); the step length is found by :func:`wolfe_search`, a bracketing
search (Nocedal and Wright, Algorithm 3.5) whose ``lax.while_loop`` body evaluates the value
and gradient once per trial and then updates its bracket.  optax's zoom line search calls the
value and gradient in both branches of a ``lax.cond`` (a second copy of the loss in the
compiled program, and under ``jax.vmap`` a ``select`` that evaluates both at every trial);
here each program holds the loss twice (the start, and the search's trial), and a vmapped
search evaluates it once per trial.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax

from .common import optax_promotion


class _Search(NamedTuple):
    k: jax.Array          # trials made
    t: jax.Array          # the next trial step
    lo: jax.Array         # the best step so far satisfying sufficient decrease (0: none)
    f_lo: jax.Array
    s_lo: jax.Array       # slope at lo
    g_lo: object          # gradient at lo
    hi: jax.Array         # the other end of the bracket (inf: none yet); may lie below lo
    f_hi: jax.Array
    last: tuple           # (t, f, g) of the latest trial
    done: jax.Array


def _vdot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def _where(c, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(c, x, y), a, b)


def wolfe_search(value_and_grad, x, d, f0, g0, t0=1.0, c1=1e-4, c2=0.9, approx_rtol=1e-6, max_trials=30):
    """A step t along the descent direction d from x with f(x + t d) <= f0 + c1 t f'(0) and
    |f'(t)| <= c2 |f'(0)| (the strong Wolfe conditions; where f's rounding hides the decrease
    near a minimum, Hager and Zhang's (2005) approximate decrease f(x + t d) <= f0 + approx_rtol
    |f0| with f'(t) <= (2 c1 - 1) f'(0) stands for the first), by Nocedal and Wright's (1999)
    Algorithms 3.5-3.6: t doubles until a step is too long or past the minimum, then the
    bracket [lo, hi] shrinks to the safeguarded minimizer of the quadratic through (lo, f, f')
    and (hi, f).  A non-finite value or slope counts as too long.  After ``max_trials`` trials
    the best step satisfying sufficient decrease is taken or, if none did, the latest finite
    one (as optax's zoom line search does).  Returns (t, f(x + t d), gradient there, whether
    the Wolfe conditions were met)."""
    s0 = _vdot(g0, d)
    point = lambda t: jax.tree_util.tree_map(lambda a, b: a + t.astype(a.dtype) * b, x, d)
    dt = jnp.result_type(f0)
    z = jnp.zeros((), dt)
    init = _Search(jnp.asarray(0), jnp.asarray(t0, dt), z, f0, s0, g0, jnp.asarray(jnp.inf, dt), f0, (z, f0, g0),
                   jnp.asarray(False))

    def body(st):
        t = st.t
        f, g = value_and_grad(point(t))
        s = _vdot(g, d)
        tol = approx_rtol * jnp.abs(f0)
        finite = jnp.isfinite(f) & jnp.isfinite(s)
        decrease = finite & (((f <= f0 + c1 * t * s0) & (f <= st.f_lo))
                             | ((f <= f0 + tol) & (s <= (2 * c1 - 1) * s0) & (f <= st.f_lo + tol)))
        done = decrease & (jnp.abs(s) <= -c2 * s0)
        past = decrease & (s * (st.hi - t) >= 0)          # the minimum lies between the old lo and t
        hi = jnp.where(decrease, jnp.where(past, st.lo, st.hi), t)
        f_hi = jnp.where(decrease, jnp.where(past, st.f_lo, st.f_hi), jnp.where(finite, f, jnp.inf))
        lo, f_lo, s_lo, g_lo = _where(decrease, (t, f, s, g), (st.lo, st.f_lo, st.s_lo, st.g_lo))
        h = hi - lo
        curv = (f_hi - f_lo - s_lo * h) / (h * h)                        # quadratic through lo and hi
        inner = jnp.where(jnp.isfinite(curv) & (curv > 0), lo - s_lo / (2 * jnp.where(curv > 0, curv, 1.0)),
                          lo + 0.5 * h)
        a, b = jnp.minimum(lo, hi), jnp.maximum(lo, hi)
        inner = jnp.clip(inner, a + 0.1 * (b - a), b - 0.1 * (b - a))
        nxt = jnp.where(jnp.isinf(hi), 2.0 * t, inner)
        last = _where(finite, (t, f, g), st.last)
        return _Search(st.k + 1, jnp.where(done, t, nxt), lo, f_lo, s_lo, g_lo, hi, f_hi, last, done)

    st = lax.while_loop(lambda st: ~st.done & (st.k < max_trials), body, init)
    return (*_where(st.done | (st.lo > 0), (st.lo, st.f_lo, st.g_lo), st.last), st.done)


def lbfgs_minimize(loss, x0, steps, memory_size=20):
    """``steps`` L-BFGS steps on ``loss`` from x0 (a pytree of float arrays) in one ``lax.scan``
    (call it under jit): direction by ``optax.scale_by_lbfgs(memory_size)``, step by
    :func:`wolfe_search` (first trial 1; optax scales the first direction to unit length).  A
    direction that is not a descent direction (rounding in the memory) is replaced by -g.  A
    step whose search did not meet the Wolfe conditions adds no curvature pair to the memory
    (its s^T y need not be positive, and a negative one makes the next direction ascend).
    Returns (x, history (steps,) of loss values before each step)."""
    direction = optax.scale_by_lbfgs(memory_size)
    value_and_grad = jax.value_and_grad(loss)

    def step(carry, _):
        x, f, g, s = carry
        with optax_promotion():
            h, s = direction.update(g, s, x)
        descent = _vdot(g, h) > 0
        d = jax.tree_util.tree_map(lambda a, b: -jnp.where(descent, a, b), h, g)
        t, f_new, g_new, ok = wolfe_search(value_and_grad, x, d, f, g)
        x_new = jax.tree_util.tree_map(lambda a, b: a + t.astype(a.dtype) * b, x, d)
        s = s._replace(params=_where(ok, s.params, x_new), updates=_where(ok, s.updates, g_new))
        return (x_new, f_new, g_new, s), f

    f0, g0 = value_and_grad(x0)
    with optax_promotion():
        s0 = direction.init(x0)
    (x, _, _, _), hist = lax.scan(step, (x0, f0, g0, s0), None, length=steps)
    return x, hist
