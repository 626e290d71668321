"""Visual geometry of a URDF or an MJCF model for the viewer: meshes and primitives as
triangle lists in jaxdyn's body frames, decimated to a face budget.

:func:`urdf_visuals` reads each link's ``<visual>`` elements: ``<mesh filename scale>`` in
STL (binary or ASCII) or OBJ, ``<box size>``, ``<cylinder radius length>`` (axis z) and
``<sphere radius>``, at the visual's ``<origin xyz rpy>``.  A visual mesh in another format
(e.g. COLLADA ``.dae``, common in example-robot-data) is replaced by the link's first
``<collision>`` geometry that can be read (documented in the result: ``source`` names the
element used); a link with neither draws nothing (the viewer's skeleton still shows it).
``package://PKG/REST`` is resolved against the folders above the URDF (``.../PKG/REST``, or
``.../REST`` inside a folder named PKG); ``file://`` and relative paths against the URDF's
folder.  Links merged into a body by fixed joints keep their placement (the link is a frame
of the model).

:func:`mjcf_visuals` reads the geoms of MuJoCo's compiled model (see its docstring).

Decimation (:func:`decimate`) is vertex clustering on a grid (Rossignac and Borrel 1993):
vertices in one cell merge to their mean; faces that collapse are dropped.
"""
from __future__ import annotations

import os
import struct
import xml.etree.ElementTree as ET
from typing import NamedTuple

import numpy as np

from ..errors import MJCFError, URDFError
from .urdf import rpy_to_R

READABLE = (".stl", ".obj")
"""Mesh file types :func:`read_mesh` reads."""


class Visual(NamedTuple):
    """One visual: triangles in the body frame of ``body`` (-1: fixed to the world, in world
    coordinates; e.g. a fixed-base robot's base link)."""
    body: int
    vertices: np.ndarray   # (n, 3) body-frame coordinates (m)
    faces: np.ndarray      # (m, 3) vertex indices
    source: str            # what was drawn: "<link>/<visual|collision>[<k>] <what>", e.g.
    #                        "panda_link3/collision[0] mesh link3.stl" (k: the element's index in its link)


