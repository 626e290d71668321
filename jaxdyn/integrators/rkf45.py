"""Runge-Kutta-Fehlberg 4(5) with embedded error control (Saha 2003, Sec. 3).

Decision: the adaptive solver is our own (not diffrax), ~80 lines on ``lax.while_loop``, so
jaxdyn keeps its dependency list short and integrates q on the joint manifolds itself.
Reverse-mode gradients go through the fixed-step schemes (``lax.scan``); the adaptive loop
supports forward-mode (``jax.jvp``) only, because ``while_loop`` is not reverse-differentiable.

``rkf45_interval`` advances from t to t + dt with as many internal steps as the tolerance
needs: error = RMS of |y5 - y4| / scale, scale = atol + rtol (positions, which are O(1) rad / m) and
atol + rtol max(|qd|, |qd_new|) (velocities); a step is
accepted when error <= 1; h <- h clip(0.9 err^-1/5, 0.2, 5), bounded by [h_min, dt].
The 5th-order solution is propagated (local extrapolation).

Failure is never silent: a non-finite error estimate or state (e.g. dynamics that return NaN
for a massless leaf body) ends the interval at once with a NaN state and sets
``RKFStats.failed``; later intervals then do no work.  An interval that runs out of
``max_steps`` before reaching t + dt also sets ``failed`` and returns NaN (a state at the wrong
time would be a silently wrong answer).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax

from ..model.configuration import integrate
from .common import stage_state

# Fehlberg's coefficients
_C = (0.0, 1 / 4, 3 / 8, 12 / 13, 1.0, 1 / 2)
_A = (
    (),
    (1 / 4,),
    (3 / 32, 9 / 32),
    (1932 / 2197, -7200 / 2197, 7296 / 2197),
    (439 / 216, -8.0, 3680 / 513, -845 / 4104),
    (-8 / 27, 2.0, -3544 / 2565, 1859 / 4104, -11 / 40),
)
_B5 = (16 / 135, 0.0, 6656 / 12825, 28561 / 56430, -9 / 50, 2 / 55)
_B4 = (25 / 216, 0.0, 1408 / 2565, 2197 / 4104, -1 / 5, 0.0)


class RKFStats(NamedTuple):
    """State of the adaptive RKF45 stepper carried across samples (all scalars)."""
    h: jnp.ndarray         # step size to try next
    accepted: jnp.ndarray  # accepted internal steps (cumulative)
    rejected: jnp.ndarray  # rejected internal steps (cumulative)
    failed: jnp.ndarray    # () bool: a non-finite state / error estimate, or max_steps exhausted


def rkf45_stats(dt, dtype):
    """Initial :class:`RKFStats` for intervals of length dt (first trial step dt / 4)."""
    return RKFStats(jnp.asarray(dt / 4, dtype), jnp.int32(0), jnp.int32(0), jnp.asarray(False))


def rkf45_step(model, dyn, t, q, qd, h):
    """One Fehlberg step of size h from (t, q (nq,), qd (nv,)).

    Returns (q5 (nq,), qd5 (nv,), err_q (nv,), err_v (nv,)): the 5th-order state and the
    embedded error estimate (tangent-space for q).

    The six stages are one ``lax.scan`` over the rows of the tableau (stage i reads the
    stacked derivatives K (6, nv) with row i of A, zero from column i on), so the dynamics
    is traced and compiled once per step instead of six times (as :func:`jaxdyn.integrators.rk4.rk4`;
    compile times: ``benchmarks/results/history.md``).
    """
    dtype = jnp.result_type(qd)
    n = len(_C)
    A = jnp.asarray([list(row) + [0.0] * (n - len(row)) for row in _A], dtype)     # (6, 6)

    def stage(K, ic):
        i, c, a = ic
        Kv, Ka = K
        qi, vi = stage_state(model, q, qd, a @ Kv, a @ Ka, h)
        ai = dyn(t + c * h, qi, vi)
        return (Kv.at[i].set(vi), Ka.at[i].set(ai)), None

    z = jnp.zeros((n,) + qd.shape, dtype)
    xs = (jnp.arange(n), jnp.asarray(_C, dtype), A)
    (Kv, Ka), _ = lax.scan(stage, (z, z), xs)
    b5, d = jnp.asarray(_B5, dtype), jnp.asarray(_B5, dtype) - jnp.asarray(_B4, dtype)
    return integrate(model, q, b5 @ Kv, h), qd + h * (b5 @ Ka), h * (d @ Kv), h * (d @ Ka)


def _finite(*xs):
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in xs]))


def rkf45_interval(model, dyn, t, q, qd, dt, stats: RKFStats, rtol=1e-6, atol=1e-9, h_min=1e-10,
                   max_steps=10000):
    """Advance (q, qd) from t to t + dt adaptively.  Returns (q, qd, stats).

    ``dyn(t, q, qd) -> qdd``.  See the module docstring for the failure semantics.
    """
    t_end = t + dt
    eps_t = 1e-14 * jnp.maximum(1.0, jnp.abs(t_end))

    def cond(s):
        tt, _, _, st, n = s
        return (tt < t_end - eps_t) & (n < max_steps) & ~st.failed

    def body(s):
        tt, q, qd, st, n = s
        h = jnp.clip(jnp.minimum(st.h, t_end - tt), h_min, dt)
        q5, v5, eq, ev = rkf45_step(model, dyn, tt, q, qd, h)
        sq = atol + rtol * jnp.ones_like(eq)          # positions (rad, m) are O(1)
        sv = atol + rtol * jnp.maximum(jnp.abs(qd), jnp.abs(v5))
        err = jnp.sqrt(jnp.mean(jnp.concatenate([(eq / sq) ** 2, (ev / sv) ** 2])))
        bad = ~(jnp.isfinite(err) & _finite(q5, v5))
        ok = (err <= 1.0) | (h <= h_min) | bad        # a bad step is "accepted" to stop here
        fac = jnp.clip(0.9 * jnp.where(err > 0, err, 1e-10) ** -0.2, 0.2, 5.0)
        h_next = jnp.clip(h * fac, h_min, dt)
        # keep the trial size when the step was shortened only to hit t_end
        h_next = jnp.where(ok & (h < st.h), jnp.maximum(h_next, st.h), h_next)
        h_next = jnp.where(bad, st.h, h_next)
        count = st.accepted.dtype
        st = RKFStats(h_next, st.accepted + (ok & ~bad).astype(count), st.rejected + (~ok).astype(count),
                      st.failed | bad)
        nan = jnp.asarray(jnp.nan, qd.dtype)
        q5, v5 = jnp.where(bad, nan, q5), jnp.where(bad, nan, v5)   # never a finite garbage state
        return (jnp.where(ok, tt + h, tt), jnp.where(ok, q5, q), jnp.where(ok, v5, qd), st, n + 1)

    tt, q, qd, stats, _ = lax.while_loop(cond, body, (t, q, qd, stats, jnp.int32(0)))
    short = (tt < t_end - eps_t) & ~stats.failed      # max_steps exhausted
    nan = jnp.asarray(jnp.nan, qd.dtype)
    q, qd = jnp.where(short, nan, q), jnp.where(short, nan, qd)
    return q, qd, stats._replace(failed=stats.failed | short)
