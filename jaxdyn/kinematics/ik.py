"""Inverse kinematics of a named frame (Featherstone 2010 Fig. 6)."""
from __future__ import annotations

from functools import partial

import jax.numpy as jnp
from jax import lax

from ..model.model import Model
import jax
from .frames import frame_index, frame_jacobian, frame_pose


@partial(jax.jit, static_argnames=('name', 'max_iters', 'tol', 'damping', 'max_step', 'position_only'))
def inverse_kinematics(model: Model, name, R_target, p_target, q0, *, max_iters=100, tol=1e-10,
                       damping=1e-6, max_step=0.5, position_only=False):
    """Iterative IK (Featherstone 2010 Fig. 6) with a damped pseudo-inverse.

    Drives frame ``name`` to the world pose (R_target, p_target).  Each iteration computes the
    pose error e = [p_err; log3(R_target R^T)] (world axes), solves
    ``dq = J^T (J J^T + damping 1)^-1 e`` with the local_world_aligned Jacobian, clips |dq| to
    ``max_step`` and integrates q on the manifold.

    Returns (q, converged, iterations, error_norm).
    """
    from ..model.configuration import integrate
    from ..spatial.rotations import log3

    fid = frame_index(model, name)
    rows = 3 if position_only else 6

    def err(q):
        R, p = frame_pose(model, q, fid)
        e = jnp.concatenate([p_target - p, log3(R_target @ R.T)])
        return e[:rows]

    def cond(s):
        q, i, en = s
        return (i < max_iters) & (en > tol)

    def body(s):
        q, i, _ = s
        e = err(q)
        J = frame_jacobian(model, q, fid, "local_world_aligned")[:rows]
        dq = J.T @ jnp.linalg.solve(J @ J.T + damping * jnp.eye(rows, dtype=J.dtype), e)
        n = jnp.linalg.norm(dq)
        dq = dq * jnp.minimum(1.0, max_step / jnp.maximum(n, 1e-30))
        qn = integrate(model, q, dq, 1.0)
        return qn, i + 1, jnp.linalg.norm(err(qn))

    e0 = jnp.linalg.norm(err(q0))
    q, it, en = lax.while_loop(cond, body, (q0, jnp.int32(0), e0))
    return q, en <= tol, it, en
