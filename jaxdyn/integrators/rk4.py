"""Classical fourth-order Runge-Kutta on (q, qd) with manifold configuration updates.

The four stages are one ``lax.scan`` over (c_i, b_i) = (0, 1), (1/2, 2), (1/2, 2), (1, 1):
stage i evaluates the dynamics at ``integrate(q, c_i dt k_{i-1})`` (classical RK4 uses only
the previous stage), so the dynamics is traced and compiled once per step instead of four
times (a shorter compile: ``benchmarks/results/history.md``; results are
bit-identical in exact arithmetic, the first stage's ``integrate(q, 0)`` returns q).
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from ..model.configuration import integrate
from .common import stage_state

_C = (0.0, 0.5, 0.5, 1.0)     # stage times c_i (fractions of dt)
_B = (1.0, 2.0, 2.0, 1.0)     # weights b_i (times 6)


def rk4(model, dyn, t, q, qd, dt):
    """One RK4 step of ``dyn(t, q, qd) -> qdd`` from (q (nq,), qd (nv,)) over dt -> (q, qd)."""
    dtype = jnp.result_type(qd)

    def stage(carry, cb):
        kv, ka, sv, sa = carry
        c, b = cb
        qi, vi = stage_state(model, q, qd, kv, ka, c * dt)
        ai = dyn(t + c * dt, qi, vi)
        return (vi, ai, sv + b * vi, sa + b * ai), None

    z = jnp.zeros_like(qd)
    cb = (jnp.asarray(_C, dtype), jnp.asarray(_B, dtype))
    (_, _, sv, sa), _ = lax.scan(stage, (qd, z, z, z), cb)
    return integrate(model, q, sv / 6, dt), qd + dt * (sa / 6)
