"""Rollouts as ``lax.scan`` of a stepper; controllers as pure functions of (t, q, qd).

Controls come in two kinds.  A *controller* ``ctrl(t, q, qd) -> tau`` is a continuous-time
feedback law: every stage of every stepper evaluates it at the stage's own (t, q, qd).  A
*torque array* U (steps, nv) is a zero-order hold: U[k] acts over the whole sample
[t_k, t_k+1), at every internal stage of step k whatever its time (RK4's t + dt stage,
RKF45's adaptive sub-steps, ABM's derivative history), and nowhere else.
"""
from __future__ import annotations

import math
import operator
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ..dynamics.forward import forward_dynamics
from ..dynamics.rnea import rnea
from ..errors import ArgumentError, ShapeError
from .abm import abm4, abm_init, history_at
from .euler import semi_implicit_euler
from .rk4 import rk4
from .rkf45 import rkf45_interval, rkf45_stats

STEPPERS = ("euler", "rk4", "rkf45", "abm")


class Trajectory(NamedTuple):
    """A rollout's samples (leading batch axes under vmap)."""
    t: jax.Array      # (steps + 1,)
    q: jax.Array      # (steps + 1, nq)
    qd: jax.Array     # (steps + 1, nv)
    tau: jax.Array    # (steps + 1, nv) controller output at each sample
    accepted: jax.Array  # () internal steps accepted (rkf45), else steps
    rejected: jax.Array  # () internal steps rejected (rkf45), else 0
    ok: jax.Array     # () bool: every sample finite (False: the integration failed; the state
                      # is NaN from the first failed sample on, see :func:`first_nonfinite`)


# ---- controllers -------------------------------------------------------------------------

class HeldLaw(NamedTuple):
    """Zero-order hold of parameters through a feedback law: over sample k every stage
    applies ``tau = law(Z[k], t, q, qd)`` (Z (steps, p)).  With ``law = lambda z, t, q, qd:
    rnea(model, q, qd, z)`` the rollout is a double integrator qdd = Z[k] (feedback
    linearization), the acceleration parametrization of :mod:`jaxdyn.apps.trajopt`."""
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


def _controls(model, controller_or_torques, steps, dtype):
    """-> (tau_at(k, t, q, qd), held): the torque of step k at a stage (t, q, qd); ``held`` is
    True for a (steps, nv) zero-order-hold array."""
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


def _check_steps(steps):
    try:
        n = operator.index(steps)
    except TypeError:
        raise ArgumentError(f"steps must be a concrete positive int (it sets the scan length), "
                            f"got {steps!r}") from None
    if n < 1:
        raise ArgumentError(f"steps must be a positive int, got {n}")
    return n


def _check_dt(dt):
    """Validate a concrete dt (> 0, finite, scalar); a traced dt passes unchecked."""
    if isinstance(dt, jax.core.Tracer):
        if jnp.ndim(dt) != 0:
            raise ArgumentError(f"dt must be a scalar, got shape {jnp.shape(dt)}")
        return dt
    try:
        ok = (not isinstance(dt, (str, bytes, bool)) and jnp.ndim(dt) == 0
              and math.isfinite(float(dt)) and float(dt) > 0)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ArgumentError(f"dt must be a positive finite number, got {dt!r}")
    return dt


