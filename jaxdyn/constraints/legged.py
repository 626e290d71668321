"""Lilly and Orin's (1994) Type 1 simple closed-chain mechanisms: legs under a body, each leg's
last link held on the support surface.

Lilly and Orin treat the support surface as the base of every chain: link 1 of chain k is the
link that touches the ground (through an unpowered contact joint) and the chain's tip is the
link attached to the body (the reference member) by the actuated hip, the general joint at the
tip with motion space phi (the hip axis) and a *known* force along it (the hip torque h_k).
:func:`legged_system` builds exactly that from a floating-base tree:

* each leg (a serial chain from a child of the root body to a foot frame) is *re-rooted* at
  its foot: a spherical joint at the ground point (``contact="point"``, Pinocchio's
  CONTACT_3D) or a fixed joint (``contact="weld"``, CONTACT_6D) carries the foot link, and the
  leg's other joints follow in reverse order (a revolute, prismatic or helical joint of angle
  q reversed is the same joint of angle -q; body frames move to the joint frames, inertias
  are re-expressed there);
* the hip joint becomes a ``"revolute"`` contact of a :class:`~jaxdyn.GraspSystem` between the
  chain's tip and a grasp frame on the body whose z axis is the hip axis, with free force
  h_k = tau_hip - damping qd_hip.

:func:`legged_forward_dynamics` maps the tree's state to the chains (the foot orientation as
the spherical joint's quaternion, reversed joints with negated q, qd, tau), runs Table 1 (or
RCCFD) and maps back: body acceleration, leg joints, the hip accelerations from the relative
accelerations across the hips, and the ground reaction of each foot from the chain's
Newton-Euler equations (:func:`jaxdyn.joint_wrenches` at the re-rooted joint).  The ground
reactions are in world axes at the foot, the convention of the point / weld constraints of
the equivalent :class:`~jaxdyn.ClosedModel` (``system.closed``), so results compare 1:1.

The chain coordinates assume the feet are on their ground points (the state is consistent,
as after :func:`jaxdyn.project_constraints`); Baumgarte gains act on the hip closures, where
the feet's drift shows.  Requirements (named :class:`~jaxdyn.errors.ModelError` otherwise):
a free-flyer root body; every other body on exactly one leg; legs serial, of one structure;
hips revolute without armature; other leg joints revolute, prismatic or helical.
"""
from __future__ import annotations

import dataclasses
from typing import no_type_check

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics.rnea import joint_wrenches
from ..errors import ModelError
from ..kinematics import frame_pose, frame_terms
from ..model import joints as J
from ..model.model import build_model, check_state
from ..spatial.rotations import rot_to_quat
from .grasp import GraspSystem, grasp_system
from .grasp_solvers import lilly_orin_solve, rccfd_solve
from .model import ClosedModel, Constraint, close_loops

_REVERSIBLE = (J.REVOLUTE, J.PRISMATIC, J.HELICAL)


@no_type_check  # a pytree node: JAX rebuilds it with arbitrary leaves (tracers, None,
# sentinels) inside transformations, so the field annotations document, they are not checked
@dataclasses.dataclass(frozen=True)
class LeggedSystem:
    """A floating body on ell legs held on the ground (see the module docstring).  ``gs``: the
    re-rooted chains and the body as a :class:`GraspSystem`; ``closed``: the same mechanism as a
    :class:`ClosedModel` (tree + foot constraints; "schur" / "kkt" / rollouts)."""
    gs: GraspSystem
    closed: ClosedModel
    feet: tuple[int, ...]               # foot frame indices in closed.model
    contact: str                        # "point" | "weld"
    root_q: tuple[int, ...]             # (7,) q indices of the body's free flyer
    root_v: tuple[int, ...]             # (6,)
    leg_q: tuple[tuple[int, ...], ...]  # (ell, n - 1) q indices of the re-rooted joints, chain order
    leg_v: tuple[tuple[int, ...], ...]
    hip_v: tuple[int, ...]              # (ell,) v index of each hip

    @property
    def model(self):
        """The tree model (with the contact frames)."""
        return self.closed.model

    @property
    def m(self) -> int:
        """Number of foot constraint rows."""
        return self.closed.m


jax.tree_util.register_dataclass(LeggedSystem, data_fields=["gs", "closed"],
                                 meta_fields=["feet", "contact", "root_q", "root_v", "leg_q", "leg_v", "hip_v"])


def _z_to(a):
    """A rotation R with R e_z = a (unit a)."""
    a = a / np.linalg.norm(a)
    x = np.cross([0.0, 1.0, 0.0] if abs(a[1]) < 0.9 else [1.0, 0.0, 0.0], a)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(a, x), a], 1)


