"""ell arms rigidly grasping a common object: Rodriguez and Kreutz's (1988, Part II) recursive
closed-chain forward dynamics RCCFD 1 (6.11), the general CCFD algorithm (4.9) with every
per-arm quantity from an O(N) recursion and the arms vmapped (one structure), so the cost is
O(ell N) + O(ell^3).

A :class:`GraspSystem` is an object (a Model whose root is a free flyer, with one frame per
grasp) and ell arms of one structure (one stacked Model, leading axis ell, each with its base
placement in its root Xtree and a tip frame).  Its state is laid out as the equivalent
:class:`~jaxdyn.ClosedModel` with the object first: q = [q_object (7); q_arm_1; ...; q_arm_ell],
v likewise, and grasp i is the weld "tip of arm i" = "grasp frame i of the object".

Per arm (vmapped): free accelerations theta_f = ABA(tau) (4.9a / 6.11b), the tip's free
acceleration alpha_f(0) = J theta_f + J-dot theta-dot (4.9b), and J M^-1 J^T by the
operational-space recursion (6.10) (6.11d).  Object: M(C) and its bias give
A M(C)^-1 A^T and its free acceleration.  Then

    Omega = blockdiag_i(J_i M_i^-1 J_i^T) + A M(C)^-1 A^T          (4.9c / 6.11e)
    Omega f(0) = -(alpha_f(0) - alpha_f,object(0))  (+ Baumgarte)  (4.9d / 6.11f)
    theta = theta_f + M^-1 J^T f(0) per arm by ABA (4.9e, 6.11g),  object likewise.

Rows and forces are world-aligned [linear; angular] at each tip (the weld convention of
:func:`jaxdyn.constrained_forward_dynamics`), so ``lam`` equals that function's on the
equivalent ClosedModel; f(0) of the paper is the force on the arms' tips, -lam.
"""
from __future__ import annotations

import dataclasses
from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.aba import aba
from ..dynamics.forward import forward_dynamics
from ..dynamics.minv import minv
from ..dynamics.opspace import opspace_inverse_inertia
from ..errors import ModelError
from ..kinematics import frame_classical_acceleration, frame_jacobian, frame_pose
from ..model import joints as J
from ..spatial.rotations import log3
from .solve import prox_solve


@dataclasses.dataclass(frozen=True)
class GraspSystem:
    """ell arms of one structure holding an object (see the module docstring)."""
    obj: object                 # Model: free-flyer root (+ rigidly attached bodies), grasp frames
    arms: object                # stacked Model, leading axis ell
    tip: int                    # tip frame index in the arm model
    grasp_frames: Tuple[int, ...]   # frame index of each grasp in the object model
    n_arms: int

    @property
    def nq(self):
        return self.obj.nq + self.n_arms * self.arms.nq

    @property
    def nv(self):
        return self.obj.nv + self.n_arms * self.arms.nv

    @property
    def m(self):
        return 6 * self.n_arms


jax.tree_util.register_dataclass(GraspSystem, data_fields=["obj", "arms"],
                                 meta_fields=["tip", "grasp_frames", "n_arms"])


def grasp_system(obj, arms, tip, grasps) -> GraspSystem:
    """Build a :class:`GraspSystem` from an object Model (root joint free flyer), a list of arm
    Models of one structure (base placement in the root Xtree), the arms' tip frame name and
    the object's grasp frame names (one per arm).  Raises ModelError naming what does not fit."""
    from ..model.stack import stack
    arms = list(arms)
    if not arms:
        raise ModelError("grasp_system needs at least one arm")
    if int(obj.jtype[0]) != J.FREE or obj.nb < 1:
        raise ModelError(f"grasp_system: the object {obj.name!r} must have a free-flyer root joint")
    a0 = arms[0]
    for i, a in enumerate(arms):
        if (a.nb, a.nq, a.nv, a.types) != (a0.nb, a0.nq, a0.nv, a0.types) or \
                not np.array_equal(np.asarray(a.parent), np.asarray(a0.parent)) or \
                not np.array_equal(np.asarray(a.jtype), np.asarray(a0.jtype)):
            raise ModelError(f"grasp_system: arm {i} ({a.name!r}) does not have the structure of arm 0 "
                             f"({a0.name!r}); rccfd vmaps arms of one structure (use method='schur' on a "
                             "ClosedModel for arms of different structure)")
        if tip not in a.frame_names:
            raise ModelError(f"grasp_system: arm {i} ({a.name!r}) has no frame {tip!r}")
    if len(grasps) != len(arms):
        raise ModelError(f"grasp_system: {len(arms)} arms but {len(grasps)} grasp frames")
    for g in grasps:
        if g not in obj.frame_names:
            raise ModelError(f"grasp_system: object {obj.name!r} has no frame {g!r}")
    return GraspSystem(obj, stack(arms), a0.frame_names.index(tip), tuple(obj.frame_names.index(g) for g in grasps),
                       len(arms))