def rollout(model, q0, qd0, controller_or_torques=None, dt=0.01, steps=100, stepper="rk4",
            method="aba", rtol=1e-8, atol=1e-10, chunk=None, t0=0.0, stabilization=None):
    """Simulate ``steps`` samples of length ``dt`` from (q0 (nq,), qd0 (nv,)).

    Args:
      controller_or_torques: ``ctrl(t, q, qd) -> tau`` (continuous-time law, evaluated at every
        stage); or a (steps, nv) torque array, row k held over [t_k, t_k+1) at every stage of
        step k (true zero-order hold, any stepper); or (nv,) constant; or None (zero torque);
        or a :class:`HeldLaw` (held parameters through a feedback law).
      dt: sample length; a Python / NumPy number or a traced JAX scalar (``jax.grad`` with
        respect to dt works with the fixed-step steppers).
      steps: number of samples, a concrete int (the scan length).
      stepper: "euler" (semi-implicit), "rk4", "rkf45" (adaptive inside each sample, rtol/atol),
        "abm" (Adams-Bashforth-Moulton 4, RK4 start).
      method: forward-dynamics method (see ``jaxdyn.methods()``); joint damping applies.
        For a closed model (:func:`jaxdyn.close_loops`) the accelerations are
        :func:`jaxdyn.constrained_forward_dynamics` (``method`` "schur" or "kkt"; the default
        "aba" means "schur") with Baumgarte gains ``stabilization=(alpha, beta)`` or None; a
        :class:`~jaxdyn.GraspSystem` ("rccfd" (default) or "lilly_orin"; the state layout of
        its ``tree``) and a :class:`~jaxdyn.LeggedSystem` ("lilly_orin" (default), "rccfd",
        "schur", "kkt"; the tree's layout) likewise.
      chunk: if set (divides the scanned steps), scan over chunks whose bodies are
        ``jax.checkpoint``-ed: reverse-mode memory O(steps / chunk + chunk) instead of O(steps).
    Returns:
      :class:`Trajectory`; ``tau[k]`` is the torque of sample k (for a torque array U,
      ``tau[k] = U[k]`` and the last row repeats ``U[-1]``).  ``ok`` is False when the state
      became non-finite (the rollout never silently freezes).  Joint position limits are not
      enforced (``model.q_lower/q_upper`` are data for users).  ``vmap`` over q0 / qd0 /
      controls / stacked models works as usual.
    """
    if stepper not in STEPPERS:
        raise ArgumentError(f"unknown stepper {stepper!r}; choose from {STEPPERS}")
    from ..constraints import ClosedModel, GraspSystem, LeggedSystem, constrained_forward_dynamics
    closed = model if isinstance(model, (ClosedModel, GraspSystem, LeggedSystem)) else None
    if closed is not None:
        model, allowed = {ClosedModel: (lambda c: c.model, ("schur", "kkt")),
                          GraspSystem: (lambda c: c.tree, ("rccfd", "lilly_orin")),
                          LeggedSystem: (lambda c: c.model, ("lilly_orin", "rccfd", "schur", "kkt"))}[type(closed)]
        model = model(closed)
        cmethod = allowed[0] if method == "aba" else method      # the default front-door name
        if cmethod not in allowed:
            raise ArgumentError(f"rollout of a {'closed model' if isinstance(closed, ClosedModel) else type(closed).__name__}: "
                                f"method must be {' or '.join(repr(a) for a in allowed)}, got {method!r}")

        def accel(q, qd, tau):
            return constrained_forward_dynamics(closed, q, qd, tau, method=cmethod, stabilization=stabilization).qdd
    else:
        if stabilization is not None:
            raise ArgumentError("stabilization applies to closed models (jaxdyn.close_loops) only")

        def accel(q, qd, tau):
            return forward_dynamics(model, q, qd, tau, method=method)
    steps = _check_steps(steps)
    dt = _check_dt(dt)
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    dtype = qd0.dtype
    tau_at, held = _controls(model, controller_or_torques, steps, dtype)

    def dyn_for(k):
        return lambda t, q, qd: accel(q, qd, tau_at(k, t, q, qd))

    def sample(carry, k):
        q, qd, extra = carry
        t = t0 + k.astype(dtype) * dt
        dyn = dyn_for(k)
        if stepper == "euler":
            q1, v1 = semi_implicit_euler(model, dyn, t, q, qd, dt)
        elif stepper == "rk4":
            q1, v1 = rk4(model, dyn, t, q, qd, dt)
        elif stepper == "rkf45":
            q1, v1, extra = rkf45_interval(model, dyn, t, q, qd, dt, extra, rtol=rtol, atol=atol)
        else:
            hist, qs_h, vs_h = extra
            if held:
                hist = history_at(dyn, t, dt, qs_h, vs_h)
            q1, v1, hist = abm4(model, dyn, t, q, qd, dt, hist)
            extra = (hist, jnp.concatenate([qs_h[1:], q1[None]]), jnp.concatenate([vs_h[1:], v1[None]]))
        return (q1, v1, extra), (q1, v1, tau_at(k + 1, t + dt, q1, v1))

    k0 = 0
    qs0, vs0 = [q0], [qd0]
    if stepper == "rkf45":
        extra = rkf45_stats(dt, dtype)
    elif stepper == "abm":
        k0 = min(3, steps)
        states, hist, (qs_h, vs_h) = abm_init(model, dyn_for, t0, q0, qd0, dt)
        extra = (hist, qs_h, vs_h)
        qs0 += [s_[0] for s_ in states[:k0]]
        vs0 += [s_[1] for s_ in states[:k0]]
        q0, qd0 = states[-1]
    else:
        extra = jnp.zeros((), dtype)
    ks = jnp.arange(k0, steps, dtype=jnp.int32)
    if chunk:
        n = ks.shape[0]
        if n % chunk:
            raise ArgumentError(f"chunk={chunk} must divide the scanned steps {n}")

        @jax.checkpoint
        def chunk_body(carry, kk):
            return lax.scan(sample, carry, kk)

        (qf, vf, extra), (qs, vs, taus) = lax.scan(chunk_body, (q0, qd0, extra), ks.reshape(-1, chunk))
        qs, vs, taus = (x.reshape((-1,) + x.shape[2:]) for x in (qs, vs, taus))
    else:
        (qf, vf, extra), (qs, vs, taus) = lax.scan(sample, (q0, qd0, extra), ks)
    head_q, head_v = jnp.stack(qs0), jnp.stack(vs0)
    head_tau = jnp.stack([tau_at(i, t0 + i * dt, a, b) for i, (a, b) in enumerate(zip(qs0, vs0))])
    t = t0 + dt * jnp.arange(steps + 1, dtype=dtype)
    acc = extra.accepted if stepper == "rkf45" else jnp.int32(steps)
    rej = extra.rejected if stepper == "rkf45" else jnp.int32(0)
    Q, V = jnp.concatenate([head_q, qs]), jnp.concatenate([head_v, vs])
    ok = jnp.all(jnp.isfinite(Q)) & jnp.all(jnp.isfinite(V))
    return Trajectory(t, Q, V, jnp.concatenate([head_tau, taus]), acc, rej, ok)