def _leg_paths(model, feet):
    """Serial paths [b_1 .. b_n] from a child of the root to each foot's body (checked)."""
    P = np.asarray(model.parent)
    children = {i: [] for i in range(model.nb)}
    for i in range(1, model.nb):
        if P[i] >= 0:
            children[int(P[i])].append(i)
    fbody = np.asarray(model.frame_body)
    paths, owner = [], {}
    for f in feet:
        if f not in model.frame_names:
            raise ModelError(f"legged_system: model {model.name!r} has no frame {f!r}")
        b = int(fbody[model.frame_names.index(f)])
        path = []
        while b > 0:
            path.append(b)
            b = int(P[b])
        if b < 0 or not path:
            raise ModelError(f"legged_system: foot {f!r} is not on a leg below the root body "
                             f"{model.body_names[0]!r}")
        path = path[::-1]
        for i, b in enumerate(path):
            if b in owner:
                raise ModelError(f"legged_system: feet {owner[b]!r} and {f!r} share body {model.body_names[b]!r}; "
                                 "each leg must end at one foot")
            owner[b] = f
            nxt = path[i + 1:i + 2]
            if children[b] != nxt:
                extra = [model.body_names[c] for c in children[b] if c not in nxt]
                raise ModelError(f"legged_system: leg of foot {f!r} branches at {model.body_names[b]!r} "
                                 f"(bodies {extra} hang off it); Lilly-Orin chains are serial")
        paths.append(path)
    loose = [model.body_names[i] for i in range(1, model.nb) if i not in owner]
    if loose:
        shown = ", ".join(repr(b) for b in loose[:6]) + (f", ... ({len(loose)} in all)" if len(loose) > 6 else "")
        raise ModelError(f"legged_system: bodies {shown} are on no leg; Type 1 needs the body (reference member) "
                         "to be one rigid body with every other body on a leg")
    return paths


def _chain(model, path, foot, contact, R_C, p_C, R_a):
    """The leg re-rooted at its foot (numpy): build_model arguments of chain c_1 .. c_n."""
    g = lambda x: np.asarray(x)
    E, r, ax, pitch = g(model.Xtree_E), g(model.Xtree_r), g(model.axis), g(model.pitch)
    mass, com, I, jt = g(model.mass), g(model.com), g(model.inertia), g(model.jtype)
    arm, damp, vidx = g(model.armature), g(model.damping), g(model.vidx)
    fid = model.frame_names.index(foot)
    n = len(path)
    F = [(g(model.frame_E)[fid].T, g(model.frame_r)[fid])]                # new frame of c_1 in b_n coordinates
    for j in range(1, n):
        c = path[n - j]                                                   # the body below c_j on the leg
        F.append((E[c].T, r[c]))                                          # = placement of that body's joint
    bodies = [path[n - 1 - j] for j in range(n)]
    out = dict(parent=list(range(-1, n - 1)), jtype=[], Xtree_E=[], Xtree_r=[], axis=[], pitch=[], mass=[],
               com=[], inertia=[], armature=[], damping=[])
    for j, b in enumerate(bodies):
        R, p = F[j]
        out["mass"].append(mass[b]); out["com"].append(R.T @ (com[b] - p)); out["inertia"].append(R.T @ I[b] @ R)
        if j == 0:
            R0 = np.eye(3) if contact == "point" else R_C
            out["jtype"].append(J.SPHERICAL if contact == "point" else J.FIXED)
            out["Xtree_E"].append(R0.T); out["Xtree_r"].append(p_C); out["axis"].append([0, 0, 1.0])
            out["pitch"].append(0.0)
            if contact == "point":
                out["armature"] += [0.0] * 3; out["damping"] += [0.0] * 3
            continue
        i = bodies[j - 1]                                                 # reversed joint of body i
        Rp, pp = F[j - 1]
        out["jtype"].append(int(jt[i])); out["Xtree_E"].append(Rp); out["Xtree_r"].append(-Rp.T @ pp)
        out["axis"].append(ax[i]); out["pitch"].append(pitch[i])
        out["armature"].append(arm[vidx[i, 0]]); out["damping"].append(damp[vidx[i, 0]])
    Rn, pn = F[n - 1]
    tip = ("tip", n - 1, (Rn.T @ R_a).T, -Rn.T @ pn)                      # b_1's frame, z along the hip axis
    return out, tip


