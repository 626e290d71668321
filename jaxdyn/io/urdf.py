"""URDF loader (stdlib XML): fixed joints merged into their parent body, frames kept by name.

Joint order and q/v conventions match Pinocchio's ``buildModelFromUrdf``: depth-first from the
root link, the child joints of each link visited in joint-name order (urdfdom keeps joints in
a name-sorted map); ``continuous`` -> REVOLUTE_UB (q = cos, sin); ``floating_base=True`` adds
a FREE root joint (q = [x, y, z, qx, qy, qz, qw], v = [linear; angular] in the base frame).
The root link's inertia is dropped for a fixed base (it is attached to the world).
``package://`` mesh references and all visual / collision elements are ignored.

Decisions on incomplete or unusual data (each as Pinocchio, warned where data is dropped):
a revolute / prismatic joint without <limit> gets infinite limits (urdfdom would reject it);
<mimic> is ignored with a warning (independent dof); a joint axis that is not a unit vector is
normalized with a warning (a zero axis is an error); an incomplete <inertial> is read as
urdfdom reads it (see ``_inertial``); a link mass above ``MAX_MASS`` is an error; a robot whose
joints are all fixed loads as an empty tree (nb = nq = nv = 0) with its frames.  The walk is
iterative and linear in the number of links (no recursion limit).
"""
from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import JaxdynWarning, ModelError, URDFError
from ..model import joints as J
from ..model.model import build_model
from ..model.validate import check_inertia


