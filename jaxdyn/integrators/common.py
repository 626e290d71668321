"""Stepper interface shared by all schemes.

A *dynamics* is ``dyn(t, q, qd) -> qdd``.  A stepper advances the state ``(q, qd)`` by ``dt``;
configuration updates go through :func:`jaxdyn.integrate` so quaternions stay unit.
Multi-stage schemes evaluate stages at ``integrate(q, dt * sum_j a_ij k_j)``: the tangent
increments are taken at the step's base point (exact for vector-space joints, the usual
'frozen base point' Lie-group Runge-Kutta variant otherwise).
"""
from __future__ import annotations

from ..model.configuration import integrate as _integrate


def stage_state(model, q, qd, kq, kv, h):
    """(integrate(q, h kq), qd + h kv)."""
    return _integrate(model, q, kq, h), qd + h * kv
