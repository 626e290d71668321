"""Adams-Bashforth-Moulton 4th-order predictor-corrector (PECE) for q'' = a(t, q, qd), RK4
start-up.

The history holds the last four accelerations a at t_{n-3..n}; P is the cubic through them
(predictor, AB4) or through (a*, a_n, a_{n-1}, a_{n-2}) (corrector, AM4).  The system is
integrated in its second-order (Adams-Nystrom) form: with s = (t - t_n) / dt,

    qd_{n+1} = qd_n + dt int_0^1 P(s) ds,
    q_{n+1}  = q_n (+) (dt qd_n + dt^2 int_0^1 (1 - s) P(s) ds),

so positions are integrated from the step's own initial velocity plus the interpolated
acceleration, never from interpolated past velocities.  The weights are the exact integrals
of the Lagrange basis (AB: (55, -59, 37, -9) / 24 and (323, -264, 159, -38) / 360; AM: (9, 19,
-5, 1) / 24 and (38, 171, -36, 7) / 360); the method is exact for piecewise-constant
acceleration.  Configuration increments go through ``integrate`` (quaternions stay unit).

Zero-order hold: a multistep formula extrapolates the acceleration history, which is only
valid for the ODE that is integrated *now*.  When the torque of step n is held over
[t_n, t_{n+1}) (a torque array in :func:`jaxdyn.rollout`), the history accelerations are
re-evaluated at the past states with step n's torque (:func:`history_at`), so no evaluation
of step n sees another step's torque.  That costs four more (vmapped) evaluations per step.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..model.configuration import integrate
from .rk4 import rk4

_AB_V = np.array([-9.0, 37.0, -59.0, 55.0]) / 24        # oldest first: a_{n-3} .. a_n
_AB_Q = np.array([-38.0, 159.0, -264.0, 323.0]) / 360
_AM_V = np.array([1.0, -5.0, 19.0, 9.0]) / 24           # a_{n-2}, a_{n-1}, a_n, a*
_AM_Q = np.array([7.0, -36.0, 171.0, 38.0]) / 360
_WEIGHTS = np.array([[np.append(_AB_V, 0.0), np.append(_AB_Q, 0.0)],     # on (a_{n-3} .. a_n, a*)
                     [np.insert(_AM_V, 0, 0.0), np.insert(_AM_Q, 0, 0.0)]])


def abm_init(model, dyn_for, t, q, qd, dt):
    """Three RK4 steps, step i with dynamics ``dyn_for(i, t_i, q_i, qd_i)`` (the dynamics of
    sample i, which starts at (t_i, q_i, qd_i)).

    Returns the states [(q, qd)] at t + dt, t + 2 dt, t + 3 dt, the acceleration history
    (4, nv) at t .. t + 3 dt (the one at t + i dt under sample i's dynamics) and the state
    history (qs (4, nq), vs (4, nv)) at t .. t + 3 dt.  The three steps are one ``lax.scan`` and
    the history one vmapped evaluation (the dynamics is compiled twice, not seven times).
    """
    def start_step(x, i):
        ti = t + i.astype(qd.dtype) * dt
        x = rk4(model, dyn_for(i, ti, *x), ti, *x, dt)
        return x, x

    def accel_at(i, q, qd):
        ti = t + i.astype(qd.dtype) * dt
        return dyn_for(i, ti, q, qd)(ti, q, qd)

    ks = jnp.arange(3)
    _, (qs, vs) = lax.scan(start_step, (q, qd), ks)
    qs, vs = jnp.concatenate([q[None], qs]), jnp.concatenate([qd[None], vs])
    hist = jax.vmap(accel_at)(jnp.arange(4), qs, vs)
    return [(qs[i], vs[i]) for i in range(1, 4)], hist, (qs, vs)


def history_at(dyn, t, dt, qs, vs):
    """Acceleration history (4, nv) of the states qs (4, nq), vs (4, nv) at t - 3 dt .. t,
    all under one dynamics ``dyn`` (the held torque of the current step)."""
    ts = t + dt * jnp.arange(-3, 1, dtype=vs.dtype)
    return jax.vmap(dyn)(ts, qs, vs)


def _advance(model, q, qd, dt, wv, wq, a):
    """q (+) (dt qd + dt^2 wq.a),  qd + dt wv.a  for weights (m,) and accelerations a (m, nv)."""
    wv, wq = jnp.asarray(wv, a.dtype), jnp.asarray(wq, a.dtype)   # float64 constants
    return integrate(model, q, qd + dt * (wq @ a), dt), qd + dt * (wv @ a)


def abm4(model, dyn, t, q, qd, dt, hist):
    """One PECE step from (t, q (nq,), qd (nv,)); hist (4, nv) accelerations, oldest first.

    Returns (q, qd, hist) at t + dt with the history shifted by one.  The two evaluations
    (predicted a*, corrected a_n+1) are one ``lax.scan`` over the weight rows of AB4 and AM4
    on (hist, a*) (5, nv), so the dynamics is compiled once per step.
    """
    W = jnp.asarray(_WEIGHTS, hist.dtype)                          # (2 passes, v / q, 5)

    def evaluate(acc, w):
        qi, vi = _advance(model, q, qd, dt, w[0], w[1], acc)
        a = dyn(t + dt, qi, vi)
        return acc.at[4].set(a), (qi, vi)

    acc = jnp.concatenate([hist, jnp.zeros_like(hist[:1])])
    acc, (qs, vs) = lax.scan(evaluate, acc, W)
    return qs[1], vs[1], acc[1:]
