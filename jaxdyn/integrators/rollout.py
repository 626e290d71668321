"""Rollouts as ``lax.scan`` of a stepper; controllers as pure functions of (t, q, qd)."""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..dynamics.forward import forward_dynamics
from ..dynamics.rnea import rnea
from .abm import abm4, abm_init
from .euler import semi_implicit_euler
from .rk4 import rk4
from .rkf45 import RKFStats, rkf45_interval

STEPPERS = ("euler", "rk4", "rkf45", "abm")


class Trajectory(NamedTuple):
    t: jax.Array      # (steps + 1,)
    q: jax.Array      # (steps + 1, nq)
    qd: jax.Array     # (steps + 1, nv)
    tau: jax.Array    # (steps + 1, nv) controller output at each sample
    accepted: jax.Array  # () internal steps accepted (rkf45), else steps
    rejected: jax.Array  # () internal steps rejected (rkf45), else 0


# ---- controllers -------------------------------------------------------------------------

def zero_torque(model):
    return lambda t, q, qd: jnp.zeros(model.nv, jnp.result_type(qd))


def pd(kp, kd, q_des: Callable, qd_des: Callable | None = None):
    """tau = kp (q_des(t) - q) + kd (qd_des(t) - qd), vector-space joints."""
    return lambda t, q, qd: kp * (q_des(t) - q) + kd * ((0 * qd if qd_des is None else qd_des(t)) - qd)


def feedforward(model, trajectory: Callable):
    """Open-loop inverse-dynamics torques tau(t) = RNEA(q_d, qd_d, qdd_d) (Saha's forced runs)."""
    def ctrl(t, q, qd):
        qd_, vd_, ad_ = trajectory(t)
        return rnea(model, qd_, vd_, ad_)
    return ctrl


def computed_torque(model, trajectory: Callable, kp, kd):
    """tau = RNEA(q, qd, qdd_d + kp e + kd e_dot): feed-forward plus feedback linearization."""
    def ctrl(t, q, qd):
        q_d, v_d, a_d = trajectory(t)
        return rnea(model, q, qd, a_d + kp * (q_d - q) + kd * (v_d - qd))
    return ctrl


def cycloidal(q0, qT, T):
    """Saha eq. (18): q(t) = q0 + (qT - q0)/(2 pi) (2 pi t/T - sin(2 pi t/T)), held after T.
    Returns trajectory(t) -> (q, qd, qdd)."""
    q0, qT = jnp.asarray(q0, float), jnp.asarray(qT, float)

    def traj(t):
        t = jnp.asarray(t, q0.dtype)
        s = jnp.clip(t, 0.0, T)
        w = 2 * jnp.pi / T
        inside = jnp.asarray(t <= T, q0.dtype)
        qq = q0 + (qT - q0) / (2 * jnp.pi) * (w * s - jnp.sin(w * s))
        vv = inside * (qT - q0) / (2 * jnp.pi) * (w - w * jnp.cos(w * s))
        aa = inside * (qT - q0) / (2 * jnp.pi) * (w * w * jnp.sin(w * s))
        return qq, vv, aa
    return traj


def _as_controller(model, controller_or_torques, dt):
    if callable(controller_or_torques):
        return controller_or_torques
    if controller_or_torques is None:
        return zero_torque(model)
    U = jnp.asarray(controller_or_torques)
    if U.ndim == 1:
        return lambda t, q, qd: U
    n = U.shape[0]
    return lambda t, q, qd: U[jnp.clip(jnp.floor(t / dt + 1e-9).astype(jnp.int32), 0, n - 1)]


