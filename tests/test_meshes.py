"""Visual geometry for the viewer (jaxdyn.io.meshes): STL (binary, ASCII) and OBJ readers on a
cube written here, decimation to a face budget, and every visual of example-robot-data URDFs
placed where Pinocchio's GeometryModel places it (its world placement after
updateGeometryPlacements at a random configuration)."""
import os
import struct

import jax
import numpy as np
import pytest

import jaxdyn
from jaxdyn.errors import URDFError
from jaxdyn.io import meshes

CUBE_V = np.array([[x, y, z] for x in (0, 1) for y in (0, 2) for z in (0, 3)], float)
CUBE_F = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                   [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])


def _same_mesh(V, F):
    assert F.shape == (12, 3) and len(V) == 8
    np.testing.assert_allclose(np.sort(V, 0), np.sort(CUBE_V, 0))
    tri = {tuple(sorted(map(tuple, V[f]))) for f in F}
    assert tri == {tuple(sorted(map(tuple, CUBE_V[f]))) for f in CUBE_F}


def test_stl_and_obj_readers(tmp_path):
    b = tmp_path / "cube.stl"
    with open(b, "wb") as fh:
        fh.write(b"\0" * 80 + struct.pack("<I", 12))
        for f in CUBE_F:
            fh.write(struct.pack("<3f", 0, 0, 0) + struct.pack("<9f", *CUBE_V[f].ravel()) + b"\0\0")
    _same_mesh(*meshes.read_mesh(str(b)))
    a = tmp_path / "cube_ascii.stl"
    a.write_text("solid c\n" + "".join("facet normal 0 0 0\nouter loop\n" + "".join(
        f"vertex {x} {y} {z}\n" for x, y, z in CUBE_V[f]) + "endloop\nendfacet\n" for f in CUBE_F) + "endsolid c\n")
    _same_mesh(*meshes.read_mesh(str(a)))
    o = tmp_path / "cube.obj"          # quads (fan-triangulated), negative and slashed indices
    o.write_text("".join(f"v {x} {y} {z}\n" for x, y, z in CUBE_V)
                 + "f 1/1 2/1 4/1 3/1\nf -4 -2 -1 -3\nf 1 5 6 2\nf 3 4 8 7\nf 1 3 7 5\nf 2 6 8 4\n")
    V, F = meshes.read_mesh(str(o))
    _same_mesh(V, F)
    with pytest.raises(URDFError, match="cube.dae.*not read"):
        meshes.read_mesh(str(tmp_path / "cube.dae"))
    (tmp_path / "bad.stl").write_bytes(b"solid x\nendsolid x\n")
    with pytest.raises(URDFError, match="bad.stl: not a valid STL"):
        meshes.read_mesh(str(tmp_path / "bad.stl"))


def test_decimation_keeps_the_shape_within_budget():
    V, F = meshes._sphere(1.0, n=40)
    assert len(F) > 5000
    W, G = meshes.decimate(V, F, 500)
    assert 100 < len(G) <= 500 and G.max() < len(W)
    r = np.linalg.norm(W, axis=1)
    assert r.max() <= 1 + 1e-9 and r.min() > 0.9          # still a unit sphere


@pytest.mark.parametrize("name", ["ur5", "anymal_c", "panda"])
def test_visuals_sit_where_pinocchio_places_them(name):
    pin = pytest.importorskip("pinocchio")
    from jaxdyn.io.named import ERD_URDFS, example_robot_data_dir
    d = example_robot_data_dir()
    path = os.path.join(d, ERD_URDFS[name])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = jaxdyn.load_urdf(path)
    vis = meshes.urdf_visuals(path, m, max_faces=10 ** 9)          # no decimation: vertices kept
    assert len(vis) >= 7
    pm = pin.buildModelFromUrdf(path)
    q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(1)))
    pd = pm.createData()
    pin.forwardKinematics(pm, pd, q)
    R, p = (np.asarray(x) for x in jaxdyn.frame_poses(m, q))
    pkg = [os.path.dirname(os.path.dirname(d))]
    models = {}
    for v in vis:
        link, rest = v.source.split("/", 1)
        kind, k = rest.split("[")[0], int(rest.split("[")[1].split("]")[0])
        if kind not in models:
            gt = pin.GeometryType.VISUAL if kind == "visual" else pin.GeometryType.COLLISION
            gm = pin.buildGeomFromUrdf(pm, path, gt, package_dirs=pkg)
            gd = pin.GeometryData(gm)
            pin.updateGeometryPlacements(pm, pd, gm, gd)
            models[kind] = (gm, gd)
        gm, gd = models[kind]
        gid = gm.getGeometryId(f"{link}_{k}")
        g, oMg = gm.geometryObjects[gid], gd.oMg[gid]
        geo = g.geometry
        if hasattr(geo, "halfSide"):
            local0 = -np.asarray(geo.halfSide)
        elif hasattr(geo, "halfLength"):
            local0 = np.array([geo.radius, 0.0, -geo.halfLength])
        elif type(geo).__name__ == "Sphere":
            local0 = np.array([0.0, 0.0, geo.radius])
        else:
            local0 = meshes.read_mesh(g.meshPath)[0][0] * np.asarray(g.meshScale)
        want = oMg.act(local0)
        got = v.vertices[0] if v.body < 0 else R[v.body] @ v.vertices[0] + p[v.body]
        np.testing.assert_allclose(got, want, atol=1e-9, err_msg=v.source)


