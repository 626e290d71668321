"""Rollouts as ``lax.scan`` of a stepper from the table :data:`~.steppers.STEPPERS` (each an
``init`` / ``step`` pair), under controls from :mod:`.controllers` (controllers are pure
functions of (t, q, qd); torque arrays are held per sample)."""
from __future__ import annotations

import math
import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..batching import forward_dynamics
from ..errors import ArgumentError
from .controllers import HeldLaw, controls
from .steppers import STEPPERS, StepOptions


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
        or a :class:`HeldLaw` (a feedback law sampled at each sample's start and its torque
        held over the sample).
      dt: sample length; a Python / NumPy number or a traced JAX scalar (``jax.grad`` with
        respect to dt works with the fixed-step steppers).
      steps: number of samples, a concrete int (the scan length).
      stepper: "euler" (semi-implicit), "rk4", "rkf45" (adaptive inside each sample, rtol/atol;
        forward-mode derivatives only: ``jax.grad`` through its ``lax.while_loop`` stops with
        JAX's while_loop error, use ``jax.jacfwd``), "abm" (Adams-Bashforth-Moulton 4, RK4 start).
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
      enforced (``model.q_lower/q_upper`` are data for users).  The state is promoted to the
      model's float type where that is wider (an f32 state of an f64 model runs in f64).
      ``vmap`` over q0 / qd0 / controls / stacked models works as usual.

    Compilation: the rollout is one compiled program per model structure, ``steps``, options
    and controller function, which later calls with new states, torques, dt or t0 reuse.  A
    ``jax.tree_util.Partial(law, *gains)`` controller, or a :class:`HeldLaw` whose ``law`` is
    one, carries its parameters as data: later calls with new gains reuse the program (the
    function ``law`` is part of the program; it must not read Python state that changes).  A
    plain function may read such state, so a rollout under one is traced and compiled on
    every call (and nothing of it is kept).
    """
    if stepper not in STEPPERS:
        raise ArgumentError(f"unknown stepper {stepper!r}; choose from {tuple(STEPPERS)}")
    steps = _check_steps(steps)
    dt = _check_dt(dt)
    from ..constraints.dynamics import check_stabilization
    stabilization = check_stabilization(stabilization)
    options = (stepper, method, float(rtol), float(atol), chunk, stabilization)
    ctrl, run = controller_or_torques, _compiled_rollout
    Partial = jax.tree_util.Partial
    law = ctrl.law if isinstance(ctrl, HeldLaw) else ctrl
    if callable(law) and not isinstance(law, Partial):          # may read Python state: traced now
        run = jax.jit(lambda *a, **k: _rollout_program(*a, **k), static_argnames=("steps", "options"))
        law = Partial(law)
    ctrl = HeldLaw(ctrl.Z, law) if isinstance(ctrl, HeldLaw) else law
    return run(model, q0, qd0, ctrl, dt, t0, steps=steps, options=options)


def _rollout_program(model, q0, qd0, ctrl, dt, t0, steps, options):
    """:func:`rollout` once its arguments are checked."""
    return _rollout(model, q0, qd0, ctrl, dt, steps, *options, t0)


_compiled_rollout = jax.jit(_rollout_program, static_argnames=("steps", "options"))
"""One program per structure, steps, options and controller function (Partial or none)."""


def _rollout(model, q0, qd0, controller_or_torques, dt, steps, stepper, method, rtol, atol, chunk,
             stabilization, t0):
    """:func:`rollout` once its arguments are checked (``steps`` a Python int)."""
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
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    dtype = np.promote_types(np.promote_types(q0.dtype, qd0.dtype), model.mass.dtype)
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)       # the model's accelerations are carried
    tau_at, held = controls(model, controller_or_torques, steps, dtype)
    st, opts = STEPPERS[stepper], StepOptions(rtol, atol, held)

    def dyn_for(k, tk, qk, qdk):
        """The dynamics over sample k, which starts at (tk, qk, qdk): a held torque (array row
        or sampled law) is evaluated once there; a controller at every stage."""
        if held:
            tau = tau_at(k, tk, qk, qdk)
            return lambda t, q, qd: accel(q, qd, tau)
        return lambda t, q, qd: accel(q, qd, tau_at(k, t, q, qd))

    def sample(carry, k):
        q, qd, extra = carry
        t = t0 + k.astype(dtype) * dt
        q1, v1, extra = st.step(model, dyn_for(k, t, q, qd), t, q, qd, dt, extra, opts)
        return (q1, v1, extra), (q1, v1, tau_at(k + 1, t + dt, q1, v1))

    extra, head = st.init(model, dyn_for, t0, q0, qd0, dt, dtype)
    k0 = min(len(head), steps)
    qs0 = [q0] + [s_[0] for s_ in head[:k0]]
    vs0 = [qd0] + [s_[1] for s_ in head[:k0]]
    if head:
        q0, qd0 = head[-1]
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
    acc, rej = st.stats(extra, steps)
    Q, V = jnp.concatenate([head_q, qs]), jnp.concatenate([head_v, vs])
    ok = jnp.all(jnp.isfinite(Q)) & jnp.all(jnp.isfinite(V))
    return Trajectory(t, Q, V, jnp.concatenate([head_tau, taus]), acc, rej, ok)


def first_nonfinite(model, traj: Trajectory):
    """Host-side report of a failed rollout: None if every sample is finite, else
    (sample index, time, description of the first non-finite quantity, e.g. "qd[3] (joint
    'elbow') = nan").  Leading batch axes of ``traj`` are searched together.  ``model``: the
    Model, or a system holding it as ``.model`` (a ClosedModel, a LeggedSystem)."""
    from ..model.model import Model
    if not isinstance(model, Model):
        if not isinstance(getattr(model, "model", None), Model):
            raise ArgumentError(f"first_nonfinite needs a Model (or a system with .model), got {type(model).__name__}")
        model = model.model
    if not all(hasattr(traj, k) for k in ("q", "qd", "t")):
        raise ArgumentError(f"first_nonfinite needs a Trajectory (q, qd, t), got {type(traj).__name__}")
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
