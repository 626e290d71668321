"""MJCF loader through MuJoCo's own compiler (``pip install jaxdyn[mjcf]``).

:func:`load_mjcf` compiles the file with ``mujoco.MjModel`` (defaults, ``<include>``, mesh
inertias, ``inertiafromgeom``, angle units and frame conventions are MuJoCo's) and reads the
compiled model.  The mapping, MuJoCo -> jaxdyn:

* **Bodies.**  MuJoCo's body order is kept.  A body without a joint is welded to its parent
  (its inertia merged, as a fixed URDF joint is).  A body with k joints becomes a chain of k
  jaxdyn bodies, in the order MuJoCo applies them; the first k - 1 are massless.
* **Joint frames.**  A MuJoCo hinge turns its body about an axis through the joint's anchor
  ``pos``.  The jaxdyn body sits at that anchor with the MuJoCo body's orientation, so the MuJoCo
  body frame is the jaxdyn body frame translated by ``-pos``; it is a named frame under the
  MuJoCo body's name (``frame_pose(model, q, "torso")`` is MuJoCo's ``xpos`` / ``xmat``).  The
  jaxdyn body takes the MuJoCo body's name when the two frames coincide (anchor at the body
  origin), else ``"<body>:<joint>"``; the intermediate bodies of a multi-joint body are
  ``"<body>:<joint>"`` too.  Joints keep their names (unnamed: ``"<body>:joint<k>"``), as do
  sites, which become frames.
* **Coordinates.**  hinge -> REVOLUTE, slide -> PRISMATIC (q equals ``qpos``: a joint's
  ``ref`` is folded into its placement), ball -> SPHERICAL, free -> FREE.  q and v have
  MuJoCo's lengths and order, with two differences of convention (Pinocchio's, which jaxdyn
  uses): quaternions are stored [x y z w] (MuJoCo [w x y z]), and a free joint's linear
  velocity, acceleration and force are in the body frame (MuJoCo: world axes).  Convert with
  :func:`from_mujoco` / :func:`to_mujoco`; mass matrices with :func:`mass_matrix_to_mujoco`.
* **Parameters.**  Masses, COMs and inertias (``body_inertia`` about ``body_ipos`` in the
  ``body_iquat`` axes; for a body MuJoCo flags ``body_simple``, about its origin in its axes,
  as MuJoCo's own kinematics places it); ``dof_armature``; ``dof_damping`` (viscous, as MuJoCo's passive force);
  ``dof_frictionloss`` -> ``friction`` (Coulomb; kept for identification and URDF output, not
  applied by jaxdyn's forward dynamics, so it is also named in the warning below);
  ``jnt_range`` of limited hinges and slides; gravity (zero if the model disables it).
  ``effort_limit`` of a hinge or slide: the sum over actuators with a joint transmission of
  |gear| times the bound of the actuator force (``forcerange``, and for a motor, gain times
  ``ctrlrange``), clipped by the joint's ``actuatorfrcrange``; +inf where an actuator is
  unbounded or the joint has none.
* **Equalities.**  Active ``connect`` and ``weld`` (between bodies or sites) become
  :class:`~jaxdyn.Constraint` s ("point", or "weld"; a weld with ``torquescale = 0`` is a point)
  and :func:`load_mjcf` returns a :class:`~jaxdyn.ClosedModel`.  MuJoCo solves them softly
  (``solref`` / ``solimp``); jaxdyn's constrained dynamics hold them exactly.

Not modelled, dropped with a warning that names them: contacts (geoms only give inertias),
joint ``frictionloss`` (read, not simulated), joint springs (``stiffness``), tendons, ``gravcomp``, fluid forces
(``density`` / ``viscosity``), joint and tendon equalities, ball-joint cone limits.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from ..errors import JaxdynWarning, MJCFError, ModelError
from ..model import joints as J
from ..model.model import build_model
from .urdf import combine_bodies, tree_arguments

_HINGE, _SLIDE, _BALL, _FREE = 3, 2, 1, 0          # mjtJoint
_JTYPE = {_HINGE: J.REVOLUTE, _SLIDE: J.PRISMATIC, _BALL: J.SPHERICAL, _FREE: J.FREE}


def quat_to_R(q):
    """Rotation matrix of a quaternion [w, x, y, z] (MuJoCo's order), normalized: the numpy
    twin of :func:`jaxdyn.spatial.rotations.quat_to_rot` for the loader's float64 host work."""
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def compile_mjcf(path_or_xml):
    """(mujoco.MjModel, name) from an MJCF file, an XML string or an ``MjModel``; MuJoCo's
    compiler errors are raised as :class:`~jaxdyn.errors.MJCFError` naming the file."""
    try:
        import mujoco
    except ImportError:
        raise MJCFError("load_mjcf needs MuJoCo's compiler: pip install 'jaxdyn[mjcf]' (or mujoco)") from None
    if isinstance(path_or_xml, mujoco.MjModel):
        return path_or_xml, "mjcf"
    s = str(path_or_xml)
    if s.lstrip().startswith("<"):
        where, load = "<string>", lambda: mujoco.MjModel.from_xml_string(s)
    else:
        if os.path.isdir(s):
            raise MJCFError(f"{s}: is a directory, not an MJCF file")
        if not os.path.exists(s):
            raise MJCFError(f"{s}: no such file")
        where, load = s, lambda: mujoco.MjModel.from_xml_path(s)
    try:
        m = load()
    except Exception as e:      # MuJoCo raises ValueError("XML Error: ... Element ..., line ...")
        raise MJCFError(f"{where}: MuJoCo's compiler: {e}".strip()) from None
    name = bytes(m.names).split(b"\0")[0].decode()        # <mujoco model="...">; MuJoCo's default:
    if name in ("", "MuJoCo Model"):                        # the file's stem, or "mjcf"
        name = os.path.splitext(os.path.basename(s))[0] if where != "<string>" else "mjcf"
    return m, name


def _names(m, objtype, n):
    import mujoco
    return [mujoco.mj_id2name(m, objtype, i) or "" for i in range(n)]


def body_names(m):
    """The frame name of each MuJoCo body of the compiled model ``m``: its name, ``"body<b>"``
    if unnamed, ``"world"`` for body 0."""
    import mujoco
    names = [n or f"body{b}" for b, n in enumerate(_names(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody))]
    return ["world"] + names[1:]


def _effort_limits(m, where):
    """Per-dof torque bounds from the actuators (see the module docstring)."""
    import mujoco
    lim = np.zeros(m.nv)
    seen = np.zeros(m.nv, bool)
    for a in range(m.nu):
        if m.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        j = int(m.actuator_trnid[a, 0])
        if m.jnt_type[j] not in (_HINGE, _SLIDE):
            continue
        d = int(m.jnt_dofadr[j])
        seen[d] = True
        bound = np.inf
        if m.actuator_forcelimited[a]:
            bound = np.abs(m.actuator_forcerange[a]).max()
        motor = (m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED and m.actuator_biastype[a] ==
                 mujoco.mjtBias.mjBIAS_NONE and m.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE)
        if motor and m.actuator_ctrllimited[a]:
            bound = min(bound, abs(m.actuator_gainprm[a, 0]) * np.abs(m.actuator_ctrlrange[a]).max())
        lim[d] += abs(m.actuator_gear[a, 0]) * bound
    for j in range(m.njnt):
        if m.jnt_type[j] in (_HINGE, _SLIDE) and m.jnt_actfrclimited[j]:
            d = int(m.jnt_dofadr[j])
            lim[d] = min(lim[d] if seen[d] else np.inf, np.abs(m.jnt_actfrcrange[j]).max())
            seen[d] = True
    lim[~seen] = np.inf
    lim[lim == 0] = np.inf          # a zero bound (e.g. ctrlrange 0 0) says nothing about the joint
    return lim


def _dropped(m, names):
    """Messages for the MuJoCo features this loader does not model."""
    out = []
    jn = names["joint"]
    js = sorted({jn[m.dof_jntid[d]] for d in np.nonzero(m.dof_frictionloss)[0]})
    if js:
        out.append(f"joint frictionloss on {js[:6]}{' ...' if len(js) > 6 else ''} (kept as Model.friction, "
                   "not applied by forward dynamics)")
    js = [jn[j] for j in np.nonzero(m.jnt_stiffness)[0]]
    if js:
        out.append(f"joint springs (stiffness) on {js[:6]}{' ...' if len(js) > 6 else ''}")
    if m.ntendon:
        # a tendon's armature enters MuJoCo's M (J_ten^T armature J_ten): say that M differs
        arm = int(np.count_nonzero(getattr(m, "tendon_armature", ())))
        out.append(f"{m.ntendon} tendon(s)" + (f", {arm} with armature (MuJoCo adds it to M; jaxdyn's M, "
                                                "forward and inverse dynamics leave it out)" if arm else ""))
    if np.any(m.body_gravcomp):
        out.append("gravcomp")
    if m.opt.density or m.opt.viscosity:
        out.append("fluid forces (density / viscosity)")
    bl = [jn[j] for j in range(m.njnt) if m.jnt_type[j] == _BALL and m.jnt_limited[j]]
    if bl:
        out.append(f"ball-joint cone limits on {bl[:6]}")
    return out


def parse_mjcf(path_or_xml):
    """The arguments of :func:`build_model` and the list of :class:`~jaxdyn.Constraint` s of
    an MJCF model (see the module docstring)."""
    import mujoco
    from ..constraints.model import Constraint

    m, name = compile_mjcf(path_or_xml)
    where = name
    O = mujoco.mjtObj
    names = {"body": _names(m, O.mjOBJ_BODY, m.nbody), "joint": _names(m, O.mjOBJ_JOINT, m.njnt),
             "site": _names(m, O.mjOBJ_SITE, m.nsite), "eq": _names(m, O.mjOBJ_EQUALITY, m.neq)}
    bname = body_names(m)
    jname = [names["joint"][j] or f"{bname[m.jnt_bodyid[j]]}:joint{j - m.body_jntadr[m.jnt_bodyid[j]]}"
             for j in range(m.njnt)]
    names["joint"] = jname
    bodies, frames = [], []
    at = {0: (-1, np.eye(3), np.zeros(3))}      # MuJoCo body -> (jaxdyn body, R, o): its frame there
    for b in range(1, m.nbody):
        jb, R, o = at[int(m.body_parentid[b])]
        R0 = quat_to_R(m.body_quat[b])
        R, o = R @ R0, R @ m.body_pos[b] + o
        joints = range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]) if m.body_jntnum[b] > 0 else ()
        joint_frames = []
        for j in joints:
            t = int(m.jnt_type[j])
            a, p = np.array(m.jnt_axis[j], float), np.array(m.jnt_pos[j], float)
            ref = float(m.qpos0[m.jnt_qposadr[j]]) if t in (_HINGE, _SLIDE) else 0.0
            if t == _FREE:
                if jb != -1:
                    raise MJCFError(f"{where}: body {bname[b]!r}: a free joint in a child of a moving body "
                                    "(its qpos is a world pose) is not supported")
                Rj, r, p = np.eye(3), np.zeros(3), np.zeros(3)
            elif t == _HINGE:
                Rj, r = R @ quat_to_R([np.cos(ref / 2), *(-np.sin(ref / 2) * a)]), R @ p + o   # R(a, -ref)
            else:   # slide (ref: a shift along the axis) or ball (no ref)
                Rj, r = R, R @ (p - a * ref) + o
            bodies.append(dict(name=f"{bname[b]}:{jname[j]}", jname=jname[j], jt=_JTYPE[t], parent=jb, R=Rj, p=r,
                               axis=a if t in (_HINGE, _SLIDE) else np.array([0, 0, 1.0]), m=0.0, c=np.zeros(3),
                               I=np.zeros((3, 3))))
            jb, R, o = len(bodies) - 1, np.eye(3), -p
            joint_frames.append((jname[j], jb, np.eye(3), np.zeros(3)))
        at[b] = (jb, R, o)
        if joints and np.allclose(o, 0) and np.allclose(R, np.eye(3)):
            bodies[jb]["name"] = bname[b]
        frames += [(bname[b], jb, R.T, o)] + joint_frames     # a joint named like its body: the body wins
        if jb >= 0:     # a "simple" body's inertial frame is its body frame at run time (round-off of
            # the compiler's mesh inertia, e.g. an ipos of 1e-9, dropped): as MuJoCo computes it
            ipos, iquat = (np.zeros(3), (1, 0, 0, 0)) if m.body_simple[b] else (m.body_ipos[b], m.body_iquat[b])
            Ri = R @ quat_to_R(iquat)
            bd = bodies[jb]
            bd["m"], bd["c"], bd["I"] = combine_bodies(bd["m"], bd["c"], bd["I"], float(m.body_mass[b]),
                                                 R @ ipos + o, Ri @ np.diag(m.body_inertia[b]) @ Ri.T)
    for s in range(m.nsite):
        jb, R, o = at[int(m.site_bodyid[s])]
        Rs = R @ quat_to_R(m.site_quat[s])
        frames.append((names["site"][s] or f"site{s}", jb, Rs.T, R @ m.site_pos[s] + o))
    nb = len(bodies)
    if len({bd["name"] for bd in bodies}) < nb:
        raise MJCFError(f"{where}: body names are not unique after splitting multi-joint bodies: "
                        f"{[bd['name'] for bd in bodies]}")
    # joint data per dof / per q, in MuJoCo's order (= jaxdyn's)
    lo, hi = np.full(m.nq, -np.inf), np.full(m.nq, np.inf)
    for j in range(m.njnt):
        if m.jnt_type[j] in (_HINGE, _SLIDE) and m.jnt_limited[j]:
            lo[m.jnt_qposadr[j]], hi[m.jnt_qposadr[j]] = m.jnt_range[j]
    for j in range(m.njnt):
        if m.jnt_type[j] == _FREE:
            d = int(m.jnt_dofadr[j])
            for what, arr in (("armature", m.dof_armature), ("damping", m.dof_damping),
                              ("frictionloss", m.dof_frictionloss)):
                if np.ptp(arr[d:d + 3]) > 0:
                    raise MJCFError(f"{where}: free joint {jname[j]!r}: {what} {arr[d:d + 3].tolist()} differs "
                                    "between its linear dofs (world axes in MuJoCo, body axes in jaxdyn)")
    dropped = _dropped(m, names)
    if dropped:
        warnings.warn(f"{where}: MuJoCo features jaxdyn does not model are dropped: " + "; ".join(dropped),
                      category=JaxdynWarning, stacklevel=3)
    gravity = np.zeros(3) if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY else np.array(m.opt.gravity)
    args = tree_arguments(bodies, frames, name, armature=np.array(m.dof_armature), damping=np.array(m.dof_damping),
                          friction=np.array(m.dof_frictionloss), q_lower=lo, q_upper=hi, effort_limit=_effort_limits(m, where), gravity=gravity)
    return args, _equalities(m, names, bname, where, Constraint)


