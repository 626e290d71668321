"""Adams-Bashforth-Moulton 4th-order predictor-corrector (PECE), RK4 start-up.

State history holds the last four derivatives f = (qd, qdd) at t_{n-3..n}.  Predictor
(AB4): y* = y_n + dt/24 (55 f_n - 59 f_{n-1} + 37 f_{n-2} - 9 f_{n-3}); corrector (AM4):
y_{n+1} = y_n + dt/24 (9 f* + 19 f_n - 5 f_{n-1} + f_{n-2}).  Configuration increments go
through ``integrate``.  The first three steps are RK4 (``abm_init``).
"""
from __future__ import annotations

import jax.numpy as jnp

from ..model.configuration import integrate
from .rk4 import rk4


def abm_init(model, dyn, t, q, qd, dt):
    """Three RK4 steps; returns the states [(q, qd)] at t + dt, t + 2 dt, t + 3 dt and the
    derivative history (4, 2, nv) at t .. t + 3 dt."""
    hist = [jnp.stack([qd, dyn(t, q, qd)])]
    states = []
    for i in range(3):
        q, qd = rk4(model, dyn, t + i * dt, q, qd, dt)
        states.append((q, qd))
        hist.append(jnp.stack([qd, dyn(t + (i + 1) * dt, q, qd)]))
    return states, jnp.stack(hist)


def abm4(model, dyn, t, q, qd, dt, hist):
    """One PECE step; hist (4, 2, nv) oldest first.  Returns (q, qd, hist)."""
    f3, f2, f1, f0 = hist[0], hist[1], hist[2], hist[3]
    p = (55 * f0 - 59 * f1 + 37 * f2 - 9 * f3) / 24
    qp, vp = integrate(model, q, p[0], dt), qd + dt * p[1]
    fp = jnp.stack([vp, dyn(t + dt, qp, vp)])
    c = (9 * fp + 19 * f0 - 5 * f1 + f2) / 24
    qn, vn = integrate(model, q, c[0], dt), qd + dt * c[1]
    fn = jnp.stack([vn, dyn(t + dt, qn, vn)])
    return qn, vn, jnp.concatenate([hist[1:], fn[None]], 0)
