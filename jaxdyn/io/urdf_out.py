"""URDF writer: a :class:`~jaxdyn.Model` as a URDF that :func:`~jaxdyn.load_urdf` and
Pinocchio's ``buildModelFromUrdf`` read back to the same dynamics.

Each body is a link named after the body, attached by a joint named after the body's joint
at its ``Xtree`` (origin xyz, rpy); its inertial at the COM with the body-axes inertia.
REVOLUTE -> ``revolute``, REVOLUTE_UB -> ``continuous``, PRISMATIC -> ``prismatic``,
PLANAR -> ``planar`` (axis z), FIXED -> ``fixed`` (read back merged into the parent body, as
loaders merge fixed joints, so such a body comes back as a frame).  A FREE root body is the URDF's root link
(no joint): read it back with ``floating_base=True`` (Pinocchio: a ``JointModelFreeFlyer``
root).  Other roots hang from one massless root link (the model's world frame name, or
``"world"``).  Named frames other than the bodies' and joints' own are written as massless links on fixed
joints named after them, so they come back as frames (where the name is already a link's or a
joint's, that part is named ``"<name>_frame"``: it comes back as one more frame; the first of
several frames sharing a name may change).  A FREE root's joint comes back as ``"root_joint"``.  Bodies come back in the model's order (where a
body's child joints are not in name order, massless links "<body>_order<k>" on fixed joints
keep them in order: loaders visit child joints by name).  Limits: position limits where finite (a revolute or
prismatic joint with no limits gets ``lower = upper = 0``, which :func:`~jaxdyn.load_urdf`
reads as none), ``effort`` / ``velocity`` where finite (0: none), ``<dynamics damping friction>``.

Not representable in URDF, so refused with :class:`~jaxdyn.errors.ModelError` naming the
body: SPHERICAL and HELICAL joints, a FREE joint that is not the only root.  Dropped with a
warning: non-zero armature, a gravity other than (0, 0, -9.81).  Numbers are written with 17
significant digits (a float64 round trip, up to the rpy conversion's round-off).
"""
from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import JaxdynWarning, ModelError
from ..model import joints as J

_TYPES = {J.REVOLUTE: "revolute", J.REVOLUTE_UB: "continuous", J.PRISMATIC: "prismatic", J.PLANAR: "planar",
          J.FIXED: "fixed"}
_BIG = np.finfo(float).max


def _num(*xs):
    return " ".join(repr(float(x)) for x in xs)


def R_to_rpy(R):
    """URDF roll-pitch-yaw (R = Rz(yaw) Ry(pitch) Rx(roll)) of a rotation matrix."""
    R = np.asarray(R, float)
    pitch = np.arctan2(-R[2, 0], np.hypot(R[0, 0], R[1, 0]))
    if np.hypot(R[0, 0], R[1, 0]) < 1e-12:          # gimbal lock: roll folded into yaw
        return np.array([0.0, pitch, np.arctan2(-R[0, 1], R[1, 1])])
    return np.array([np.arctan2(R[2, 1], R[2, 2]), pitch, np.arctan2(R[1, 0], R[0, 0])])


def _origin(parent, R, p):
    ET.SubElement(parent, "origin", xyz=_num(*p), rpy=_num(*R_to_rpy(R)))