def _equalities(m, names, bname, where, Constraint):
    import mujoco
    out, skipped = [], []
    for e in range(m.neq):
        nm = names["eq"][e] or f"eq{e}"
        typ, ot = int(m.eq_type[e]), int(m.eq_objtype[e])
        if not m.eq_active0[e]:
            skipped.append(f"{nm} (inactive)")
            continue
        if typ not in (mujoco.mjtEq.mjEQ_CONNECT, mujoco.mjtEq.mjEQ_WELD):
            skipped.append(f"{nm} ({mujoco.mjtEq(typ).name[5:].lower()})")
            continue
        o1, o2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        d = np.array(m.eq_data[e], float)
        if ot == mujoco.mjtObj.mjOBJ_SITE:
            fa, fb = names["site"][o1] or f"site{o1}", names["site"][o2] or f"site{o2}"
            pa = pb = None
        else:
            fa, fb = bname[o1], (None if o2 == 0 else bname[o2])
            if typ == mujoco.mjtEq.mjEQ_CONNECT:      # data: anchor in body1, anchor in body2
                pa, pb = (np.eye(3), d[0:3]), (np.eye(3), d[3:6])
            else:   # data: anchor in body2, relpose (pos, quat) of body2's anchor frame in body1
                pa, pb = (quat_to_R(d[6:10]), d[3:6]), (np.eye(3), d[0:3])
        kind = "point" if typ == mujoco.mjtEq.mjEQ_CONNECT or d[10] == 0 else "weld"
        out.append(Constraint(kind, fa, fb, placement_a=pa, placement_b=pb, name=nm))
    if skipped:
        warnings.warn(f"{where}: equality constraints jaxdyn does not model are dropped: {skipped}",
                      category=JaxdynWarning, stacklevel=4)
    return out


