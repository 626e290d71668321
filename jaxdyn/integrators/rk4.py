"""Classical fourth-order Runge-Kutta on (q, qd) with manifold configuration updates."""
from __future__ import annotations

from ..model.configuration import integrate
from .common import stage_state


def rk4(model, dyn, t, q, qd, dt):
    k1v, k1a = qd, dyn(t, q, qd)
    q2, v2 = stage_state(model, q, qd, k1v, k1a, dt / 2)
    k2v, k2a = v2, dyn(t + dt / 2, q2, v2)
    q3, v3 = stage_state(model, q, qd, k2v, k2a, dt / 2)
    k3v, k3a = v3, dyn(t + dt / 2, q3, v3)
    q4, v4 = stage_state(model, q, qd, k3v, k3a, dt)
    k4v, k4a = v4, dyn(t + dt, q4, v4)
    dq = (k1v + 2 * k2v + 2 * k3v + k4v) / 6
    dv = (k1a + 2 * k2a + 2 * k3a + k4a) / 6
    return integrate(model, q, dq, dt), qd + dt * dv