def urdf_string(model) -> str:
    """The URDF text of ``model`` (see the module docstring)."""
    from ..stack import Stack
    if isinstance(model, Stack) or np.ndim(model.mass) != 1:
        raise ModelError("save_urdf needs one Model (not a stack or a model with a batch axis)")
    P = {k: np.asarray(getattr(model, k), float) for k in
         ("Xtree_E", "Xtree_r", "axis", "mass", "com", "inertia", "armature", "damping", "friction", "q_lower",
          "q_upper", "effort_limit", "velocity_limit", "frame_E", "frame_r", "gravity")}
    jt, parent, nb = model.jtype, model.parent, model.nb
    names = model.body_names
    for i in range(nb):
        if int(jt[i]) in (J.SPHERICAL, J.HELICAL):
            raise ModelError(f"save_urdf: {model.name}: body {i} ({names[i]!r}) has a {J.JOINT_NAMES[int(jt[i])]} "
                             "joint, which URDF cannot express")
    roots = [i for i in range(nb) if parent[i] < 0]
    free = [i for i in range(nb) if jt[i] == J.FREE]
    if free and (free != [0] or roots != [0]):
        raise ModelError(f"save_urdf: {model.name}: a FREE joint must be the only root (body 0) to be written "
                         f"as a floating base; FREE bodies {[names[i] for i in free]}, roots {[names[i] for i in roots]}")
    if np.any(P["armature"] != 0):
        warnings.warn(f"save_urdf: {model.name}: armature {P['armature'].tolist()} is not written (URDF has no "
                      "field for it)", category=JaxdynWarning, stacklevel=3)
    if not np.allclose(P["gravity"], (0.0, 0.0, -9.81)):
        warnings.warn(f"save_urdf: {model.name}: gravity {P['gravity'].tolist()} is not written (URDF has "
                      "none; loaders assume (0, 0, -9.81))", category=JaxdynWarning, stacklevel=3)
    fnames, fbody = model.frame_names, model.frame_body
    world = [f for f, b in zip(fnames, fbody) if b < 0]
    rootname = names[0] if free else (world[0] if world else "world")
    robot = ET.Element("robot", name=model.name)
    ET.SubElement(robot, "link", name=rootname)
    link_of = {-1: rootname}
    qa, va = model.topology.qaddr, model.topology.vaddr
    # Loaders number bodies depth first, visiting a link's child joints in name order.  Where a
    # body's children are not in name order (their joints hung from different merged links in
    # the source), each child hangs from a massless link "<parent>_order<k>" on a fixed joint of
    # that name, so that the bodies come back in the model's order.
    hang = {}
    for b in [-1] + list(range(nb)):
        kids = [i for i in range(nb) if parent[i] == b and not (free and i == 0)]
        jn = [model.joint_names[i] for i in kids]
        if jn != sorted(jn):
            for k, i in enumerate(kids):
                hang[i] = f"{names[b] if b >= 0 else rootname}_order{k:04d}"
    for i in range(nb):
        link = robot.find(f"link[@name='{rootname}']") if (free and i == 0) else ET.SubElement(robot, "link",
                                                                                                 name=names[i])
        link_of[i] = link.get("name")
        if P["mass"][i] > 0 or np.any(P["inertia"][i]):
            inl = ET.SubElement(link, "inertial")
            ET.SubElement(inl, "origin", xyz=_num(*P["com"][i]), rpy="0 0 0")
            ET.SubElement(inl, "mass", value=_num(P["mass"][i]))
            I = P["inertia"][i]
            ET.SubElement(inl, "inertia", ixx=_num(I[0, 0]), ixy=_num(I[0, 1]), ixz=_num(I[0, 2]),
                          iyy=_num(I[1, 1]), iyz=_num(I[1, 2]), izz=_num(I[2, 2]))
        if free and i == 0:
            continue
        t = int(jt[i])
        j = ET.SubElement(robot, "joint", name=model.joint_names[i], type=_TYPES[t])
        _origin(j, P["Xtree_E"][i].T, P["Xtree_r"][i])
        up = link_of[int(parent[i])]
        if i in hang:
            ET.SubElement(robot, "link", name=hang[i])
            o = ET.SubElement(robot, "joint", name=hang[i], type="fixed")
            ET.SubElement(o, "parent", link=up)
            ET.SubElement(o, "child", link=hang[i])
            up = hang[i]
        ET.SubElement(j, "parent", link=up)
        ET.SubElement(j, "child", link=names[i])
        if t == J.FIXED:
            continue
        ET.SubElement(j, "axis", xyz=_num(*(P["axis"][i] if t != J.PLANAR else (0, 0, 1))))
        d = int(va[i])
        if t in (J.REVOLUTE, J.PRISMATIC, J.REVOLUTE_UB):
            lim = {}
            if t != J.REVOLUTE_UB:
                lo, hi = P["q_lower"][int(qa[i])], P["q_upper"][int(qa[i])]
                if np.isfinite(lo) or np.isfinite(hi):
                    lim.update(lower=_num(np.clip(lo, -_BIG, _BIG)), upper=_num(np.clip(hi, -_BIG, _BIG)))
            for a, k in (("effort", "effort_limit"), ("velocity", "velocity_limit")):
                x = P[k][d]
                lim[a] = _num(x if np.isfinite(x) else 0.0)
            ET.SubElement(j, "limit", **lim)
        if np.any(P["damping"][d:int(va[i + 1])]) or np.any(P["friction"][d:int(va[i + 1])]):
            ET.SubElement(j, "dynamics", damping=_num(P["damping"][d]), friction=_num(P["friction"][d]))
    # frames other than the bodies' and joints' own (merged fixed links, MJCF sites): a massless
    # link on a fixed joint, both named after the frame ("<name>_frame" where the name is taken:
    # URDF link names and joint names are unique, e.g. a link named like a movable joint)
    links = {rootname} | set(names) | set(hang.values())
    joint_names = set(model.joint_names) | set(hang.values())
    own = {(rootname, -1)} | {(names[i], i) for i in range(nb)} | {(model.joint_names[i], i) for i in range(nb)}
    for f, (nm, b) in enumerate(zip(fnames, fbody)):
        b = int(b)
        identity = np.allclose(P["frame_E"][f], np.eye(3)) and np.allclose(P["frame_r"][f], 0)
        if ((nm, b) in own and identity) or (b < 0 and free):   # a floating base has no world link
            continue
        ln, jn = nm, nm
        while ln in links:
            ln += "_frame"
        while jn in joint_names:
            jn += "_frame"
        links.add(ln)
        joint_names.add(jn)
        ET.SubElement(robot, "link", name=ln)
        j = ET.SubElement(robot, "joint", name=jn, type="fixed")
        _origin(j, P["frame_E"][f].T, P["frame_r"][f])
        ET.SubElement(j, "parent", link=link_of[b])
        ET.SubElement(j, "child", link=ln)
    ET.indent(robot)
    return ET.tostring(robot, encoding="unicode") + "\n"


def save_urdf(model, path) -> str:
    """Write ``model`` (a Model, or a ClosedModel's tree: loop closures are not written) as a
    URDF file at ``path``; returns the path.  See the module docstring for the mapping."""
    model = getattr(model, "model", model)
    text = urdf_string(model)
    d = os.path.dirname(os.path.abspath(str(path)))
    if not os.path.isdir(d):
        raise ModelError(f"save_urdf: folder {d} does not exist")
    with open(path, "w") as fh:
        fh.write('<?xml version="1.0"?>\n' + text)
    return str(path)
