"""Recursive Newton-Euler inverse dynamics (Featherstone 2010 Fig. 5; Featherstone RBDA Table 5.1)."""
from __future__ import annotations

from functools import lru_cache, partial

import jax

import jax.numpy as jnp

from .._typing import BodyWrenches, Configuration, Gravity, Tangent
from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from . import derivative_sweeps as ds
from .batch_rnea import rnea_batch
from .common import (batched_like, body_inertias, external_forces, gravity_acceleration, per_body,
                     scatter_dofs, vmap_axes)
from ..compiled import cpu_jit, exact_rule, for_cpu_options, tracing_for


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


@cpu_jit(static_argnames=('f_ext_frame',))
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

    One state is computed in closed form (:func:`rnea_closed_form`): the same Newton-Euler
    equations with the sums along the tree as products with the model's ancestry matrix,
    faster for one state on CPU.  ``jax.vmap(rnea)`` over states of one model runs the two
    recursive sweeps in the batch-last layout instead (:func:`jaxdyn.dynamics.batch_rnea.rnea_batch`,
    a ``custom_vmap`` rule; with f_ext or a batched model, the vmapped sweeps of
    :func:`rnea_core`; vmapped, the closed form was several times slower), and derivatives
    (``jax.jvp``, ``jax.grad``, ...) differentiate the sweeps (a ``custom_jvp`` rule), as
    before the closed form existed.
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    return _rnea(model, q, qd, qdd, f_ext, gravity, f_ext_frame)


def rnea_recursive(model, q, qd, qdd, f_ext, gravity, f_ext_frame):
    """:func:`rnea` (same arguments, all positional) by the two recursive sweeps of
    :func:`rnea_core`: what ``jax.vmap(rnea)`` and rnea's derivatives run, and the reference
    the closed form is tested against."""
    tau_b, _ = rnea_core(model, q, qd, qdd, f_ext, gravity, f_ext_frame)
    return scatter_dofs(model, tau_b) + model.armature * qdd


@partial(jax.custom_jvp, nondiff_argnums=(6,))
def _rnea(model, q, qd, qdd, f_ext, gravity, f_ext_frame):
    return _one_state(f_ext_frame, for_cpu_options())(model, q, qd, qdd, f_ext, gravity)


@_rnea.defjvp
@exact_rule
def _rnea_jvp(f_ext_frame, primals, tangents):
    """Autodiff of the recursive sweeps (:func:`rnea_core`)."""
    return jax.jvp(lambda *a: rnea_recursive(*a, f_ext_frame), primals, tangents)


@lru_cache(maxsize=None)
def _one_state(f_ext_frame, cpu_options):
    """:func:`rnea_closed_form` whose ``vmap`` runs :func:`jaxdyn.dynamics.batch_rnea.rnea_batch`
    (states of one model, no f_ext) or the vmapped recursive sweeps.  ``cpu_options``: as
    for :func:`jaxdyn.dynamics.aba._batchable`."""

    @jax.custom_batching.custom_vmap
    def one(model, q, qd, qdd, f_ext, gravity):
        return rnea_closed_form(model, q, qd, qdd, f_ext, gravity, f_ext_frame)

    @one.def_vmap
    @exact_rule
    def rule(axis_size, in_batched, model, q, qd, qdd, f_ext, gravity):
        leaves = jax.tree_util.tree_leaves
        if f_ext is None and not any(leaves(in_batched[0])) and not any(leaves(in_batched[5])):
            q, qd, qdd = (batched_like(x, b, axis_size) for x, b in zip((q, qd, qdd), in_batched[1:4]))
            with tracing_for(cpu_options):
                return rnea_batch(model, q, qd, qdd, gravity), True
        fn = lambda *a: rnea_recursive(*a, f_ext_frame)
        return jax.vmap(fn, in_axes=tuple(vmap_axes(in_batched)))(model, q, qd, qdd, f_ext, gravity), True

    return one


def rnea_closed_form(model: Model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local"):
    """:func:`rnea` of one state (arguments and result as there) with every body's velocity,
    acceleration and force in its tree's root frame: v_i = sum_k A_ik J_k qd_k,
    a_i = g_i + sum_k A_ik (J_k qdd_k + v_k x J_k qd_k), f_i = I_i a_i + v_i x* I_i v_i - f_ext,i
    and tau_k = J_k^T sum_(j in subtree) f_j, where A_ik = 1 when dof k moves body i and J_k
    is dof k's motion subspace column (:mod:`jaxdyn.dynamics.derivative_sweeps`; the root
    transforms by pointer jumping, :func:`jaxdyn.kinematics.world_transforms`).  Fewer,
    larger operations than the recursive sweeps of :func:`rnea_core` (nb dependent steps
    each), hence a shorter single call (``benchmarks/results/core.json``, B = 1)."""
    Xup, S = joint_transforms(model, q)
    topo = ds.topology(model)
    kin = ds.kinematics(model, topo, Xup.E, Xup.r, S, qd, gravity)
    fx = None
    if f_ext is not None:
        X0 = world_transforms(model, Xup) if f_ext_frame == "world" else None
        fx = external_forces(model, f_ext, f_ext_frame, X0).T                   # (6, nb) body frames
    _, _, tau = ds.joint_forces(model, topo, kin, qdd, fx=fx)
    return tau + model.armature * qdd


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


@cpu_jit(static_argnames=('f_ext_frame',))
def joint_wrenches(model: Model, q, qd, qdd, f_ext=None, gravity=None, f_ext_frame="local"):
    """Spatial force that each joint's parent exerts on its child body (RNEA's f_i,
    Pinocchio's ``data.f`` after ``rnea``): (nb, 6) in the child frame, rows [force; moment].
    S_i^T f_i is the joint torque (without armature)."""
    check_state(model, q=q, qd=qd, qdd=qdd)
    _, fj = rnea_core(model, q, qd, qdd, f_ext, gravity, f_ext_frame)
    return jnp.concatenate([fj[:-1, 3:], fj[:-1, :3]], 1)


@cpu_jit
def bias_forces(model: Model, q: Configuration, qd: Tangent, gravity: Gravity | None = None) -> Tangent:
    """h(q, qd) = C(q, qd) qd + g(q) (Pinocchio's nonLinearEffects).  (nv,)."""
    return rnea(model, q, qd, jnp.zeros_like(qd), gravity=gravity)


@cpu_jit
def gravity_torques(model: Model, q: Configuration, gravity: Gravity | None = None) -> Tangent:
    """g(q), the generalized gravity (Pinocchio's computeGeneralizedGravity).  (nv,)."""
    z = jnp.zeros(model.nv, jnp.result_type(q))
    return rnea(model, q, z, z, gravity=gravity)