def rollout(model, q0, qd0, controller_or_torques=None, dt=0.01, steps=100, stepper="rk4",
            method="aba", rtol=1e-8, atol=1e-10, chunk=None, t0=0.0):
    """Simulate ``steps`` samples of length ``dt`` from (q0, qd0).

    Args:
      controller_or_torques: ``ctrl(t, q, qd) -> tau``; or a (steps, nv) torque array held
        constant over each sample (zero-order hold); or (nv,) constant; or None (zero torque).
      stepper: "euler" (semi-implicit), "rk4", "rkf45" (adaptive inside each sample, rtol/atol),
        "abm" (Adams-Bashforth-Moulton 4, RK4 start).
      method: forward-dynamics method (see ``jaxdyn.methods()``).
      chunk: if set (divides steps), scan over chunks whose bodies are ``jax.checkpoint``-ed:
        reverse-mode memory O(steps / chunk + chunk) instead of O(steps) stage values.
    Returns:
      :class:`Trajectory`.  ``vmap`` over q0/qd0/controls/stacked models works as usual.
    """
    if stepper not in STEPPERS:
        raise ValueError(f"unknown stepper {stepper!r}; choose from {STEPPERS}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if not (isinstance(dt, (int, float)) and dt > 0):
        raise ValueError(f"dt must be a positive number, got {dt!r}")
    ctrl = _as_controller(model, controller_or_torques, dt)
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    dtype = qd0.dtype

    def dyn(t, q, qd):
        return forward_dynamics(model, q, qd, ctrl(t, q, qd), method=method)

    def sample(carry, k):
        q, qd, extra = carry
        t = t0 + k * dt
        if stepper == "euler":
            q1, v1 = semi_implicit_euler(model, dyn, t, q, qd, dt)
        elif stepper == "rk4":
            q1, v1 = rk4(model, dyn, t, q, qd, dt)
        elif stepper == "rkf45":
            q1, v1, extra = rkf45_interval(model, dyn, t, q, qd, dt, extra, rtol=rtol, atol=atol)
        else:
            q1, v1, extra = abm4(model, dyn, t, q, qd, dt, extra)
        return (q1, v1, extra), (q1, v1, ctrl(t + dt, q1, v1))

    k0 = 0
    qs0, vs0 = [q0], [qd0]
    if stepper == "rkf45":
        extra = RKFStats(jnp.asarray(dt / 4, dtype), jnp.int32(0), jnp.int32(0))
    elif stepper == "abm":
        k0 = min(3, steps)
        states, extra = abm_init(model, dyn, t0, q0, qd0, dt)
        qs0 += [s_[0] for s_ in states[:k0]]
        vs0 += [s_[1] for s_ in states[:k0]]
        q0, qd0 = states[-1]
    else:
        extra = jnp.zeros((), dtype)
    ks = jnp.arange(k0, steps, dtype=dtype)
    body = sample
    if chunk:
        n = ks.shape[0]
        if n % chunk:
            raise ValueError(f"chunk={chunk} must divide the scanned steps {n}")

        @jax.checkpoint
        def chunk_body(carry, kk):
            return lax.scan(sample, carry, kk)

        (qf, vf, extra), (qs, vs, taus) = lax.scan(chunk_body, (q0, qd0, extra), ks.reshape(-1, chunk))
        qs, vs, taus = (x.reshape((-1,) + x.shape[2:]) for x in (qs, vs, taus))
    else:
        (qf, vf, extra), (qs, vs, taus) = lax.scan(body, (q0, qd0, extra), ks)
    head_q, head_v = jnp.stack(qs0), jnp.stack(vs0)
    head_tau = jnp.stack([ctrl(t0 + i * dt, a, b) for i, (a, b) in enumerate(zip(qs0, vs0))])
    t = t0 + dt * jnp.arange(steps + 1, dtype=dtype)
    acc = extra.accepted if stepper == "rkf45" else jnp.int32(steps)
    rej = extra.rejected if stepper == "rkf45" else jnp.int32(0)
    return Trajectory(t, jnp.concatenate([head_q, qs]), jnp.concatenate([head_v, vs]),
                      jnp.concatenate([head_tau, taus]), acc, rej)