def first_nonfinite(model, traj: Trajectory):
    """Host-side report of a failed rollout: None if every sample is finite, else
    (sample index, time, description of the first non-finite quantity, e.g. "qd[3] (joint
    'elbow') = nan").  Leading batch axes of ``traj`` are searched together."""
    import numpy as np
    Q, V, t = np.asarray(traj.q), np.asarray(traj.qd), np.asarray(traj.t)
    bad = ~(np.isfinite(Q).all(-1) & np.isfinite(V).all(-1))     # (..., steps + 1)
    bad = bad.reshape(-1, bad.shape[-1])
    if not bad.any():
        return None
    idx = int(np.argmax(bad.any(0)))
    row = int(np.argmax(bad[:, idx]))
    Qr, Vr = Q.reshape(-1, *Q.shape[-2:])[row, idx], V.reshape(-1, *V.shape[-2:])[row, idx]
    T2 = t.reshape(-1, t.shape[-1])                 # times are shared or per trajectory
    tr = T2[min(row, T2.shape[0] - 1), idx]
    qidx, vidx = np.asarray(model.qidx), np.asarray(model.vidx)
    for nm, x, table in (("q", Qr, qidx), ("qd", Vr, vidx)):
        j = np.flatnonzero(~np.isfinite(x))
        if j.size:
            j = int(j[0])
            body = np.argwhere(table == j)
            joint = f" (joint {model.joint_names[int(body[0, 0])]!r})" if body.size else ""
            return idx, float(tr), f"{nm}[{j}]{joint} = {x[j]}"
    return idx, float(tr), "state"