def _split(gs, x, nobj, nper):
    return x[:nobj], x[nobj:].reshape(gs.n_arms, nper)


def grasp_residual(gs: GraspSystem, q):
    """Weld residuals (6 ell,): [p_tip - p_grasp; log3(R_tip R_grasp^T)] per arm (world axes)."""
    qo, qa = _split(gs, q, gs.obj.nq, gs.arms.nq)
    Rt, pt = jax.vmap(lambda arm, q: frame_pose(arm, q, gs.tip))(gs.arms, qa)
    Rg, pg = jax.vmap(lambda f: frame_pose(gs.obj, qo, f))(jnp.asarray(gs.grasp_frames))
    return jnp.concatenate([pt - pg, jax.vmap(lambda a, b: log3(a @ b.T))(Rt, Rg)], 1).reshape(-1)


def rccfd(gs: GraspSystem, q, qd, tau, stabilization=None):
    """RCCFD 1: returns (qdd (nv,), lam (6 ell,), residual (6 ell,), Omega (6 ell, 6 ell))."""
    nobj_q, nobj_v = gs.obj.nq, gs.obj.nv
    qo, qa = _split(gs, q, nobj_q, gs.arms.nq)
    vo, va = _split(gs, qd, nobj_v, gs.arms.nv)
    to, ta = _split(gs, tau, nobj_v, gs.arms.nv)
    lwa = "local_world_aligned"

    def per_arm(arm, q, v, t):
        theta_f = forward_dynamics(arm, q, v, t)                              # (6.11b)
        Jt = frame_jacobian(arm, q, gs.tip, lwa)
        jdqd = frame_classical_acceleration(arm, q, v, jnp.zeros_like(v), gs.tip, lwa)
        lam_inv = opspace_inverse_inertia(arm, q, [gs.tip], lwa)              # (6.10), (6.11d)
        return theta_f, Jt, jdqd, lam_inv, Jt @ v

    theta_f, Jt, jdqd, Lam_inv, tip_vel = jax.vmap(per_arm)(gs.arms, qa, va, ta)
    alpha_f = jnp.einsum("lij,lj->li", Jt, theta_f) + jdqd                   # (6.11c)

    # the object: free acceleration, grasp-point maps A^T (here G_i), M(C)^-1
    obj_f = forward_dynamics(gs.obj, qo, vo, to)
    frames = jnp.asarray(gs.grasp_frames)
    G = jax.vmap(lambda f: frame_jacobian(gs.obj, qo, f, lwa))(frames)        # (ell, 6, 6)
    obj_bias = jax.vmap(lambda f: frame_classical_acceleration(gs.obj, qo, vo, jnp.zeros_like(vo), f, lwa))(frames)
    Mo_inv = minv(gs.obj, qo)
    alpha_obj = jnp.einsum("lij,j->li", G, obj_f) + obj_bias
    Gs = G.reshape(-1, nobj_v)
    ell = gs.n_arms
    Omega = jax.scipy.linalg.block_diag(*[Lam_inv[i] for i in range(ell)]) + Gs @ Mo_inv @ Gs.T   # (6.11e)
    target = jnp.zeros(6 * gs.n_arms, q.dtype)                                # K qdd + k = target
    if stabilization is not None:
        a_, b_ = stabilization
        vel = (tip_vel - jnp.einsum("lij,j->li", G, vo)).reshape(-1)
        target = -2.0 * a_ * vel - b_ ** 2 * grasp_residual(gs, q)
    rhs = target - (alpha_f - alpha_obj).reshape(-1)
    eps = 1e-10 * jnp.maximum(jnp.mean(jnp.diagonal(Omega)), jnp.finfo(Omega.dtype).tiny)
    lam = prox_solve(Omega, rhs, eps)                                        # (6.11f)
    lam_l = lam.reshape(ell, 6)
    g0 = jnp.zeros(3, q.dtype)
    dtheta = jax.vmap(lambda arm, q, Jt, f: aba(arm, q, jnp.zeros(arm.nv, q.dtype), Jt.T @ f, gravity=g0))(
        gs.arms, qa, Jt, lam_l)                                               # (6.11g)
    qdd_o = obj_f - Mo_inv @ (Gs.T @ lam)
    qdd_a = theta_f + dtheta                                                  # (6.11i)
    Kqdd_k = (jnp.einsum("lij,lj->li", Jt, qdd_a) + jdqd - jnp.einsum("lij,j->li", G, qdd_o) - obj_bias).reshape(-1)
    residual = Kqdd_k - target
    return jnp.concatenate([qdd_o, qdd_a.reshape(-1)]), lam, residual, Omega
