"""Animation viewer: one self-contained HTML file that plays trajectories in any browser, with
no network (a canvas renderer written for jaxdyn, no JavaScript library).

Drawn per robot: a capsule from each body's origin to each child's joint origin (and to the
COM of a leaf), a dot at each joint, and either the robot's visual meshes (``visuals``: the
URDF's STL / OBJ meshes and primitives or an MJCF's geoms, decimated, see
:mod:`jaxdyn.io.meshes`; flat-shaded
opaque triangles) or, without them, a translucent box of each body's equivalent inertia (the
uniform box with the body's mass and principal moments, at the COM along the principal axes;
each half size at most a quarter of the robot's extent, as some URDFs inflate inertias),
and for a :class:`~jaxdyn.ClosedModel` the contact frames of its constraints (RGB axes, a dashed
line between the two frames of a constraint).  Several robots play side by side, each shifted
along the scene's horizontal axis: a list of models, or a :class:`jaxdyn.Stack` with the
trajectory of its lanes (a vmapped rollout), shown lane by lane in each member's own layout.  Controls: play / pause (space), time slider, speed, orbit
(drag) and zoom (wheel); ``animation.html#t=1.5&paused`` opens paused at t = 1.5 s.  The camera
looks at the middle of the whole trajectory, or, when every robot travels more than
:data:`FOLLOW` times its own size (a floating base in free fall, a walk), follows the mean of
their body origins over a ground grid fixed in the world at the trajectory's lowest point.

The page embeds, per robot and per sample, the world pose of every body frame: ``scene(...)``
returns that data (``robots[k]["poses"][n]`` = [p (3), R row-major (9)] per body, R body ->
world, 12 significant digits), equal to :func:`jaxdyn.frame_poses` of the trajectory at the
embedded times
(``robots[k]["t"]``, at most ``max_samples`` samples, evenly strided).
"""
from __future__ import annotations

import json
import os
import warnings
from importlib import resources
from typing import NamedTuple

import numpy as np

from .errors import JaxdynWarning

MAX_SAMPLES = 1500
"""Samples embedded per robot by default (a longer trajectory is strided)."""
FOLLOW = 3.0
"""The camera follows the robots' body origins when the trajectory of every robot spans more than
this many times the robot's own size (its largest extent at one sample)."""


def _as_arrays(traj, t):
    """(t (N,), Q (N, nq)) from a Trajectory (anything with ``.t`` and ``.q``) or an array Q
    with t."""
    if hasattr(traj, "q") and hasattr(traj, "t"):
        return np.asarray(traj.t, float), np.asarray(traj.q, float)
    Q = np.asarray(traj, float)
    if Q.ndim != 2:
        raise ValueError(f"animate: a trajectory is a jaxdyn Trajectory or an array Q (N, nq), got shape {Q.shape}")
    t = np.arange(len(Q), dtype=float) if t is None else np.asarray(t, float)
    if t.shape != (len(Q),):
        raise ValueError(f"animate: t must have shape ({len(Q)},), got {t.shape}")
    return t, Q


def _rows(a):
    """Rows of ``a`` (N, ...) as lists of floats at 12 significant digits (the page's size)."""
    a = np.asarray(a, float).reshape(len(a), -1)
    return [[float(f"{x:.12g}") for x in row] for row in a]


def _geometry(tree):
    """Links (body, child joint origin or leaf COM, body frame) and inertia boxes (body, COM,
    principal axes, half sizes) of a tree."""
    r, com = np.asarray(tree.Xtree_r, float), np.asarray(tree.com, float)
    mass, inertia = np.asarray(tree.mass, float), np.asarray(tree.inertia, float)
    parent = tree.parent
    links, boxes = [], []
    for i in range(tree.nb):
        kids = [c for c in range(tree.nb) if parent[c] == i]
        for c in kids:
            links.append([i, r[c].tolist()])
        if not kids and np.linalg.norm(com[i]) > 1e-9:
            links.append([i, com[i].tolist()])
        if mass[i] > 0:
            w, V = np.linalg.eigh(inertia[i])
            side2 = 6.0 * (w.sum() - 2 * w) / mass[i]          # a^2 = 6 (I2 + I3 - I1) / m
            half = 0.5 * np.sqrt(np.clip(side2, 0.0, None))
            if np.all(np.isfinite(half)) and half.max() > 0:
                boxes.append([i, com[i].tolist(), V.tolist(), half.tolist()])
    return links, boxes


MAX_LANES = 16
"""A :class:`jaxdyn.Stack` of at most this many lanes is shown lane by lane; a larger one by the
first lane of each member robot."""