def load_mjcf(path_or_xml, inertia="warn"):
    """Load an MJCF file, XML string or ``mujoco.MjModel`` into a :class:`~jaxdyn.Model`, or a
    :class:`~jaxdyn.ClosedModel` when it has active connect / weld equalities (see the module
    docstring for the mapping and :func:`from_mujoco` for states).

    ``inertia``: the policy for a non-physical body inertia (as :func:`~jaxdyn.load_urdf`).
    Raises :class:`~jaxdyn.errors.MJCFError` naming the file (MuJoCo's compiler message
    included) for a file MuJoCo rejects or a structure jaxdyn cannot represent."""
    from ..constraints.model import close_loops
    args, cons = parse_mjcf(path_or_xml)
    try:
        model = build_model(triangle="warn", inertia_policy={"warn": "warn", "raise": "raise",
                                                             "repair": "repair"}[inertia], **args)
    except ModelError as e:
        raise MJCFError(f"{args['name']}: {e}") from None
    return close_loops(model, cons) if cons else model


# -- states between MuJoCo's conventions and jaxdyn's (numpy or jax arrays; one state)

def _free_and_balls(model):
    qa, va = model.topology.qaddr, model.topology.vaddr
    jt = model.jtype
    free = [(int(qa[i]), int(va[i])) for i in range(model.nb) if jt[i] == J.FREE]
    quat = [int(qa[i]) + (3 if jt[i] == J.FREE else 0) for i in range(model.nb) if jt[i] in (J.FREE, J.SPHERICAL)]
    return free, quat