def _mj_surface(t, size, x):
    """How far points x (n, 3), in a MuJoCo geom's frame, are from that primitive's surface
    (MuJoCo's geom_size conventions), by the primitive's implicit equation."""
    if t == 2:                                           # sphere: radius
        return np.abs(np.linalg.norm(x, axis=1) - size[0])
    if t == 3:                                           # capsule: radius, half-length along z
        seg = np.stack([0 * x[:, 0], 0 * x[:, 0], np.clip(x[:, 2], -size[1], size[1])], 1)
        return np.abs(np.linalg.norm(x - seg, axis=1) - size[0])
    if t == 4:                                           # ellipsoid: semi-axes
        return np.abs(np.linalg.norm(x / size, axis=1) - 1.0)
    if t == 5:                                           # cylinder: radius, half-length
        d = np.stack([np.hypot(x[:, 0], x[:, 1]) - size[0], np.abs(x[:, 2]) - size[1]], 1)
        return np.abs(d.max(1))
    return np.abs((np.abs(x) / size).max(1) - 1.0)       # box: half sizes


@pytest.mark.parametrize("name", ["humanoid/humanoid.xml", "shadow_hand/right_hand.xml",
                                  "barkour_v0/assets/barkour_v0_mjx.xml"])
def test_mjcf_visuals_sit_where_mujoco_places_them(name):
    """Every drawn geom's vertices, placed by jaxdyn's frame poses at a random state, lie on the
    geom MuJoCo's mj_kinematics places (geom_xpos, geom_xmat): on the primitive's surface, or at
    MuJoCo's compiled mesh vertices; the geoms drawn are those of groups 0-2."""
    mujoco = pytest.importorskip("mujoco")
    from jaxdyn.io.mjcf import from_mujoco
    path = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", name)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jm = jaxdyn.load_mjcf(path)
    m = getattr(jm, "model", jm)
    vis = meshes.mjcf_visuals(path, m, max_faces=10 ** 9)            # no decimation: vertices kept
    mm = mujoco.MjModel.from_xml_path(path)
    drawn = [g for g in range(mm.ngeom) if mm.geom_type[g] in (2, 3, 4, 5, 6, 7) and mm.geom_group[g] <= 2
             and mm.geom_rgba[g, 3] > 0]
    assert len(vis) == len(drawn) >= 10
    d = mujoco.MjData(mm)
    rng = np.random.default_rng(2)
    d.qpos[:] = mm.qpos0 + rng.uniform(-0.5, 0.5, mm.nq)
    mujoco.mj_normalizeQuat(mm, d.qpos)
    mujoco.mj_kinematics(mm, d)
    R, p = (np.asarray(x) for x in jaxdyn.frame_poses(m, from_mujoco(m, d.qpos)[0]))
    for v, g in zip(vis, drawn):
        gname = mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
        assert v.source.split(" ")[0].endswith("/" + gname), (v.source, gname)
        world = v.vertices if v.body < 0 else v.vertices @ R[v.body].T + p[v.body]
        local = (world - d.geom_xpos[g]) @ d.geom_xmat[g].reshape(3, 3)     # MuJoCo's geom frame
        if mm.geom_type[g] == 7:
            k = mm.geom_dataid[g]
            want = mm.mesh_vert[mm.mesh_vertadr[k]:mm.mesh_vertadr[k] + mm.mesh_vertnum[k]]
            np.testing.assert_allclose(local, want, atol=1e-9, err_msg=v.source)
        else:
            err = _mj_surface(int(mm.geom_type[g]), mm.geom_size[g], local)
            assert err.max() < 1e-9, (v.source, err.max())
