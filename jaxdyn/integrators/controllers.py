"""Controls of a rollout, kept apart from the driver.

A *controller* ``ctrl(t, q, qd) -> tau`` is a continuous-time feedback law: every stage of every
stepper evaluates it at the stage's own (t, q, qd).  A *torque array* U (steps, nv) is a
zero-order hold: U[k] acts over the whole sample [t_k, t_k+1), at every internal stage of step
k whatever its time (RK4's t + dt stage, RKF45's adaptive sub-steps, ABM's derivative
history), and nowhere else.  A :class:`HeldLaw` is a sampled-data controller: its law is
evaluated once per sample, at the sample's start state, and that torque is held like a row of
U, so a rollout's ``tau[:-1]`` replays it open-loop exactly.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..batching import rnea
from ..errors import ShapeError


class HeldLaw(NamedTuple):
    """A sampled-data feedback law with held parameters Z (steps, p): sample k applies
    ``tau_k = law(Z[k], t_k, q_k, qd_k)``, evaluated once at the sample's start state and held
    over [t_k, t_k+1) at every stage (a digital controller with a zero-order hold).  The
    rollout's ``tau[k]`` is that torque, so replaying ``tau[:-1]`` as a torque array on the same
    stepper and dt gives the same trajectory.  With ``law = lambda z, t, q, qd: rnea(model, q,
    qd, z)`` the acceleration at each sample's start is Z[k] (feedback linearization, held),
    the acceleration parametrization of :mod:`jaxdyn.apps.trajopt`."""
    Z: jax.Array
    law: Callable


def zero_torque(model):
    """The controller tau(t, q, qd) = 0 (nv,)."""
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


def controls(model, controller_or_torques, steps, dtype):
    """-> (tau_at(k, t, q, qd), held): the torque of step k at (t, q, qd); ``held`` is True for
    a (steps, nv) zero-order-hold array and a HeldLaw (the rollout evaluates tau_at once per
    sample, at its start)."""
    c = controller_or_torques
    if isinstance(c, HeldLaw):
        Z = jnp.asarray(c.Z)
        if Z.ndim != 2 or Z.shape[0] != steps:
            raise ShapeError(f"HeldLaw parameters must have shape (steps, p) with steps = {steps}, got {Z.shape}")
        return (lambda k, t, q, qd: c.law(Z[jnp.clip(k, 0, steps - 1)], t, q, qd)), True
    if callable(c):
        return (lambda k, t, q, qd: c(t, q, qd)), False
    if c is None:
        z = zero_torque(model)
        return (lambda k, t, q, qd: z(t, q, qd)), False
    U = jnp.asarray(c)
    if not jnp.issubdtype(U.dtype, jnp.floating):
        U = U.astype(dtype)
    if U.shape == (model.nv,):
        return (lambda k, t, q, qd: U), False
    if U.shape == (steps, model.nv):
        return (lambda k, t, q, qd: U[jnp.clip(k, 0, steps - 1)]), True
    raise ShapeError(f"rollout torques must have shape (steps, nv) = ({steps}, {model.nv}) (one row per "
                     f"step, held over it) or (nv,) = ({model.nv},) for model {model.name!r}, got {U.shape}")