def rpy_to_R(rpy):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp_, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp_], [0, 1, 0], [-sp_, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


class _Ctx:
    def __init__(self, path, inertia="warn"):
        self.path = path
        self.inertia = inertia

    def err(self, where, msg):
        return URDFError(f"{self.path}: {where}: {msg}")

    def floats(self, el, attr, n, where, default=None):
        s = el.get(attr) if el is not None else None
        if s is None:
            if default is None:
                raise self.err(where, f"missing attribute {attr!r}")
            return np.asarray(default, float)
        try:
            v = np.array([float(x) for x in s.split()], float)
        except ValueError:
            raise self.err(where, f"attribute {attr}={s!r} is not numeric") from None
        if v.shape != (n,) or not np.all(np.isfinite(v)):
            raise self.err(where, f"attribute {attr}={s!r} must be {n} finite numbers")
        return v

    def origin(self, el, where):
        o = el.find("origin") if el is not None else None
        xyz = self.floats(o, "xyz", 3, where + "/origin", (0, 0, 0))
        rpy = self.floats(o, "rpy", 3, where + "/origin", (0, 0, 0))
        return rpy_to_R(rpy), xyz


MAX_MASS = 1e30
"""Largest link mass accepted (kg; the Sun is 2e30 kg): beyond it products in the dynamics
overflow float64 and results become inf."""


def _inertial(ctx, link):
    """(m, c (3,), Ic (3, 3) rotated into the link frame) of a link's <inertial>.

    Incomplete data is read as Pinocchio (urdfdom) reads it, with a warning: a <mass> missing
    or without value drops the whole <inertial> (massless link); an <inertia> missing or
    lacking one of its six attributes keeps mass and COM with zero rotational inertia.
    """
    where = f"link {link.get('name')!r}"
    el = link.find("inertial")
    if el is None:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    R, c = ctx.origin(el, where + "/inertial")
    m_el = el.find("mass")
    if m_el is None or m_el.get("value") is None:
        warnings.warn(f"{ctx.path}: {where}/inertial: <mass> {'is missing' if m_el is None else 'has no value'}; "
                      "the whole <inertial> is ignored (massless link), as Pinocchio does",
                      category=JaxdynWarning, stacklevel=4)
        return 0.0, np.zeros(3), np.zeros((3, 3))
    m = float(ctx.floats(m_el, "value", 1, where + "/inertial/mass")[0])
    if m < 0:
        raise ctx.err(where + "/inertial/mass", f"negative mass {m}")
    if m > MAX_MASS:
        raise ctx.err(where + "/inertial/mass", f"mass {m:g} kg exceeds {MAX_MASS:g} kg (dynamics would overflow)")
    i_el = el.find("inertia")
    keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
    missing = ["<inertia>"] if i_el is None else [k for k in keys if i_el.get(k) is None]
    if missing:
        warnings.warn(f"{ctx.path}: {where}/inertial: missing {', '.join(missing)}; rotational inertia "
                      "taken as zero (mass and COM kept), as Pinocchio does", category=JaxdynWarning, stacklevel=4)
        return m, c, np.zeros((3, 3))
    vals = {k: float(ctx.floats(i_el, k, 1, where + "/inertial/inertia")[0]) for k in keys}
    I = np.array([[vals["ixx"], vals["ixy"], vals["ixz"]],
                  [vals["ixy"], vals["iyy"], vals["iyz"]],
                  [vals["ixz"], vals["iyz"], vals["izz"]]])
    try:
        I = check_inertia(I, m, f"{ctx.path}: {where}/inertial/inertia", ctx.inertia, triangle="warn")
    except ModelError as e:
        raise URDFError(str(e)) from None
    return m, c, R @ I @ R.T


def combine_bodies(m1, c1, I1, m2, c2, I2):
    """Two rigid bodies in the same frame: total mass, COM, inertia about the new COM."""
    m = m1 + m2
    if m <= 0:
        return 0.0, np.zeros(3), I1 + I2
    c = (m1 * c1 + m2 * c2) / m

    def shift(mi, ci, Ii):
        d = ci - c
        return Ii + mi * (np.dot(d, d) * np.eye(3) - np.outer(d, d))

    return m, c, shift(m1, c1, I1) + shift(m2, c2, I2)


def _joint_data(ctx, el, where, typ):
    """(joint code, unit axis, lower, upper, damping, friction, effort, velocity) of a movable
    <joint> (effort / velocity None where absent or 0: no limit, as urdfdom's default 0 means;
    damping and Coulomb friction from ``<dynamics>``, 0 where absent)."""
    ax = ctx.floats(el.find("axis"), "xyz", 3, where + "/axis", (1, 0, 0))
    n = np.linalg.norm(ax)
    if not n > 0:
        raise ctx.err(where + "/axis", f"axis {ax.tolist()} has no direction")
    if abs(n - 1) > 1e-3:
        warnings.warn(f"{ctx.path}: {where}/axis: axis {ax.tolist()} is not a unit vector; it is normalized "
                      "(as Pinocchio's buildModelFromUrdf does)", category=JaxdynWarning, stacklevel=3)
    lim = el.find("limit")
    lo = hi = None
    if typ in ("revolute", "prismatic") and lim is not None:
        lo = float(ctx.floats(lim, "lower", 1, where + "/limit", (0.0,))[0])
        hi = float(ctx.floats(lim, "upper", 1, where + "/limit", (0.0,))[0])
        if lo == 0.0 and hi == 0.0:
            lo = hi = None
    effort = velocity = None
    if typ in ("revolute", "continuous", "prismatic") and lim is not None:
        effort, velocity = (float(ctx.floats(lim, a, 1, where + "/limit", (0.0,))[0]) or None
                            for a in ("effort", "velocity"))
        for a, x in (("effort", effort), ("velocity", velocity)):
            if x is not None and x < 0:
                raise ctx.err(where + "/limit", f"{a}={x} must be nonnegative (0: no limit)")
    dyn = el.find("dynamics")
    damping, friction = (float(ctx.floats(dyn, a, 1, where + "/dynamics", (0.0,))[0]) if dyn is not None else 0.0
                         for a in ("damping", "friction"))
    for a, x in (("damping", damping), ("friction", friction)):
        if x < 0:
            raise ctx.err(where + "/dynamics", f"{a}={x} must be nonnegative")
    jt = {"revolute": J.REVOLUTE, "continuous": J.REVOLUTE_UB, "prismatic": J.PRISMATIC,
          "floating": J.FREE, "planar": J.PLANAR}[typ]
    return jt, ax / n, lo, hi, damping, friction, effort, velocity


def parse_urdf(path_or_string, floating_base=False, inertia="warn"):
    """Parse URDF text or file into the arguments of :func:`build_model` (``inertia``: the policy
    for non-physical link inertias, see :func:`load_urdf`)."""
    if len(str(path_or_string)) < 4096 and os.path.isdir(str(path_or_string)):
        raise URDFError(f"{path_or_string}: is a directory, not a URDF file")
    if os.path.exists(str(path_or_string)) if len(str(path_or_string)) < 4096 else False:
        path = str(path_or_string)
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except OSError as e:
            raise URDFError(f"{path}: cannot be read: {e}") from None
    else:
        path, text = "<string>", path_or_string
    ctx = _Ctx(path, inertia)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise URDFError(f"{path}: not valid XML: {e}") from None
    if root.tag != "robot":
        raise URDFError(f"{path}: root element is <{root.tag}>, expected <robot>")
    links = {}
    for el in root.findall("link"):
        nm = el.get("name")
        if not nm:
            raise URDFError(f"{path}: a <link> has no name")
        if nm in links:
            raise URDFError(f"{path}: duplicate link {nm!r}")
        links[nm] = el
    if not links:
        raise URDFError(f"{path}: <robot> has no <link>")
    joints = {}
    child_of = {}
    for el in root.findall("joint"):
        nm = el.get("name")
        where = f"joint {nm!r}"
        if not nm:
            raise URDFError(f"{path}: a <joint> has no name")
        typ = el.get("type")
        if typ not in ("revolute", "continuous", "prismatic", "fixed", "floating", "planar"):
            raise ctx.err(where, f"unknown joint type {typ!r}")
        p_el, c_el = el.find("parent"), el.find("child")
        if p_el is None or c_el is None:
            raise ctx.err(where, "needs <parent link=...> and <child link=...>")
        par, chi = p_el.get("link"), c_el.get("link")
        if par not in links:
            raise ctx.err(where, f"parent link {par!r} does not exist")
        if chi not in links:
            raise ctx.err(where, f"child link {chi!r} does not exist")
        if chi in child_of:
            raise ctx.err(where, f"link {chi!r} already has parent joint {child_of[chi]!r} "
                                 "(the URDF graph must be a tree)")
        child_of[chi] = nm
        joints[nm] = el
        if el.find("mimic") is not None:
            warnings.warn(f"{path}: {where}: <mimic> is ignored; the joint is simulated as an independent "
                          "degree of freedom (as Pinocchio's buildModelFromUrdf does by default)",
                          category=JaxdynWarning, stacklevel=3)
    roots = [l for l in links if l not in child_of]
    if len(roots) != 1:
        if not roots:
            raise URDFError(f"{path}: every link has a parent: the joints form a cycle")
        raise URDFError(f"{path}: {len(roots)} root links {roots}; a URDF must be one tree")
    children = {l: [] for l in links}
    for nm in sorted(joints):
        children[joints[nm].find("parent").get("link")].append(nm)

    # Depth-first build.  Each link maps to (body index or -1, R, p placement in that body).
    bodies = []  # dicts
    frames = []  # (name, body, E, r)
    link_at = {}

    def add_inertia(b, R, p, link):
        m, c, I = _inertial(ctx, links[link])
        if b < 0 or m == 0 and not np.any(I):
            return
        mb, cb, Ib = bodies[b]["m"], bodies[b]["c"], bodies[b]["I"]
        bodies[b]["m"], bodies[b]["c"], bodies[b]["I"] = combine_bodies(mb, cb, Ib, m, R @ c + p, R @ I @ R.T)

    def new_body(name, jname, jt, parent, R, p, axis, lo, hi, damping, friction=0.0, effort=None, velocity=None):
        bodies.append(dict(name=name, jname=jname, jt=jt, parent=parent, R=R, p=p, axis=axis, lo=lo, hi=hi,
                           damping=damping, friction=friction, effort=effort, velocity=velocity, m=0.0, c=np.zeros(3),
                           I=np.zeros((3, 3))))
        return len(bodies) - 1

    rootl = roots[0]
    if floating_base:
        b0 = new_body(rootl, "root_joint", J.FREE, -1, np.eye(3), np.zeros(3), np.array([0, 0, 1.0]),
                      None, None, None)
        link_at[rootl] = (b0, np.eye(3), np.zeros(3))
        add_inertia(b0, np.eye(3), np.zeros(3), rootl)
        frames.append(("root_joint", b0, np.eye(3), np.zeros(3)))
    else:
        link_at[rootl] = (-1, np.eye(3), np.zeros(3))
    frames.append((rootl, link_at[rootl][0], np.eye(3), np.zeros(3)))
    # Iterative depth-first walk over joints (no recursion limit): popping a joint creates its
    # child body, then pushes that link's child joints in reverse name order, so bodies are
    # numbered exactly as Pinocchio's recursive visit numbers them.
    visited = {rootl}
    stack = list(reversed(children[rootl]))
    while stack:
        jn = stack.pop()
        el = joints[jn]
        where = f"joint {jn!r}"
        chi = el.find("child").get("link")
        b, Rl, pl = link_at[el.find("parent").get("link")]
        visited.add(chi)
        Ro, po = ctx.origin(el, where)
        R, p = Rl @ Ro, Rl @ po + pl  # joint frame in body b
        typ = el.get("type")
        if typ == "fixed":
            link_at[chi] = (b, R, p)
            frames.append((jn, b, R.T, p))
            frames.append((chi, b, R.T, p))
            add_inertia(b, R, p, chi)
        else:
            jt, ax, lo, hi, damping, friction, effort, velocity = _joint_data(ctx, el, where, typ)
            nb_ = new_body(chi, jn, jt, b, R, p, ax, lo, hi, damping, friction, effort, velocity)
            link_at[chi] = (nb_, np.eye(3), np.zeros(3))
            frames.append((jn, nb_, np.eye(3), np.zeros(3)))
            frames.append((chi, nb_, np.eye(3), np.zeros(3)))
            add_inertia(nb_, np.eye(3), np.zeros(3), chi)
        stack.extend(reversed(children[chi]))
    lost = sorted(set(links) - visited)
    if lost:
        raise URDFError(f"{path}: links {lost[:10]} are not reachable from root link {rootl!r}: "
                        "their joints form a cycle")
    name = root.get("name") or os.path.splitext(os.path.basename(path))[0]
    lo, hi, damp, fric, eff, vel = [], [], [], [], [], []
    for bd in bodies:
        nq_, nv_ = J.NQ[bd["jt"]], J.NV[bd["jt"]]
        if bd["lo"] is not None:
            lo.append([bd["lo"]]); hi.append([bd["hi"]])
        else:
            lo.append([-np.inf] * nq_); hi.append([np.inf] * nq_)
        damp.append([bd["damping"] or 0.0] * nv_)
        fric.append([bd["friction"] or 0.0] * nv_)
        eff.append([bd["effort"] or np.inf] * nv_)
        vel.append([bd["velocity"] or np.inf] * nv_)
    cat = lambda xs: np.concatenate([np.asarray(x, float) for x in xs]) if xs else np.zeros(0)
    return tree_arguments(bodies, frames, name, q_lower=cat(lo), q_upper=cat(hi), damping=cat(damp),
                          friction=cat(fric), effort_limit=cat(eff), velocity_limit=cat(vel))


def tree_arguments(bodies, frames, name, **joint_data):
    """The arguments of :func:`build_model` from a loader's list of body dicts (keys name,
    jname, jt, parent, R (joint frame -> parent body), p, axis, m, c, I), its frames and the
    per-q / per-dof arrays ``joint_data``."""
    nb = len(bodies)
    return dict(
        parent=[bd["parent"] for bd in bodies], jtype=[bd["jt"] for bd in bodies],
        Xtree_E=np.array([bd["R"].T for bd in bodies]).reshape(nb, 3, 3),
        Xtree_r=np.array([bd["p"] for bd in bodies]).reshape(nb, 3),
        axis=np.array([bd["axis"] for bd in bodies]).reshape(nb, 3), mass=np.array([bd["m"] for bd in bodies]),
        com=np.array([bd["c"] for bd in bodies]).reshape(nb, 3),
        inertia=np.array([bd["I"] for bd in bodies]).reshape(nb, 3, 3),
        body_names=[bd["name"] for bd in bodies], joint_names=[bd["jname"] for bd in bodies],
        frames=frames, name=name, **joint_data)


def load_urdf(path, floating_base=False, gravity=(0.0, 0.0, -9.81), inertia="warn"):
    """Load a URDF file (or XML string) into a :class:`~jaxdyn.Model`.

    ``inertia``: what a link whose inertia is not physical does (not positive semidefinite
    beyond round-off, or violating the triangle inequality): ``"warn"`` (default) keeps it as
    given, as Pinocchio does, and warns; ``"raise"`` raises URDFError; ``"repair"`` replaces it
    by a nearby valid inertia and warns with the change (:mod:`jaxdyn.model.validate`).

    Raises :class:`~jaxdyn.errors.URDFError` naming the file and element for malformed input.
    """
    if isinstance(path, (str, os.PathLike)) and not str(path).lstrip().startswith("<") \
            and not os.path.exists(str(path)):
        raise URDFError(f"{path}: no such file")
    args = parse_urdf(path, floating_base, inertia)
    try:   # link inertias were checked one by one (named by link): no second, per-body check
        return build_model(gravity=gravity, triangle="warn", inertia_policy="skip", **args)
    except URDFError:
        raise
    except Exception as e:  # ModelError from validation: prefix the file
        raise URDFError(f"{path}: {e}") from None