def legged_system(model, q, feet, contact="point") -> LeggedSystem:
    """Lilly and Orin's Type 1 mechanism: ``model``'s root body on the legs ending at the frames
    ``feet``, each foot held where it is at the stance ``q`` (nq,) by a point or weld contact.
    Returns a :class:`LeggedSystem` (solvers "lilly_orin", "rccfd"; "schur" / "kkt" run on
    its ``closed`` form).  Raises ModelError naming what does not fit (module docstring)."""
    if contact not in ("point", "weld"):
        raise ModelError(f"legged_system: contact must be 'point' or 'weld', got {contact!r}")
    if isinstance(model, ClosedModel) or not hasattr(model, "nb"):
        raise ModelError(f"legged_system needs the tree Model (the feet are its constraints), got "
                         f"{type(model).__name__}" + (" (pass its .model)" if isinstance(model, ClosedModel) else ""))
    if model.nb < 2 or int(model.jtype[0]) != J.FREE or any(int(p) < 0 for p in np.asarray(model.parent)[1:]):
        raise ModelError(f"legged_system: model {model.name!r} needs one root body with a free-flyer joint "
                         "(the body carried by the legs)")
    q = np.asarray(q, float)
    check_state(model, q=jnp.asarray(q))
    feet = list(feet)
    paths = _leg_paths(model, feet)
    jt, vidx, qidx = np.asarray(model.jtype), np.asarray(model.vidx), np.asarray(model.qidx)
    for f, path in zip(feet, paths):
        hip = path[0]
        if int(jt[hip]) != J.REVOLUTE:
            raise ModelError(f"legged_system: hip joint {model.joint_names[hip]!r} of foot {f!r} is "
                             f"{J.JOINT_NAMES[int(jt[hip])]}; Type 1 hips must be revolute")
        if float(np.asarray(model.armature)[vidx[hip, 0]]) != 0.0:
            raise ModelError(f"legged_system: hip joint {model.joint_names[hip]!r} has armature; the hip is a "
                             "general joint of the closure, whose force must be known (set its armature to 0)")
        for b in path[1:]:
            if int(jt[b]) not in _REVERSIBLE:
                raise ModelError(f"legged_system: joint {model.joint_names[b]!r} of foot {f!r} is "
                                 f"{J.JOINT_NAMES[int(jt[b])]}; re-rooted leg joints must be revolute, prismatic "
                                 "or helical")
    cons = []
    for f in feet:
        R, p = (np.asarray(x) for x in frame_pose(model, jnp.asarray(q), f))
        cons.append(Constraint(contact, f, None, placement_b=(R, p), name=f))
    closed = close_loops(model, cons)
    E, r, ax = np.asarray(model.Xtree_E), np.asarray(model.Xtree_r), np.asarray(model.axis)
    chains, grasps = [], []
    for k, (f, path) in enumerate(zip(feet, paths)):
        R_C, p_C = (np.asarray(x) for x in frame_pose(model, jnp.asarray(q), f))
        R_a = _z_to(ax[path[0]])
        kw, tip = _chain(model, path, f, contact, R_C, p_C, R_a)
        chains.append(build_model(**{k_: np.asarray(v) for k_, v in kw.items() if k_ != "parent"},
                                  parent=kw["parent"], gravity=np.asarray(model.gravity), frames=[tip],
                                  body_names=[model.body_names[b] for b in path[::-1]],
                                  name=f"{model.name}:{f}", inertia_policy="skip"))
        grasps.append((f"hip{k}", 0, (E[path[0]].T @ R_a).T, r[path[0]]))
    s0 = chains[0]
    for f, c in zip(feet, chains):
        if (c.nb, c.types) != (s0.nb, s0.types) or not np.array_equal(np.asarray(c.jtype), np.asarray(s0.jtype)):
            raise ModelError(f"legged_system: the leg of foot {f!r} does not have the structure of the leg of "
                             f"{feet[0]!r}; the chains are vmapped and must share one structure")
    body = build_model(parent=[-1], jtype=[J.FREE], Xtree_E=E[:1], Xtree_r=r[:1], axis=[[0, 0, 1.0]],
                       mass=np.asarray(model.mass)[:1], com=np.asarray(model.com)[:1],
                       inertia=np.asarray(model.inertia)[:1], armature=np.asarray(model.armature)[vidx[0, :6]],
                       damping=np.asarray(model.damping)[vidx[0, :6]], gravity=np.asarray(model.gravity),
                       body_names=[model.body_names[0]], frames=grasps, name=f"{model.name}:body",
                       inertia_policy="skip")
    gs = grasp_system(body, chains, "tip", [g[0] for g in grasps], contacts="revolute")
    n = len(paths[0])
    leg_q = tuple(tuple(int(qidx[p[n - j], 0]) for j in range(1, n)) for p in paths)
    leg_v = tuple(tuple(int(vidx[p[n - j], 0]) for j in range(1, n)) for p in paths)
    return LeggedSystem(gs, closed, tuple(closed.model.frame_names.index(f) for f in feet), contact,
                        tuple(int(i) for i in qidx[0, :7]), tuple(int(i) for i in vidx[0, :6]), leg_q, leg_v,
                        tuple(int(vidx[p[0], 0]) for p in paths))