def _stack_lanes(st, traj, t, names):
    """A Stack and its lanes' trajectory (a Trajectory or Q with leading lane axis, in the
    union's layout) as lists of member models and member-layout trajectories, with names."""
    tk, Q = (traj.t, traj.q) if hasattr(traj, "q") and hasattr(traj, "t") else (t, traj)
    Q = np.asarray(Q, float)
    lanes = len(st.lane_members)
    if Q.ndim != 3 or Q.shape[0] != lanes or Q.shape[2] != st.nq:
        raise ValueError(f"animate: a Stack of {lanes} lanes needs Q ({lanes}, N, {st.nq}) in the union's layout "
                         f"(e.g. a vmapped rollout's Trajectory), got shape {Q.shape}")
    shown = (range(lanes) if lanes <= MAX_LANES else
             [st.lane_members.index(m) for m in sorted(set(st.lane_members))])
    tk = None if tk is None else np.asarray(tk, float)
    models, trajs, labels = [], [], []
    for i in shown:
        m = st.lane_members[i]
        ti = None if tk is None else (tk[i] if tk.ndim == 2 else tk)
        Qi = np.asarray(st.member_q(m, Q[i]))
        models.append(st.lane_model(i))
        trajs.append(_Samples(np.arange(len(Qi), dtype=float) if ti is None else ti, Qi))
        labels.append(names[len(labels)] if names is not None else f"{st.member_names[m]} (lane {i})")
    return models, trajs, labels


class _Samples(NamedTuple):
    t: np.ndarray
    q: np.ndarray


def _meshes(visuals, tree):
    """The scene's meshes of one robot from ``visuals`` (None, the path of a URDF or an MJCF
    file, told apart by their root element, or a list of :class:`jaxdyn.io.meshes.Visual`):
    [[body, vertices (3 n, 5 decimals), faces (3 m)]]."""
    if visuals is None:
        return []
    if isinstance(visuals, (str, os.PathLike)):
        from .io.meshes import mjcf_visuals, urdf_visuals, xml_root_tag
        read = mjcf_visuals if xml_root_tag(str(visuals)) == "mujoco" else urdf_visuals
        visuals = read(str(visuals), tree)
    return [[int(v.body), np.round(np.asarray(v.vertices, float), 5).ravel().tolist(),
             np.asarray(v.faces, int).ravel().tolist()] for v in visuals if len(v.faces)]