def read_mesh(path):
    """(vertices (n, 3), faces (m, 3)) of an STL (binary or ASCII) or OBJ file; duplicate
    STL vertices merged.  Unknown types and unreadable files raise :class:`URDFError`."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in READABLE:
        raise URDFError(f"{path}: mesh type {ext!r} is not read (only {READABLE})")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise URDFError(f"{path}: cannot read the mesh ({e.strerror})") from None
    try:
        if ext == ".obj":
            return _obj(data.decode("utf-8", "replace"))
        return _stl(data)
    except (ValueError, IndexError, struct.error) as e:
        raise URDFError(f"{path}: not a valid {ext[1:].upper()} mesh ({e})") from None


def _stl(data):
    n = struct.unpack("<I", data[80:84])[0] if len(data) >= 84 else -1
    if n >= 0 and len(data) == 84 + 50 * n:                 # binary
        rec = np.frombuffer(data, dtype=np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]),
                            count=n, offset=84)
        tri = rec["v"].astype(float)
    else:                                                   # ASCII: "vertex x y z" lines
        words = data.decode("ascii", "replace").split()
        vals = [float(words[i + 1 + k]) for i, w in enumerate(words) if w == "vertex" for k in range(3)]
        tri = np.asarray(vals, float).reshape(-1, 3, 3)
    if not len(tri):
        raise ValueError("no triangles")
    V, inv = np.unique(tri.reshape(-1, 3).round(9), axis=0, return_inverse=True)
    return V, inv.reshape(-1, 3)


def _obj(text):
    V, F = [], []
    for line in text.splitlines():
        w = line.split()
        if not w:
            continue
        if w[0] == "v":
            V.append([float(x) for x in w[1:4]])
        elif w[0] == "f":
            idx = [int(x.split("/")[0]) for x in w[1:]]
            idx = [i - 1 if i > 0 else len(V) + i for i in idx]
            F += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
    if not F:
        raise ValueError("no faces")
    return np.asarray(V, float), np.asarray(F, int)


def decimate(V, F, max_faces):
    """At most ``max_faces`` faces by vertex clustering on ever coarser grids over the mesh's
    bounding box.  Returns (vertices, faces)."""
    V, F = np.asarray(V, float), np.asarray(F, int)
    if len(F) <= max_faces:
        return V, F
    lo, size = V.min(0), np.ptp(V, 0).max() or 1.0
    for res in (256, 128, 96, 64, 48, 32, 24, 16, 12, 8, 6, 4, 3, 2):
        cell = np.floor((V - lo) / size * (res - 1e-9)).astype(int)
        _, label = np.unique(cell, axis=0, return_inverse=True)
        label = label.reshape(-1)
        W = np.zeros((label.max() + 1, 3))
        np.add.at(W, label, V)
        W /= np.bincount(label)[:, None]
        G = label[F]
        G = G[(G[:, 0] != G[:, 1]) & (G[:, 1] != G[:, 2]) & (G[:, 0] != G[:, 2])]
        first = np.unique(np.sort(G, 1), axis=0, return_index=True)[1]
        G = G[np.sort(first)]
        if len(G) <= max_faces:
            break
    used, G = np.unique(G, return_inverse=True)
    return W[used], G.reshape(-1, 3)


def _floats(el, attr, n, default):
    s = el.get(attr) if el is not None else None
    if s is None:
        return np.asarray(default, float)
    v = np.asarray([float(x) for x in s.split()], float)
    return v if v.size == n else np.asarray(default, float)


def _box(size):
    c = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * 0.5 * size
    F = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6], [0, 2, 6],
         [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    return c, np.asarray(F)


def _cylinder(radius, length, k=16):
    a = 2 * np.pi * np.arange(k) / k
    ring = np.stack([radius * np.cos(a), radius * np.sin(a), np.zeros(k)], 1)
    V = np.vstack([ring + [0, 0, -length / 2], ring + [0, 0, length / 2], [[0, 0, -length / 2], [0, 0, length / 2]]])
    F = []
    for i in range(k):
        j = (i + 1) % k
        F += [[i, j, k + j], [i, k + j, k + i], [2 * k, j, i], [2 * k + 1, k + i, k + j]]
    return V, np.asarray(F)


def _sphere(radius, n=8):
    th, ph = np.linspace(0, np.pi, n + 1), np.linspace(0, 2 * np.pi, 2 * n, endpoint=False)
    V = np.array([[np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)] for t in th for p in ph]) * radius
    m = 2 * n
    F = []
    for i in range(n):
        for j in range(m):
            a, b, c, d = i * m + j, i * m + (j + 1) % m, (i + 1) * m + j, (i + 1) * m + (j + 1) % m
            F += [[a, c, d], [a, d, b]]
    return V, np.asarray(F)


def _resolve(filename, urdf_dir):
    """The file a URDF mesh filename points at, or None."""
    if filename.startswith("file://"):
        filename = filename[7:]
    if not filename.startswith("package://"):
        p = filename if os.path.isabs(filename) else os.path.join(urdf_dir, filename)
        return p if os.path.isfile(p) else None
    pkg, _, rest = filename[len("package://"):].partition("/")
    d = os.path.abspath(urdf_dir)
    while True:
        for cand in ((os.path.join(d, rest),) if os.path.basename(d) == pkg else ()) + (os.path.join(d, pkg, rest),):
            if os.path.isfile(cand):
                return cand
        if os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)


def _geometry(el, urdf_dir):
    """(V, F, description) of a <visual>/<collision> element in its link's frame, or a reason
    string why it cannot be drawn."""
    geo = el.find("geometry")
    if geo is None or not len(geo):
        return "no geometry"
    g = geo[0]
    if g.tag == "mesh":
        fn = g.get("filename", "")
        path = _resolve(fn, urdf_dir)
        if path is None:
            return f"mesh {fn!r} not found"
        if os.path.splitext(path)[1].lower() not in READABLE:
            return f"mesh {os.path.basename(path)!r} is not STL/OBJ"
        V, F = read_mesh(path)
        V = V * _floats(g, "scale", 3, (1, 1, 1))
        what = f"mesh {os.path.basename(path)}"
    elif g.tag == "box":
        V, F = _box(_floats(g, "size", 3, (0, 0, 0)))
        what = "box"
    elif g.tag == "cylinder":
        V, F = _cylinder(float(g.get("radius", 0)), float(g.get("length", 0)))
        what = "cylinder"
    elif g.tag == "sphere":
        V, F = _sphere(float(g.get("radius", 0)))
        what = "sphere"
    else:
        return f"geometry <{g.tag}> is not drawn"
    o = el.find("origin")
    R, p = rpy_to_R(_floats(o, "rpy", 3, (0, 0, 0))), _floats(o, "xyz", 3, (0, 0, 0))
    return V @ R.T + p, F, what


def urdf_visuals(path, model, max_faces=8000) -> list:
    """The :class:`Visual` s of the URDF ``path`` for ``model`` (loaded from that URDF), in
    body frames, at most ``max_faces`` faces in all (each mesh's budget in proportion to its
    size, at least 60).  See the module docstring."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise URDFError(f"{path}: cannot read for its visuals ({e})") from None
    urdf_dir = os.path.dirname(os.path.abspath(path))
    names = list(model.frame_names)
    fE, fr, fb = np.asarray(model.frame_E, float), np.asarray(model.frame_r, float), np.asarray(model.frame_body)
    found = []
    for link in root.iter("link"):
        name = link.get("name")
        if name not in names:
            continue
        f = names.index(name)
        for k, el in enumerate(list(link.findall("visual")) or [None]):
            got = _geometry(el, urdf_dir) if el is not None else "no visual"
            kind = f"visual[{k}]"
            if isinstance(got, str):                      # e.g. a .dae visual: the first readable collision
                for j, c in enumerate(link.findall("collision")):
                    alt = _geometry(c, urdf_dir)
                    if not isinstance(alt, str):
                        got, kind = alt, f"collision[{j}]"
                        break
            if isinstance(got, str):
                continue
            V, F, what = got
            # link frame -> body frame: x_body = E^T x_link + r (the frame's Plücker transform)
            found.append((int(fb[f]), V @ fE[f] + fr[f], F, f"{name}/{kind} {what}"))
    return _budget(found, max_faces)


