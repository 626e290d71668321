"""Semi-implicit (symplectic) Euler: qd' = qd + dt qdd(q, qd);  q' = q (+) dt qd'."""
from __future__ import annotations

from ..model.configuration import integrate


def semi_implicit_euler(model, dyn, t, q, qd, dt):
    """One semi-implicit Euler step of ``dyn(t, q, qd) -> qdd`` from (q (nq,), qd (nv,)) over
    dt: the new velocity first, then ``q' = integrate(q, qd', dt)``.  Returns (q', qd')."""
    qdd = dyn(t, q, qd)
    qd1 = qd + dt * qdd
    return integrate(model, q, qd1, dt), qd1