def scene(models, trajs, t=None, names=None, max_samples=MAX_SAMPLES, visuals=None) -> dict:
    """The data :func:`animate` embeds: one model (tree or ClosedModel) and one trajectory, a
    list of each (robots side by side), or a :class:`jaxdyn.Stack` with its lanes' trajectory
    (a vmapped rollout: every lane side by side, or the first lane of each member beyond
    :data:`MAX_LANES` lanes).  ``visuals``: for one model, None, the URDF or MJCF file it
    was loaded from (its meshes / geoms are drawn) or a list of
    :class:`jaxdyn.io.meshes.Visual`; for a list of models, a list of those, one per model.
    A trajectory whose q stops being finite (a failed rollout) is shown up to its last finite
    sample, with a warning; a first sample that is not finite raises ValueError.  See the
    module docstring."""
    import jax

    from .stack import Stack
    from .kinematics import frame_poses
    if isinstance(models, Stack):
        if visuals is not None:
            raise ValueError("animate: visuals are not drawn for a Stack (pass its member models as a list)")
        models, trajs, names = _stack_lanes(models, trajs, t, names)
    elif not isinstance(models, (list, tuple)):
        models, trajs, visuals = [models], [trajs], [visuals]
    if len(models) != len(trajs):
        raise ValueError(f"animate: {len(models)} models but {len(trajs)} trajectories")
    visuals = [None] * len(models) if visuals is None else list(visuals)
    if len(visuals) != len(models):
        raise ValueError(f"animate: {len(models)} models but {len(visuals)} entries of visuals")
    names = list(names) if names is not None else None
    robots, own, clouds = [], [], []
    for k, (model, traj) in enumerate(zip(models, trajs)):
        tree = getattr(model, "model", model)
        tk, Q = _as_arrays(traj, t)
        if Q.shape[1] != tree.nq:
            raise ValueError(f"animate: robot {k} ({tree.name!r}) has nq = {tree.nq}, its trajectory {Q.shape[1]} "
                             "columns")
        if not np.all(np.asarray(tree.frame_body)[:tree.nb] == np.arange(tree.nb)):
            raise ValueError(f"animate: robot {k} ({tree.name!r}): its first nb frames must be its body frames")
        idx = np.unique(np.linspace(0, len(Q) - 1, min(len(Q), max_samples)).round().astype(int))
        bad = ~np.isfinite(np.asarray(Q[idx], float)).all(1)
        if bad.any():                            # e.g. a rollout that failed: show it up to the failure
            n = int(np.argmax(bad))
            if n == 0:
                raise ValueError(f"animate: robot {k} ({tree.name!r}): its first sample (t = {tk[idx[0]]:g}) is not "
                                 "finite (NaN or inf in q)")
            warnings.warn(f"animate: robot {k} ({tree.name!r}): q is not finite from t = {tk[idx[n]]:g} on; the "
                          f"page shows the {n} samples before", category=JaxdynWarning, stacklevel=3)
            idx = idx[:n]
        R, p = jax.jit(jax.vmap(frame_poses, (None, 0)))(tree, Q[idx])
        R, p = np.asarray(R, float), np.asarray(p, float)
        poses = np.concatenate([p[:, :tree.nb, :], R[:, :tree.nb].reshape(len(idx), tree.nb, 9)], -1)
        links, boxes = _geometry(tree)
        meshes = _meshes(visuals[k], tree)
        rob = dict(name=names[k] if names else tree.name, t=tk[idx].tolist(), parent=tree.parent.tolist(),
                   poses=_rows(poses), links=links, boxes=[] if meshes else boxes, meshes=meshes)
        if hasattr(model, "frames_a"):        # a ClosedModel: its contact frames
            fr = sorted({f for f in model.frames_a + model.frames_b if f >= 0})
            col = {f: j for j, f in enumerate(fr)}
            rob["contacts"] = dict(
                poses=_rows(np.concatenate([p[:, fr, :], R[:, fr].reshape(len(idx), len(fr), 9)], -1)),
                pairs=[[col.get(a, -1), col.get(b, -1)] for a, b in zip(model.frames_a, model.frames_b)])
        robots.append(rob)
        # bounds: body origins and COMs over the trajectory
        pts = np.concatenate([p[:, :tree.nb], p[:, :tree.nb] + np.einsum("nbij,bj->nbi", R[:, :tree.nb],
                                                                            np.asarray(tree.com, float))], 1)
        clouds.append(pts.reshape(-1, 3) if tree.nb else np.zeros((1, 3)))
        own.append(max(float(np.max(pts.max(1) - pts.min(1))), 0.2) if tree.nb else 0.2)
    lo, hi = [c.min(0) for c in clouds], [c.max(0) for c in clouds]
    g = np.asarray(getattr(models[0], "model", models[0]).gravity, float)
    up = -g / np.linalg.norm(g) if np.linalg.norm(g) > 0 else np.array([0.0, 0.0, 1.0])
    sizes = [max(float(np.max(h - lw)), 0.2) for lw, h in zip(lo, hi)]
    follow = all(s > FOLLOW * o for s, o in zip(sizes, own))     # every robot travels far (a fall, a walk)
    if follow:
        sizes = own
    across = np.cross(up, [1.0, 0, 0]) if abs(up[0]) < 0.9 else np.cross(up, [0, 1.0, 0])
    across /= np.linalg.norm(across)
    spacing = 1.5 * max(sizes)
    centers = []
    for k, rob in enumerate(robots):
        for box in rob["boxes"]:          # an inertia box no wider than half the robot (inflated URDF inertias)
            box[3] = np.minimum(box[3], 0.25 * sizes[k]).tolist()
        off = across * spacing * (k - (len(robots) - 1) / 2) - 0.5 * (lo[k] + hi[k]) * (len(robots) > 1)
        off -= up * np.dot(up, off)          # shift across, not up or down
        rob["offset"] = off.tolist()
        centers.append(0.5 * (lo[k] + hi[k]) + off)
    center = np.mean(centers, 0)
    low = max(float(np.dot(up, center - (lo[k] + np.asarray(robots[k]["offset"])))) for k in range(len(robots)))
    extent = max(0.5 * spacing * len(robots), max(sizes))
    floor = min(float(np.min((c + np.asarray(r["offset"])) @ up)) for c, r in zip(clouds, robots))
    return dict(robots=robots, up=up.tolist(), center=center.tolist(), extent=extent, low=low,
                radius=0.025 * max(sizes), follow=bool(follow), floor=floor)


def animate(models, trajs, path, t=None, title=None, names=None, max_samples=MAX_SAMPLES, visuals=None) -> str:
    """Write the animation of ``trajs`` (Trajectory, or Q (N, nq) with times ``t``) of
    ``models`` (one, a list, or a :class:`jaxdyn.Stack` with its lanes' trajectory, see
    :func:`scene`; ``visuals``, e.g. the URDF path, draws the robot's meshes) to the HTML file
    ``path``; returns the path."""
    data = scene(models, trajs, t, names, max_samples, visuals)
    template = resources.files("jaxdyn").joinpath("viewer.html").read_text()
    title = title or " | ".join(r["name"] for r in data["robots"])
    html = (template.replace("__TITLE__", _escape(title))
            .replace("__SCENE__", json.dumps(data, separators=(",", ":")).replace("</", "<\\/")))
    d = os.path.dirname(os.path.abspath(str(path)))
    os.makedirs(d, exist_ok=True)
    with open(path, "w") as fh:
        fh.write(html)
    return str(path)


def _escape(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def read_scene(path) -> dict:
    """The scene embedded in an HTML file written by :func:`animate`."""
    with open(path) as fh:
        text = fh.read()
    a = text.index('<script id="scene" type="application/json">') + len('<script id="scene" type="application/json">')
    return json.loads(text[a:text.index("</script>", a)].replace("<\\/", "</"))
