"""Recursive Newton-Euler inverse dynamics (Featherstone 2010 Fig. 5; Featherstone RBDA Table 5.1)."""
from __future__ import annotations

from functools import partial

import jax

import jax.numpy as jnp

from .._typing import BodyWrenches, Configuration, Gravity, Tangent
from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from .common import body_inertias, external_forces, gravity_acceleration, per_body, scatter_dofs


def _rnea_pass1_step(parent, x):
    """v_i = Xup v_p + S qd;  a_i = Xup a_p + S qdd + v_i x S qd;  f_i = I a + v x* I v - f_ext."""
    v_p, a_p = parent
    X, S, qd, qdd, I, fx = x
    vJ = S @ qd
    v = sp.apply_motion(X, v_p) + vJ
    a = sp.apply_motion(X, a_p) + S @ qdd + sp.cross_motion(v, vJ)
    f = sp.inertia.apply(I, a) + sp.cross_force(v, sp.inertia.apply(I, v)) - fx
    return (v, a), f


def _rnea_pass2_step(f, x):
    """tau_i = S^T f_i;  f_parent += Xup^T f_i."""
    X, S = x
    return sp.apply_force_T(X, f), S.T @ f


@partial(jax.jit, static_argnames=('f_ext_frame',))
def rnea(model: Model, q: Configuration, qd: Tangent, qdd: Tangent, f_ext: BodyWrenches | None = None,
         gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext.

    Args:
      q (nq,), qd (nv,), qdd (nv,): state and accelerations.
      f_ext: optional (nb, 6) external spatial forces on the bodies, rows [force; moment]
        (Pinocchio order), in each body's frame (``f_ext_frame="local"``, Pinocchio's
        convention) or in world coordinates about the world origin (``"world"``).
      gravity: optional (3,) world gravity overriding ``model.gravity``.
    Returns:
      tau (nv,), including ``armature * qdd``.
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    tau_b, _ = rnea_core(model, q, qd, qdd, f_ext, gravity, f_ext_frame)
    return scatter_dofs(model, tau_b) + model.armature * qdd


def rnea_core(model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local", inertias=None):
    """Per-body joint torques (nb, k) and joint forces f (nb + 1, 6) (angular-first).

    ``inertias``: spatial inertias (:class:`jaxdyn.spatial.Inertia`, leading axis nb) replacing the
    model's; RNEA is linear in them (the inertial-parameter regressor differentiates this).
    """
    Xup, S = joint_transforms(model, q)
    dt = Xup.r.dtype
    fx = None
    if f_ext is not None:
        X0 = world_transforms(model, Xup) if f_ext_frame == "world" else None
        fx = external_forces(model, f_ext, f_ext_frame, X0)
    fx = jnp.zeros((model.nb, 6), dt) if fx is None else fx
    I = body_inertias(model) if inertias is None else inertias
    init = (jnp.zeros(6, dt), gravity_acceleration(model, gravity))
    _, f = forward_sweep(_rnea_pass1_step, model, init,
                         (Xup, S, per_body(model, qd), per_body(model, qdd), I, fx))
    fj, tau_b = backward_sweep(_rnea_pass2_step, model, f, (Xup, S))
    return tau_b, fj


@partial(jax.jit, static_argnames=('f_ext_frame',))
def joint_wrenches(model: Model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local"):
    """Spatial force that each joint's parent exerts on its child body (RNEA's f_i,
    Pinocchio's ``data.f`` after ``rnea``): (nb, 6) in the child frame, rows [force; moment].
    S_i^T f_i is the joint torque (without armature)."""
    check_state(model, q=q, qd=qd, qdd=qdd)
    _, fj = rnea_core(model, q, qd, qdd, f_ext, gravity, f_ext_frame)
    return jnp.concatenate([fj[:-1, 3:], fj[:-1, :3]], 1)


@jax.jit
def bias_forces(model: Model, q: Configuration, qd: Tangent, gravity: Gravity | None = None) -> Tangent:
    """h(q, qd) = C(q, qd) qd + g(q) (Pinocchio's nonLinearEffects).  (nv,)."""
    return rnea(model, q, qd, jnp.zeros_like(qd), gravity=gravity)


@jax.jit
def gravity_torques(model: Model, q: Configuration, gravity: Gravity | None = None) -> Tangent:
    """g(q), the generalized gravity (Pinocchio's computeGeneralizedGravity).  (nv,)."""
    z = jnp.zeros(model.nv, jnp.result_type(q))
    return rnea(model, q, z, z, gravity=gravity)
