"""Recursive Newton-Euler inverse dynamics (Featherstone 2008, Table 5.1; Featherstone 2010,
Fig. 5), written once for one state and a batch-last chunk (as :mod:`jaxdyn.dynamics.aba`)."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..model.model import Model, check_state
from ..model.parameters import body_inertias
from ..spatial.linalg import mv, tr
from ..tree import backward_sweep, forward_sweep, per_run, same
from .common import external_forces, gravity_acceleration


def forward_step(parent, x, keep=same):
    """Pass 1: v = Xup v_p + S qd;  a = Xup a_p + S qdd + v x S qd;  f = I a + v x* I v - f_ext.
    parent = (v_p, a_p); x = (E, r, S, qd, qdd, I (:class:`jaxdyn.spatial.Inertia`), f_ext).
    Returns ((v, a), f)."""
    v_p, a_p = parent
    E, r, S, qd, qdd, I, fx = x
    I6 = sp.inertia.to_matrix(I)
    X = sp.Transform(E, r)
    vJ = keep(mv(S, qd))
    v = keep(sp.apply_motion(X, v_p) + vJ)
    a = keep(sp.apply_motion(X, a_p) + mv(S, qdd) + sp.cross_motion(v, vJ))
    return (v, a), mv(I6, a) + sp.cross_force(v, keep(mv(I6, v))) - fx


def backward_step(f, x, keep=same):
    """Pass 2: tau = S^T f;  the parent receives Xup^T f.  x = (E, r, S).  Returns (Xup^T f, tau)."""
    E, r, S = x
    return sp.apply_force_T(sp.Transform(E, r), f), mv(tr(S), f)


def rnea_passes(model: Model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local", keep=same,
                inertias=None):
    """tau (nv, ...) (with armature * qdd) and the joint forces f (nb + 1, 6, ...) (body frames,
    angular-first; slot nb: what the roots exert on the world) of one state or a batch-last
    chunk.  ``inertias``: spatial inertias (a :class:`jaxdyn.spatial.Inertia` of leading axis
    nb) replacing the model's; RNEA is linear in them (the inertial-parameter regressor
    differentiates this)."""
    Xup, S = joint_transforms(model, q, keep)
    bs = jnp.broadcast_shapes(q.shape[1:], qd.shape[1:], *(r.shape[2:] for r in Xup.r))
    dt = q.dtype
    fx = jnp.zeros((model.nb, 6) + bs, dt)
    if f_ext is not None:
        X0 = world_transforms(model, Xup) if f_ext_frame == "world" else None
        fx = fx + external_forces(model, f_ext, f_ext_frame, X0)
    I = body_inertias(model) if inertias is None else inertias
    a0 = gravity_acceleration(model, gravity)
    init = (jnp.zeros((6,) + bs, dt), jnp.broadcast_to(a0, (6,) + jnp.broadcast_shapes(bs, a0.shape[1:])))
    _, f = forward_sweep(forward_step, model, init,
                         (Xup.E, Xup.r, S, per_run(model, qd), per_run(model, qdd), I, fx), keep)
    fj, tau = backward_sweep(backward_step, model, f.bodies() if model.nb else fx,
                             (Xup.E, Xup.r, S), keep)
    tau = tau.dofs() if model.nv else jnp.zeros_like(qdd)
    return tau + model.armature.reshape(model.armature.shape + (1,) * (qdd.ndim - model.armature.ndim)) * qdd, fj


@partial(jax.jit, static_argnames=("f_ext_frame",))
def joint_wrenches(model: Model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local"):
    """Spatial force that each joint's parent exerts on its child body (RNEA's f_i,
    Pinocchio's ``data.f`` after ``rnea``): (nb, 6) in the child frame, rows [force; moment].
    S_i^T f_i is the joint torque (without armature)."""
    check_state(model, q=q, qd=qd, qdd=qdd)
    _, fj = rnea_passes(model, q, qd, qdd, f_ext, gravity, f_ext_frame)
    return jnp.concatenate([fj[:-1, 3:], fj[:-1, :3]], 1)