def _to_chains(ls: LeggedSystem, q, qd, tau):
    """The tree's state in the GraspSystem's layout [body; chain_1; ...] and the hip forces."""
    m, ell = ls.model, len(ls.feet)
    lq, lv = jnp.asarray(ls.leg_q, jnp.int32).reshape(ell, -1), jnp.asarray(ls.leg_v, jnp.int32).reshape(ell, -1)
    qc, vc, tc = -q[lq], -qd[lv], -tau[lv]
    if ls.contact == "point":
        ft = frame_terms(m, q, qd, ls.feet, "local")
        R_C, w_C = ft.R, ft.v[:, 3:]
        qc = jnp.concatenate([jax.vmap(rot_to_quat)(R_C), qc], 1)
        vc = jnp.concatenate([w_C, vc], 1)
        tc = jnp.concatenate([jnp.zeros_like(w_C), tc], 1)
    root_q, root_v, hip = jnp.asarray(ls.root_q), jnp.asarray(ls.root_v), jnp.asarray(ls.hip_v)
    h = tau[hip] - m.damping[hip] * qd[hip]
    free = jnp.concatenate([h[:, None], jnp.zeros((ell, 2), h.dtype)], 1)
    return (jnp.concatenate([q[root_q], qc.reshape(-1)]), jnp.concatenate([qd[root_v], vc.reshape(-1)]),
            jnp.concatenate([tau[root_v], tc.reshape(-1)]), free)


def legged_forward_dynamics(ls: LeggedSystem, q, qd, tau, method="lilly_orin", stabilization=None):
    """Type 1 forward dynamics in the tree's coordinates.  q (nq,), qd (nv,), tau (nv,) of
    ``ls.model``.  Returns (qdd (nv,), lam (m,) ground reactions on the feet in world axes
    [force] or [force; moment] at each foot, Omega on the hips' constrained rows (the rank
    diagnostic), the chains' constrained operators A_k (ell, 6, 6) (the chain diagnostic)).
    The feet's residual is the closed form's (:func:`jaxdyn.constrained_forward_dynamics`)."""
    m, gs, ell = ls.model, ls.gs, len(ls.feet)
    qs, vs, ts, free = _to_chains(ls, q, qd, tau)
    solve = lilly_orin_solve if method == "lilly_orin" else rccfd_solve
    sol = solve(gs, qs, vs, ts, stabilization, free_force=free)
    no = gs.obj.nv
    qdd_c = sol.qdd[no:].reshape(ell, gs.arms.nv)
    off = 3 if ls.contact == "point" else 0
    a_w = sol.phi[:, 3:, 0]                                              # hip axes, world
    qdd_hip = jnp.sum(a_w * sol.rel_acc[:, 3:], 1) + jnp.sum(jnp.cross(sol.w_obj, a_w) * sol.vel[:, 3:], 1)
    lv = jnp.asarray(ls.leg_v, jnp.int32).reshape(ell, -1)
    qdd = jnp.zeros(m.nv, qd.dtype).at[jnp.asarray(ls.root_v)].set(sol.qdd[:no])
    qdd = qdd.at[lv].set(-qdd_c[:, off:]).at[jnp.asarray(ls.hip_v)].set(qdd_hip)

    def ground(arm, qc, vc, ac, lam):                                    # Newton-Euler of the chain
        poses = frame_terms(arm, qc, None, [gs.tip, 0])                 # the tip, the chain's first frame
        p_t, R1 = poses.p[0], poses.R[1]
        F, N = lam[:3], lam[3:] + jnp.cross(p_t, lam[:3])
        fx = jnp.zeros((arm.nb, 6), lam.dtype).at[-1].set(jnp.concatenate([F, N]))
        f1 = joint_wrenches(arm, qc, vc, ac, fx, f_ext_frame="world")[0]
        return jnp.concatenate([R1 @ f1[:3], R1 @ f1[3:]])

    qc = qs[gs.obj.nq:].reshape(ell, gs.arms.nq)
    vc = vs[no:].reshape(ell, gs.arms.nv)
    lam = jax.vmap(ground)(gs.arms, qc, vc, qdd_c, sol.lam)
    rows = 3 if ls.contact == "point" else 6
    lam = lam[:, :rows].reshape(-1)
    return qdd, lam, sol.system, sol.chains
