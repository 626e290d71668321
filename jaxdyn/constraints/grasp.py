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
from typing import NamedTuple, Tuple

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


class _Terms(NamedTuple):
    theta_f: jax.Array    # (ell, N) free arm accelerations
    Jt: jax.Array         # (ell, 6, N) tip Jacobians (world-aligned)
    jdqd: jax.Array       # (ell, 6) tip J-dot q-dot
    Lam_inv: jax.Array    # (ell, 6, 6) J M^-1 J^T per arm (6.10)
    alpha_f: jax.Array    # (ell, 6) free tip accelerations
    obj_f: jax.Array      # (6,) free object acceleration
    G: jax.Array          # (ell, 6, 6) grasp-point Jacobians of the object
    obj_bias: jax.Array   # (ell, 6) grasp-point J-dot q-dot of the object
    Mo_inv: jax.Array     # (6, 6)
    target: jax.Array     # (ell, 6) K qdd + k = target (Baumgarte; 0 without)


def _terms(gs, q, qd, tau, stabilization):
    """The per-arm (vmapped) and object quantities shared by RCCFD and Lilly-Orin."""
    qo, qa = _split(gs, q, gs.obj.nq, gs.arms.nq)
    vo, va = _split(gs, qd, gs.obj.nv, gs.arms.nv)
    to, ta = _split(gs, tau, gs.obj.nv, gs.arms.nv)
    lwa = "local_world_aligned"

    def per_arm(arm, q, v, t):
        theta_f = forward_dynamics(arm, q, v, t)                              # (4.9a), (6.11b)
        Jt = frame_jacobian(arm, q, gs.tip, lwa)
        jdqd = frame_classical_acceleration(arm, q, v, jnp.zeros_like(v), gs.tip, lwa)
        lam_inv = opspace_inverse_inertia(arm, q, [gs.tip], lwa)              # (6.10), (6.11d)
        return theta_f, Jt, jdqd, lam_inv, Jt @ v

    theta_f, Jt, jdqd, Lam_inv, tip_vel = jax.vmap(per_arm)(gs.arms, qa, va, ta)
    alpha_f = jnp.einsum("lij,lj->li", Jt, theta_f) + jdqd                   # (4.9b), (6.11c)
    obj_f = forward_dynamics(gs.obj, qo, vo, to)
    frames = jnp.asarray(gs.grasp_frames)
    G = jax.vmap(lambda f: frame_jacobian(gs.obj, qo, f, lwa))(frames)
    obj_bias = jax.vmap(lambda f: frame_classical_acceleration(gs.obj, qo, vo, jnp.zeros_like(vo), f, lwa))(frames)
    target = jnp.zeros((gs.n_arms, 6), q.dtype)
    if stabilization is not None:
        a_, b_ = stabilization
        vel = tip_vel - jnp.einsum("lij,j->li", G, vo)
        target = -2.0 * a_ * vel - b_ ** 2 * grasp_residual(gs, q).reshape(gs.n_arms, 6)
    return _Terms(theta_f, Jt, jdqd, Lam_inv, alpha_f, obj_f, G, obj_bias, minv(gs.obj, qo), target)


def _finish(gs, q, T, lam_l, qdd_o):
    """Joint accelerations of the arms from their tip forces (4.9e, 6.11g, Lilly-Orin 48) and the
    constraint residual K qdd + k - target."""
    qa = _split(gs, q, gs.obj.nq, gs.arms.nq)[1]
    g0 = jnp.zeros(3, q.dtype)
    dtheta = jax.vmap(lambda arm, q, Jt, f: aba(arm, q, jnp.zeros(arm.nv, q.dtype), Jt.T @ f, gravity=g0))(
        gs.arms, qa, T.Jt, lam_l)
    qdd_a = T.theta_f + dtheta
    Kqdd_k = jnp.einsum("lij,lj->li", T.Jt, qdd_a) + T.jdqd - jnp.einsum("lij,j->li", T.G, qdd_o) - T.obj_bias
    return jnp.concatenate([qdd_o, qdd_a.reshape(-1)]), (Kqdd_k - T.target).reshape(-1)


def rccfd(gs: GraspSystem, q, qd, tau, stabilization=None):
    """RCCFD 1 (6.11): Omega f = rhs for the tip forces (6 ell system), then the corrections.
    Returns (qdd (nv,), lam (6 ell,), residual (6 ell,), Omega (6 ell, 6 ell))."""
    T = _terms(gs, q, qd, tau, stabilization)
    Gs = T.G.reshape(-1, gs.obj.nv)
    Omega = jax.scipy.linalg.block_diag(*[T.Lam_inv[i] for i in range(gs.n_arms)]) + Gs @ T.Mo_inv @ Gs.T   # (6.11e)
    alpha_obj = jnp.einsum("lij,j->li", T.G, T.obj_f) + T.obj_bias
    rhs = (T.target - (T.alpha_f - alpha_obj)).reshape(-1)
    eps = 1e-10 * jnp.maximum(jnp.mean(jnp.diagonal(Omega)), jnp.finfo(Omega.dtype).tiny)
    lam = prox_solve(Omega, rhs, eps)                                         # (6.11f)
    qdd_o = T.obj_f - T.Mo_inv @ (Gs.T @ lam)
    qdd, residual = _finish(gs, q, T, lam.reshape(gs.n_arms, 6), qdd_o)       # (6.11g-j)
    return qdd, lam, residual, Omega


def lilly_orin(gs: GraspSystem, q, qd, tau, stabilization=None):
    """Lilly and Orin's simple closed-chain algorithm, Type 0 (chains holding a reference
    member): with Lambda_k = (J_k M_k^-1 J_k^T)^-1 per chain (nonsingular: 6 joint dofs away
    from kinematic singularities), one 6 x 6 solve for the reference member's acceleration,

        (M_o + sum_k G_k^T Lambda_k G_k) a_o = tau_o - h_o - sum_k G_k^T Lambda_k (b_k + t_k - alpha_f,k)

    (45)-(46), tip forces lam_k = Lambda_k (G_k a_o + b_k + t_k - alpha_f,k) (47) and joint
    accelerations (48).  Returns (qdd, lam, residual, the 6 x 6 effective inertia)."""
    from ..dynamics.common import pd_inverse
    from ..dynamics.crba import crba
    T = _terms(gs, q, qd, tau, stabilization)
    qo, to = q[:gs.obj.nq], tau[:gs.obj.nv]
    Lam = pd_inverse(T.Lam_inv)                                               # (ell, 6, 6)
    Mo = crba(gs.obj, qo)
    h_o = Mo @ (-T.obj_f) + to                                                # h_o - tau_o = -Mo a_free
    c = T.obj_bias + T.target - T.alpha_f                                     # (ell, 6)
    M_eff = Mo + jnp.einsum("lji,ljk,lkm->im", T.G, Lam, T.G)                 # (45)
    rhs = to - h_o - jnp.einsum("lji,ljk,lk->i", T.G, Lam, c)
    qdd_o = jnp.linalg.solve(M_eff, rhs)                                      # (46)
    lam_l = jnp.einsum("ljk,lk->lj", Lam, jnp.einsum("lij,j->li", T.G, qdd_o) + c)   # (47)
    qdd, residual = _finish(gs, q, T, lam_l, qdd_o)                           # (48)
    return qdd, lam_l.reshape(-1), residual, M_eff
