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
operational-space recursion (6.10) (6.11d).  ABA's tau-independent pass (articulated
inertias, :func:`jaxdyn.dynamics.aba.aba_factor`) is computed once per arm and serves both
theta_f and M^-1 J^T f(0) (passes 2b and 3 on it).  Object: one mass matrix M(C) (CRBA) gives
M(C)^-1, A M(C)^-1 A^T and, with its RNEA bias, its free acceleration.  Then

    Omega = blockdiag_i(J_i M_i^-1 J_i^T) + A M(C)^-1 A^T          (4.9c / 6.11e)
    Omega f(0) = -(alpha_f(0) - alpha_f,object(0))  (+ Baumgarte)  (4.9d / 6.11f)
    theta = theta_f + M^-1 J^T f(0) per arm by ABA (4.9e, 6.11g),  object likewise.

Rows and forces are world-aligned [linear; angular] at each tip (the weld convention of
:func:`jaxdyn.constrained_forward_dynamics`), so ``lam`` equals that function's on the
equivalent ClosedModel; f(0) of the paper is the force on the arms' tips, -lam.

Non-rigid grasps (Rodriguez and Kreutz, Appendices A-B; Lilly and Orin's general joint).  Each
grasp has a contact ``kind`` (:data:`CONTACTS`): ``"weld"`` (rigid), ``"revolute"`` (1-DOF
rotation about the grasp frame's z axis: a hinge or a line contact), ``"soft_finger"`` (2-DOF:
rotations about the grasp frame's x and y axes, z the contact normal) or ``"point"``
(3-DOF: a ball or a point contact with friction; the name :class:`~jaxdyn.Constraint` and
:func:`~jaxdyn.legged_system` use for the same contact).  The contact point never slips.  In the
grasp frame (object side) the free modes are phi (6, n_g) (the paper's H^T) and the
constrained modes phi^c (6, 6 - n_g), both [linear; angular] and rotating with the object.
With Delta omega = omega_tip - omega_object the equations are

    phi^c^T (a_tip - a_grasp) = phi^c^T (b + t),   b = [0; omega_object x Delta omega]
    phi^T lam = h                                  (b.1c: no force along a free mode)

where a_tip - a_grasp is the relative (classical, world-aligned) acceleration, b is the term
of the rotating constraint axes (b.1f's H-dot^T W; zero for a weld, whose rows are in world
axes), t the Baumgarte target projected on phi^c, and h the known force along the free modes
(zero for a passive contact; the hip torque in Lilly and Orin's Type 1, :mod:`.legged`).
RCCFD solves it as (b.9d), lam = phi h + Pi (r - Omega phi h), with (b.7)'s projector
Pi = Omega^-1 - Omega^-1 H^T (H Omega^-1 H^T)^-1 H Omega^-1 taken in its equivalent
constrained-space form phi^c (phi^c^T Omega phi^c)^-1 phi^c^T (also defined when Omega is
singular but its constrained block is not); Lilly-Orin as Table 1 with
M_k = (phi^c^T Lambda_k^-1 phi^c)^-1 (both in :mod:`jaxdyn.constraints.grasp_solvers`).  Both
reach singular arms and dependent grasps by a proximal iteration and return the exact
accelerations there.
Contact kinds of different n_g are padded to 3 free / 6 constrained columns (zero columns,
unit diagonal in the small solves), so the arms stay vmapped.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple, no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from ..batching import crba, rnea
from ..dynamics.aba import ABAFactor, aba_factored, aba_solve
from ..dynamics.common import pd_inverse
from ..dynamics.operator import factors_of
from ..dynamics.opspace import opspace_inverse_inertia_of
from ..dynamics.slots import slot_factor_of
from ..errors import ModelError
from ..kinematics import frame_index, frame_pose, frame_terms
from ..model import joints as J
from ..model.model import Model, build_model, stack_parameters
from ..spatial.rotations import log3

CONTACTS = {"weld": (), "revolute": (5,), "soft_finger": (3, 4), "point": (3, 4, 5)}
"""Grasp contact kinds: the free modes as column indices of the 6 x 6 identity in the grasp
frame, [linear; angular] (3, 4, 5 = rotation about x, y, z)."""


def contact_spaces(kinds):
    """Padded free and constrained modes of grasp contacts (grasp-frame axes, [linear; angular]):
    phi (ell, 6, 3), phi^c (ell, 6, 6) (zero columns pad), and the pad masks (ell, 3), (ell, 6)
    (1 for a real column)."""
    eye = np.eye(6)
    phi, phic, mf, mc = [], [], [], []
    for k in kinds:
        free = list(CONTACTS[k])
        cons = [j for j in range(6) if j not in free]
        phi.append(np.concatenate([eye[:, free], np.zeros((6, 3 - len(free)))], 1))
        phic.append(np.concatenate([eye[:, cons], np.zeros((6, 6 - len(cons)))], 1))
        mf.append([1.0] * len(free) + [0.0] * (3 - len(free)))
        mc.append([1.0] * len(cons) + [0.0] * (6 - len(cons)))
    return tuple(np.asarray(x) for x in (phi, phic, mf, mc))


@no_type_check  # a pytree node: JAX rebuilds it with arbitrary leaves (tracers, None,
# sentinels) inside transformations, so the field annotations document, they are not checked
@dataclasses.dataclass(frozen=True)
class GraspSystem:
    """ell arms of one structure holding an object (see the module docstring)."""
    obj: object                 # Model: free-flyer root (+ rigidly attached bodies), grasp frames
    arms: object                # stacked Model, leading axis ell
    tip: int                    # tip frame index in the arm model
    grasp_frames: tuple[int, ...]   # frame index of each grasp in the object model
    n_arms: int
    contacts: tuple[str, ...] = ()  # contact kind per grasp (CONTACTS); () means all "weld"
    tree: object = None             # Model: object and arms as one forest (state layout, integration)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Contact kind of each grasp."""
        return self.contacts or ("weld",) * self.n_arms

    @property
    def nq(self):
        return self.obj.nq + self.n_arms * self.arms.nq

    @property
    def nv(self):
        return self.obj.nv + self.n_arms * self.arms.nv

    @property
    def m(self):
        return 6 * self.n_arms


jax.tree_util.register_dataclass(GraspSystem, data_fields=["obj", "arms", "tree"],
                                 meta_fields=["tip", "grasp_frames", "n_arms", "contacts"])


def grasp_system(obj, arms, tip, grasps, contacts="weld") -> GraspSystem:
    """Build a :class:`GraspSystem` from an object Model (root joint free flyer), a list of arm
    Models of one structure (base placement in the root Xtree), the arms' tip frame name, the
    object's grasp frame names (one per arm) and the contact kind (one for all, or one per
    grasp; see :data:`CONTACTS`).  Raises ModelError naming what does not fit."""
    if not isinstance(obj, Model):
        raise ModelError(f"grasp_system: the object must be a Model, got {type(obj).__name__}")
    if isinstance(arms, Model) or not isinstance(arms, (list, tuple)) or not all(isinstance(a, Model) for a in arms):
        raise ModelError(f"grasp_system: arms must be a list of Models (one per arm), got {type(arms).__name__}"
                         + (" (wrap a single arm as [arm])" if isinstance(arms, Model) else ""))
    arms = list(arms)
    if not arms:
        raise ModelError("grasp_system needs at least one arm")
    if obj.nb < 1 or int(obj.jtype[0]) != J.FREE:
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
    if len(set(grasps)) != len(grasps):
        raise ModelError(f"grasp_system: grasp frames {list(grasps)} repeat a frame; each arm holds its own grasp")
    for g in grasps:
        if g not in obj.frame_names:
            raise ModelError(f"grasp_system: object {obj.name!r} has no frame {g!r}")
    if not isinstance(contacts, (str, list, tuple)):
        raise ModelError(f"grasp_system: contacts must be a kind or a list of kinds {sorted(CONTACTS)}, got "
                         f"{contacts!r}")
    kinds = (contacts,) * len(arms) if isinstance(contacts, str) else tuple(contacts)
    if len(kinds) != len(arms):
        raise ModelError(f"grasp_system: {len(arms)} arms but {len(kinds)} contact kinds")
    for i, k in enumerate(kinds):
        if not isinstance(k, str) or k not in CONTACTS:
            raise ModelError(f"grasp_system: grasp {i} ({grasps[i]!r}): unknown contact kind {k!r}; kinds are "
                             f"{sorted(CONTACTS)}")
    kinds = () if all(k == "weld" for k in kinds) else kinds
    return GraspSystem(obj, stack_parameters(arms), a0.frame_names.index(tip), tuple(obj.frame_names.index(g) for g in grasps),
                       len(arms), kinds, forest([obj] + arms, f"{obj.name}+{len(arms)}_arms"))


def forest(models, name="forest") -> object:
    """The disjoint union of Models as one Model (bodies, joints and dofs in the given order;
    body and joint names prefixed by the model index; body frames only; the first model's
    gravity): the state layout [q_0; q_1; ...] of a :class:`GraspSystem`."""
    cols = {k: [] for k in ("parent", "jtype", "Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia",
                            "armature", "damping", "friction", "q_lower", "q_upper", "effort_limit",
                            "velocity_limit", "body_names", "joint_names")}
    off = 0
    for i, m in enumerate(models):
        cols["parent"] += [int(p) + off if p >= 0 else -1 for p in np.asarray(m.parent)]
        for k in ("jtype", "Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia", "armature", "damping",
                  "friction", "q_lower", "q_upper", "effort_limit", "velocity_limit"):
            cols[k] += list(np.asarray(getattr(m, k)))
        cols["body_names"] += [f"{i}:{b}" for b in m.body_names]
        cols["joint_names"] += [f"{i}:{j}" for j in m.joint_names]
        off += m.nb
    return build_model(**cols, gravity=np.asarray(models[0].gravity), name=name, inertia_policy="skip")


def split_state(gs, x, nobj, nper):
    """(object part (nobj,), arm parts (ell, nper)) of a state vector laid out [object; arm_1; ...]."""
    return x[:nobj], x[nobj:].reshape(gs.n_arms, nper)


@jax.jit
def grasp_residual(gs: GraspSystem, q):
    """Grasp residuals (6 ell,), world axes, per arm: [p_tip - p_grasp; angular] with angular
    log3(R_tip R_grasp^T) (weld), z_grasp x z_tip (revolute: zero when the hinge axes align) or
    0 (soft finger, point: no position-level angular constraint; a soft finger's is not
    integrable)."""
    qo, qa = split_state(gs, q, gs.obj.nq, gs.arms.nq)
    Rt, pt = jax.vmap(lambda arm, q: frame_pose(arm, q, gs.tip))(gs.arms, qa)
    Rg, pg = jax.vmap(lambda f: frame_pose(gs.obj, qo, f))(jnp.asarray(gs.grasp_frames))
    return residual_of_poses(gs, Rt, pt, Rg, pg).reshape(-1)


def residual_of_poses(gs, Rt, pt, Rg, pg):
    """:func:`grasp_residual` (ell, 6) from the tips' and grasp frames' world poses (ell, 3, 3), (ell, 3)."""
    weld = jnp.asarray([k == "weld" for k in gs.kinds], pt.dtype)[:, None]
    rev = jnp.asarray([k == "revolute" for k in gs.kinds], pt.dtype)[:, None]
    ang = weld * jax.vmap(lambda a, b: log3(a @ b.T))(Rt, Rg) + rev * jnp.cross(Rg[:, :, 2], Rt[:, :, 2])
    return jnp.concatenate([pt - pg, ang], 1)


class GraspTerms(NamedTuple):
    """The per-arm (leading axis ell) and object quantities of :func:`grasp_terms`."""
    theta_f: jax.Array    # (ell, N) free arm accelerations
    Jt: jax.Array         # (ell, 6, N) tip Jacobians (world-aligned)
    jdqd: jax.Array       # (ell, 6) tip J-dot q-dot
    Lam_inv: jax.Array    # (ell, 6, 6) J M^-1 J^T per arm (6.10)
    alpha_f: jax.Array    # (ell, 6) free tip accelerations
    obj_f: jax.Array      # (6,) free object acceleration
    G: jax.Array          # (ell, 6, 6) grasp-point Jacobians of the object
    obj_bias: jax.Array   # (ell, 6) grasp-point J-dot q-dot of the object
    Mo: jax.Array         # (nvo, nvo) the object's mass matrix
    Mo_inv: jax.Array     # (nvo, nvo)
    target: jax.Array     # (ell, 6) Baumgarte target, world axes (0 without)
    vel: jax.Array        # (ell, 6) relative velocity tip - grasp point, world-aligned
    Rg: jax.Array         # (ell, 3, 3) grasp frame rotations
    w_obj: jax.Array      # (3,) object angular velocity, world axes
    fac: ABAFactor        # per arm (leading axis ell): ABA's tau-independent pass, for (4.9e)


def grasp_terms(gs, q, qd, tau, stabilization):
    """The per-arm (vmapped) and object quantities shared by RCCFD and Lilly-Orin."""
    qo, qa = split_state(gs, q, gs.obj.nq, gs.arms.nq)
    vo, va = split_state(gs, qd, gs.obj.nv, gs.arms.nv)
    to, ta = split_state(gs, tau, gs.obj.nv, gs.arms.nv)
    lwa = "local_world_aligned"
    tip_id = jnp.asarray([frame_index(gs.arms, gs.tip)], jnp.int32)

    def per_arm(arm, q, v, t):
        # one factorization serves theta_f, (6.10) and M^-1 J^T f (4.9e)
        theta_f, fac = aba_factored(arm, q, v, t - arm.damping * v)         # (4.9a), (6.11b)
        tip = frame_terms(arm, q, v, [gs.tip], lwa)                           # J, J-dot qd, J qd
        F = factors_of(slot_factor_of(arm, fac))
        lam_inv = opspace_inverse_inertia_of(arm, F, tip_id, lwa)             # (6.10), (6.11d)
        return theta_f, tip.J[0], tip.a[0], lam_inv, tip.v[0], fac, tip.R[0], tip.p[0]

    theta_f, Jt, jdqd, Lam_inv, tip_vel, fac, Rt, pt = jax.vmap(per_arm)(gs.arms, qa, va, ta)
    alpha_f = jnp.einsum("lij,lj->li", Jt, theta_f) + jdqd                   # (4.9b), (6.11c)
    Mo = crba(gs.obj, qo)                                                     # the object: one matrix serves
    Mo_inv = pd_inverse(Mo)                                                   # M_o, M_o^-1 and a_free
    obj_f = Mo_inv @ (to - gs.obj.damping * vo - rnea(gs.obj, qo, vo, jnp.zeros_like(vo)))
    grasp = frame_terms(gs.obj, qo, vo, gs.grasp_frames, lwa)
    G, obj_bias, Rg = grasp.J, grasp.a, grasp.R
    vel = tip_vel - jnp.einsum("lij,j->li", G, vo)
    target = jnp.zeros((gs.n_arms, 6), q.dtype)
    if stabilization is not None:
        a_, b_ = stabilization
        target = -2.0 * a_ * vel - b_ ** 2 * residual_of_poses(gs, Rt, pt, Rg, grasp.p)
    w_obj = (G[0] @ vo)[3:]
    return GraspTerms(theta_f, Jt, jdqd, Lam_inv, alpha_f, obj_f, G, obj_bias, Mo, Mo_inv, target, vel, Rg, w_obj, fac)


class ContactRows(NamedTuple):
    """The world-aligned contact spaces of the grasps (:func:`contact_rows`)."""
    phi: jax.Array        # (ell, 6, 3) free modes, world-aligned (zero columns pad)
    phic: jax.Array       # (ell, 6, 6) constrained modes, world-aligned (zero columns pad)
    pad_f: jax.Array      # (ell, 3) 1 on padded free columns
    pad_c: jax.Array      # (ell, 6) 1 on padded constrained columns
    c: jax.Array          # (ell, 6) b + projected target: phi^c^T (a_tip - a_grasp) = phi^c^T c


def contact_rows(gs, T):
    """World-aligned contact spaces and the right side b + t of the constrained rows."""
    phi, phic, mf, mc = contact_spaces(gs.kinds)
    dt = T.Rg.dtype
    rot = lambda P: jnp.concatenate([jnp.einsum("lij,ljk->lik", T.Rg, P[:, :3]),
                                     jnp.einsum("lij,ljk->lik", T.Rg, P[:, 3:])], 1)
    phi_w, phic_w = rot(jnp.asarray(phi, dt)), rot(jnp.asarray(phic, dt))
    nonrigid = jnp.asarray([k != "weld" for k in gs.kinds], dt)[:, None]
    b = nonrigid * jnp.concatenate([jnp.zeros_like(T.vel[:, :3]),
                                    jnp.cross(jnp.broadcast_to(T.w_obj, T.vel[:, 3:].shape), T.vel[:, 3:])], 1)
    t = jnp.einsum("lij,lkj,lk->li", phic_w, phic_w, T.target)
    return ContactRows(phi_w, phic_w, jnp.asarray(1.0 - mf, dt), jnp.asarray(1.0 - mc, dt), b + t)


class GraspSolution(NamedTuple):
    """Solution of a grasp system (internal to the grasp solvers and :mod:`.legged`)."""
    qdd: jax.Array        # (nv,) object then arms
    lam: jax.Array        # (ell, 6) force on each tip from the object, world-aligned at the tip
    residual: jax.Array   # (6 ell,) phi^c phi^c^T (a_tip - a_grasp - c): 0 when the contacts hold
    rel_acc: jax.Array    # (ell, 6) a_tip - a_grasp (classical, world-aligned)
    vel: jax.Array        # (ell, 6) relative velocity tip - grasp point
    phi: jax.Array        # (ell, 6, 3) free modes, world-aligned
    w_obj: jax.Array      # (3,) object angular velocity
    system: jax.Array     # Omega on the real constrained rows (both methods; the rank diagnostic)
    chains: jax.Array     # (ell, 6, 6) A_k = phi^c^T Lambda_k^-1 phi^c, unit on padded rows: each
    #                       chain's constrained operator (singular where the chain is; a diagnostic)


def finish_arms(gs, q, T, C, lam_l, qdd_o):
    """Joint accelerations of the arms from their tip forces (4.9e, 6.11g, Lilly-Orin 48), the
    relative accelerations and the constraint residual."""
    zb, z6 = jnp.zeros((gs.arms.nb, 6), q.dtype), jnp.zeros(6, q.dtype)
    dtheta = jax.vmap(lambda arm, fac, Jt, f: aba_solve(arm, fac, zb, zb, Jt.T @ f, z6))(   # M^-1 J^T f
        gs.arms, T.fac, T.Jt, lam_l)
    qdd_a = T.theta_f + dtheta
    rel = jnp.einsum("lij,lj->li", T.Jt, qdd_a) + T.jdqd - jnp.einsum("lij,j->li", T.G, qdd_o) - T.obj_bias
    residual = jnp.einsum("lij,lkj,lk->li", C.phic, C.phic, rel - C.c)
    return jnp.concatenate([qdd_o, qdd_a.reshape(-1)]), rel, residual.reshape(-1)


def chain_blocks(T, C):
    """(ell, 6, 6) A_k = phi^c^T Lambda_k^-1 phi^c with 1 on the padded rows' diagonal."""
    return jnp.einsum("lji,ljk,lkm->lim", C.phic, T.Lam_inv, C.phic) + jax.vmap(jnp.diag)(C.pad_c)


def real_rows(gs):
    """Indices of the real (unpadded) constrained rows of the stacked (6 ell,) contact rows."""
    return np.flatnonzero(contact_spaces(gs.kinds)[3].reshape(-1))