def _budget(found, max_faces):
    """:class:`Visual` s of (body, V, F, source) tuples, each mesh decimated to its share of
    ``max_faces`` (in proportion to its size, at least 60)."""
    total = sum(len(F) for _, _, F, _ in found) or 1
    out = []
    for b, V, F, src in found:
        V, F = decimate(V, F, max(60, int(max_faces * len(F) / total)))
        out.append(Visual(b, V, F, src))
    return out


_MJ_PRIMITIVES = {2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box", 7: "mesh"}   # mjtGeom


def xml_root_tag(path):
    """The root element's tag of an XML file ("robot" for a URDF, "mujoco" for an MJCF), or
    None if it cannot be read."""
    try:
        for _, el in ET.iterparse(path, events=("start",)):
            return el.tag
    except (ET.ParseError, OSError):
        return None
    return None


def _mj_geom(m, g):
    """(V, F) of MuJoCo geom ``g`` (a kind of :data:`_MJ_PRIMITIVES`) in its own frame (sizes
    as MuJoCo's ``geom_size``)."""
    kind, size = _MJ_PRIMITIVES[int(m.geom_type[g])], np.asarray(m.geom_size[g], float)
    if kind == "sphere":
        return _sphere(size[0])
    if kind == "capsule":                        # radius, half-length along z
        V, F = _sphere(size[0])
        return V + np.where(V[:, 2:] >= 0, 1.0, -1.0) * [0, 0, size[1]], F
    if kind == "ellipsoid":
        V, F = _sphere(1.0)
        return V * size, F
    if kind == "cylinder":
        return _cylinder(size[0], 2 * size[1])
    if kind == "box":
        return _box(2 * size)
    k = int(m.geom_dataid[g])
    va, vn, fa, fn = (int(x[k]) for x in (m.mesh_vertadr, m.mesh_vertnum, m.mesh_faceadr, m.mesh_facenum))
    return np.asarray(m.mesh_vert[va:va + vn], float), np.asarray(m.mesh_face[fa:fa + fn], int)


def mjcf_visuals(path_or_xml, model, max_faces=8000) -> list:
    """The :class:`Visual` s of an MJCF model (a file, an XML string or a ``mujoco.MjModel``)
    for ``model`` (loaded from it by :func:`jaxdyn.load_mjcf`), in body frames, at most
    ``max_faces`` faces in all.  The geoms MuJoCo's viewer shows by default are drawn: groups
    0-2, not fully transparent; spheres, capsules, ellipsoids, cylinders, boxes and meshes (as
    MuJoCo compiled them: ``geom_pos`` / ``geom_quat`` place the mesh in its body); planes,
    height fields and SDFs are not drawn (the viewer draws its own ground grid).  Geoms of the
    world body are fixed in the world (body -1)."""
    import mujoco
    from .mjcf import body_names, compile_mjcf, quat_to_R
    m, where = compile_mjcf(path_or_xml)
    tree = getattr(model, "model", model)
    names = list(tree.frame_names)
    fE, fr, fb = np.asarray(tree.frame_E, float), np.asarray(tree.frame_r, float), np.asarray(tree.frame_body)
    bname = body_names(m)
    found = []
    for g in range(m.ngeom):
        t, b = int(m.geom_type[g]), int(m.geom_bodyid[g])
        if t not in _MJ_PRIMITIVES or m.geom_group[g] > 2 or m.geom_rgba[g, 3] == 0:
            continue
        if b == 0:
            E, r, body = np.eye(3), np.zeros(3), -1
        elif bname[b] in names:
            f = names.index(bname[b])
            E, r, body = fE[f], fr[f], int(fb[f])
        else:
            raise MJCFError(f"{where}: body {bname[b]!r} is not a frame of the model {tree.name!r} "
                            "(was it loaded from this MJCF?)")
        V, F = _mj_geom(m, g)
        V = V @ quat_to_R(m.geom_quat[g]).T + m.geom_pos[g]          # geom frame -> MuJoCo body frame
        gname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
        found.append((body, V @ E + r, F, f"{bname[b]}/{gname} {_MJ_PRIMITIVES[t]}"))
    return _budget(found, max_faces)
