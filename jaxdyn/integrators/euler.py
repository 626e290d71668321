"""Semi-implicit (symplectic) Euler: qd' = qd + dt qdd(q, qd);  q' = q (+) dt qd'."""
from __future__ import annotations

from ..model.configuration import integrate


def semi_implicit_euler(model, dyn, t, q, qd, dt):
    qdd = dyn(t, q, qd)
    qd1 = qd + dt * qdd
    return integrate(model, q, qd1, dt), qd1
