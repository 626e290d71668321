"""One interface for every stepper: ``init`` and ``step`` with a carried state (the pattern of
diffrax's solvers), looked up in :data:`STEPPERS` by name.

* ``init(model, dyn_for, t0, q0, qd0, dt, dtype) -> (state, head)``: the stepper's carried
  state and the samples it produces itself before the scan (ABM's three RK4 starting steps:
  a list of (q (nq,), qd (nv,)); empty for one-step methods).
* ``step(model, dyn, t, q, qd, dt, state, opts) -> (q, qd, state)``: one sample of length dt
  from (t, q, qd) under the dynamics ``dyn(t, q, qd) -> qdd``.
* ``stats(state, steps) -> (accepted, rejected)``: internal step counts.

``dyn_for(k, t_k, q_k, qd_k)`` is the dynamics of sample k, which starts at (t_k, q_k, qd_k)
(its held torque is evaluated there); ``opts`` is
:class:`StepOptions`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp

from .abm import abm4, abm_init, history_at
from .euler import semi_implicit_euler
from .rk4 import rk4
from .rkf45 import rkf45_interval, rkf45_stats


class StepOptions(NamedTuple):
    """Options a step may read: RKF45's tolerances, and ``held`` (controls are held per sample,
    so ABM re-evaluates its acceleration history under the current sample's torque)."""
    rtol: float = 1e-8
    atol: float = 1e-10
    held: bool = False


class Stepper(NamedTuple):
    """A stepper's ``init``, ``step`` and ``stats`` (see the module docstring)."""
    init: Callable
    step: Callable
    stats: Callable


def _no_state(model, dyn_for, t0, q0, qd0, dt, dtype):
    return jnp.zeros((), dtype), []


def _fixed_stats(state, steps):
    return jnp.int32(steps), jnp.int32(0)


def _one_step(scheme):
    def step(model, dyn, t, q, qd, dt, state, opts):
        q1, v1 = scheme(model, dyn, t, q, qd, dt)
        return q1, v1, state
    return step


def _rkf45_init(model, dyn_for, t0, q0, qd0, dt, dtype):
    return rkf45_stats(dt, dtype), []


def _rkf45_step(model, dyn, t, q, qd, dt, state, opts):
    return rkf45_interval(model, dyn, t, q, qd, dt, state, rtol=opts.rtol, atol=opts.atol)


def _abm_init(model, dyn_for, t0, q0, qd0, dt, dtype):
    states, hist, (qs_h, vs_h) = abm_init(model, dyn_for, t0, q0, qd0, dt)
    return (hist, qs_h, vs_h), states


def _abm_step(model, dyn, t, q, qd, dt, state, opts):
    hist, qs_h, vs_h = state
    if opts.held:
        hist = history_at(dyn, t, dt, qs_h, vs_h)
    q1, v1, hist = abm4(model, dyn, t, q, qd, dt, hist)
    return q1, v1, (hist, jnp.concatenate([qs_h[1:], q1[None]]), jnp.concatenate([vs_h[1:], v1[None]]))


STEPPERS = {
    "euler": Stepper(_no_state, _one_step(semi_implicit_euler), _fixed_stats),
    "rk4": Stepper(_no_state, _one_step(rk4), _fixed_stats),
    "rkf45": Stepper(_rkf45_init, _rkf45_step, lambda state, steps: (state.accepted, state.rejected)),
    "abm": Stepper(_abm_init, _abm_step, _fixed_stats),
}
"""Stepper table: "euler" (semi-implicit), "rk4", "rkf45" (adaptive inside each sample),
"abm" (Adams-Bashforth-Moulton 4 in Adams-Nystrom form, RK4 start)."""