def _R_xyzw(q):
    """Rotation of a free joint's stored quaternion (x, y, z, w), normalized."""
    import jax.numpy as jnp

    from ..spatial.rotations import quat_to_rot
    return quat_to_rot(q / jnp.linalg.norm(q))


def from_mujoco(model, qpos, qvel=None, qacc=None, qfrc=None):
    """jaxdyn's (q, v, a, tau) of a MuJoCo state (``None`` in, ``None`` out): quaternions
    [w x y z] -> [x y z w]; a free joint's linear velocity v = R^T qvel, acceleration
    a = R^T qacc - omega x v (the body-frame derivative), force tau = R^T qfrc (R: the body's
    rotation, omega its body-frame angular velocity).  ``model``: the tree (``cm.model`` for a
    ClosedModel)."""
    import jax.numpy as jnp
    model = getattr(model, "model", model)
    free, quat = _free_and_balls(model)
    q = jnp.asarray(qpos)
    for k in quat:
        q = q.at[k:k + 4].set(jnp.roll(q[k:k + 4], -1))
    out = [q, None if qvel is None else jnp.asarray(qvel), None if qacc is None else jnp.asarray(qacc),
           None if qfrc is None else jnp.asarray(qfrc)]
    for qa, va in free:
        R = _R_xyzw(q[qa + 3:qa + 7])
        if out[1] is not None:
            v = R.T @ out[1][va:va + 3]
            if out[2] is not None:
                out[2] = out[2].at[va:va + 3].set(R.T @ out[2][va:va + 3] - jnp.cross(out[1][va + 3:va + 6], v))
            out[1] = out[1].at[va:va + 3].set(v)
        elif out[2] is not None:
            raise ValueError("from_mujoco: qacc of a free joint needs qvel")
        if out[3] is not None:
            out[3] = out[3].at[va:va + 3].set(R.T @ out[3][va:va + 3])
    return tuple(out)


def to_mujoco(model, q, v=None, a=None, tau=None):
    """MuJoCo's (qpos, qvel, qacc, qfrc) of a jaxdyn state: the inverse of :func:`from_mujoco`."""
    import jax.numpy as jnp
    model = getattr(model, "model", model)
    free, quat = _free_and_balls(model)
    q = jnp.asarray(q)
    out = [q, None if v is None else jnp.asarray(v), None if a is None else jnp.asarray(a),
           None if tau is None else jnp.asarray(tau)]
    for qa, va in free:
        R = _R_xyzw(q[qa + 3:qa + 7])
        if out[2] is not None:
            if v is None:
                raise ValueError("to_mujoco: a of a free joint needs v")
            out[2] = out[2].at[va:va + 3].set(R @ (out[2][va:va + 3] + jnp.cross(out[1][va + 3:va + 6],
                                                                                   out[1][va:va + 3])))
        if out[1] is not None:
            out[1] = out[1].at[va:va + 3].set(R @ out[1][va:va + 3])
        if out[3] is not None:
            out[3] = out[3].at[va:va + 3].set(R @ out[3][va:va + 3])
    for k in quat:
        out[0] = out[0].at[k:k + 4].set(jnp.roll(out[0][k:k + 4], 1))
    return tuple(out)


def mass_matrix_to_mujoco(model, q, M):
    """MuJoCo's joint-space inertia (``mj_fullM``) from jaxdyn's M at q: T^T M T with v = T qvel
    (T = R^T on each free joint's linear block, 1 elsewhere)."""
    import jax.numpy as jnp
    model = getattr(model, "model", model)
    free, _ = _free_and_balls(model)
    T = jnp.eye(model.nv, dtype=jnp.result_type(M))
    for qa, va in free:
        T = T.at[va:va + 3, va:va + 3].set(_R_xyzw(jnp.asarray(q)[qa + 3:qa + 7]).T)
    return T.T @ M @ T
