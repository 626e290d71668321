"""load_mjcf against MuJoCo itself (contacts, constraints, actuators, springs and fluid forces
off on MuJoCo's side): mj_fullM, mj_forward's qacc_smooth and mj_inverse's qfrc_inverse on the
MJCF models that ship in pip packages (gymnasium's MuJoCo assets, MJX's test data), all in one
stack so the algorithms compile once; frames, equality constraints and limits on a model that
exercises every mapped feature; bad files."""
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.errors import JaxdynWarning, MJCFError
from jaxdyn.io import mjcf as M

mujoco = pytest.importorskip("mujoco")
DATA = os.path.join(os.path.dirname(__file__), "data")
DSBL = mujoco.mjtDisableBit


def _zoo():
    files = []
    try:
        import gymnasium
        g = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")
        files += [os.path.join(g, f) for f in sorted(os.listdir(g)) if f.endswith(".xml")]
    except ImportError:
        pass
    t = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
    files += [os.path.join(t, f) for f in ("humanoid/humanoid.xml", "shadow_hand/right_hand.xml", "pendula.xml",
                                           "barkour_v0/assets/barkour_v0_mjx.xml", "convex.xml")
              if os.path.exists(os.path.join(t, f))]
    files.append(os.path.join(DATA, "mjcf_equalities.xml"))
    return files


def _random_qpos(m, rng):
    q = m.qpos0.copy()
    for j in range(m.njnt):
        a, t = m.jnt_qposadr[j], m.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            x = rng.normal(size=4)
            q[a:a + 3], q[a + 3:a + 7] = rng.normal(size=3), x / np.linalg.norm(x)
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            x = rng.normal(size=4)
            q[a:a + 4] = x / np.linalg.norm(x)
        else:
            q[a] = rng.uniform(-1.5, 1.5)
    return q


def _smooth_only(m):
    """The MuJoCo model without what jaxdyn does not model (contacts, constraints, actuators,
    springs, fluid forces, gravity compensation); joint damping stays."""
    m.opt.disableflags |= DSBL.mjDSBL_CONTACT | DSBL.mjDSBL_CONSTRAINT | DSBL.mjDSBL_ACTUATION | DSBL.mjDSBL_SPRING
    m.opt.density = m.opt.viscosity = 0.0
    m.body_gravcomp[:] = 0.0
    m.tendon_damping[:] = 0.0
    return m


N_STATES = 3


@pytest.fixture(scope="module")
def zoo():
    rows = []
    rng = np.random.default_rng(0)
    for f in _zoo():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # dropped springs / fluid forces are named in warnings
            jm = jaxdyn.load_mjcf(f)
        tree = getattr(jm, "model", jm)
        m = _smooth_only(mujoco.MjModel.from_xml_path(f))
        d = mujoco.MjData(m)
        refs = []
        for _ in range(N_STATES):
            d.qpos[:], d.qvel[:] = _random_qpos(m, rng), rng.normal(size=m.nv)
            d.qfrc_applied[:] = rng.normal(size=m.nv)
            mujoco.mj_forward(m, d)
            Mf = np.zeros((m.nv, m.nv))
            mujoco.mj_fullM(m, d, Mf)
            ref = dict(qpos=d.qpos.copy(), qvel=d.qvel.copy(), frc=d.qfrc_applied.copy(), M=Mf,
                       qacc=d.qacc_smooth.copy())
            d.qacc[:] = rng.normal(size=m.nv)
            mujoco.mj_inverse(m, d)
            ref.update(acc=d.qacc.copy(), inv=d.qfrc_inverse.copy())
            refs.append(ref)
        rows.append((os.path.basename(f), tree, refs))
    return rows


def test_zoo_loads(zoo):
    assert len(zoo) >= 15, [r[0] for r in zoo]
    kinds = set().union(*[set(t.types) for _, t, _ in zoo])
    assert {jaxdyn.model.REVOLUTE, jaxdyn.model.PRISMATIC, jaxdyn.model.SPHERICAL, jaxdyn.model.FREE} <= kinds


def test_zoo_matches_mujoco(zoo):
    """M (mj_fullM), forward dynamics (qacc_smooth: gravity, Coriolis, damping, applied forces)
    and inverse dynamics (qfrc_inverse) <= 1e-10 relative to the reference's largest entry."""
    st = jaxdyn.stack([t for _, t, _ in zoo])
    lanes, Q, V, A, F = [], [], [], [], []
    for j, (_, tree, refs) in enumerate(zoo):
        for r in refs:
            q, v, a, f = M.from_mujoco(tree, r["qpos"], r["qvel"], r["acc"], r["frc"])
            lanes.append(j)
            Q.append(q), V.append(v), A.append(a), F.append(f)
    big = st.lanes(lanes)
    k = 0
    sq, sv = [], {"v": [], "a": [], "f": []}
    for j, (_, _, refs) in enumerate(zoo):
        for _ in refs:
            sq.append(big.q(j, Q[k]))
            for nm, X in (("v", V), ("a", A), ("f", F)):
                sv[nm].append(big.v(j, X[k]))
            k += 1
    fn = jax.jit(jax.vmap(lambda m, q, v, a, f: (jaxdyn.crba(m, q), jaxdyn.forward_dynamics(m, q, v, f),
                                                  jaxdyn.rnea(m, q, v, a) + m.damping * v)))
    Ms, qdds, taus = fn(big, jnp.stack(sq), *(jnp.stack(sv[n]) for n in ("v", "a", "f")))
    bad, k = [], 0
    for j, (name, tree, refs) in enumerate(zoo):
        for r in refs:
            mv = lambda x: np.asarray(big.member_v(j, x))
            Mt, qdd, tau = mv(mv(Ms[k]).T), mv(qdds[k]), mv(taus[k])
            q, v = Q[k], V[k]
            got = dict(M=M.mass_matrix_to_mujoco(tree, q, Mt), qacc=M.to_mujoco(tree, q, v, qdd)[2],
                       inv=M.to_mujoco(tree, q, None, None, tau)[3])
            for nm in got:
                err = np.abs(np.asarray(got[nm]) - r[nm]).max() / max(1.0, np.abs(r[nm]).max())
                if err > 1e-10:
                    bad.append(f"{name} {nm}: {err:.2e}")
            k += 1
    assert not bad, bad


@pytest.fixture(scope="module")
def equalities():
    f = os.path.join(DATA, "mjcf_equalities.xml")
    m = mujoco.MjModel.from_xml_path(f)
    m.opt.disableflags |= DSBL.mjDSBL_CONTACT | DSBL.mjDSBL_LIMIT | DSBL.mjDSBL_ACTUATION
    return jaxdyn.load_mjcf(f), m


def test_frames_are_mujoco_bodies_and_sites(equalities):
    cm, m = equalities
    tree = cm.model
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    poses = jax.jit(jaxdyn.frame_poses)
    name = lambda t, i: mujoco.mj_id2name(m, t, i)
    for _ in range(3):
        d.qpos[:] = _random_qpos(m, rng)
        mujoco.mj_kinematics(m, d)
        R, p = poses(tree, M.from_mujoco(tree, d.qpos)[0])
        for b in range(1, m.nbody):
            i = tree.frame_id(name(mujoco.mjtObj.mjOBJ_BODY, b))
            np.testing.assert_allclose(p[i], d.xpos[b], atol=1e-12)
            np.testing.assert_allclose(R[i], d.xmat[b].reshape(3, 3), atol=1e-12)
        for s in range(m.nsite):
            i = tree.frame_id(name(mujoco.mjtObj.mjOBJ_SITE, s))
            np.testing.assert_allclose(p[i], d.site_xpos[s], atol=1e-12)
            np.testing.assert_allclose(R[i], d.site_xmat[s].reshape(3, 3), atol=1e-12)


def test_equalities_are_constraints(equalities):
    """connect -> point, weld -> weld (torquescale 0 -> point): the position rows equal MuJoCo's
    efc_pos; a weld's rotation rows (jaxdyn log3, MuJoCo torquescale * imag(quaternion error))
    give the same angle."""
    cm, m = equalities
    assert cm.names == ("c_bodies", "c_world", "w_bodies", "c_sites", "w_sites", "w_point")
    assert cm.kinds == ("point", "point", "weld", "point", "weld", "point")
    d = mujoco.MjData(m)
    rng = np.random.default_rng(2)
    res = jax.jit(jaxdyn.constraint_residual)
    for _ in range(3):
        d.qpos[:] = _random_qpos(m, rng)
        mujoco.mj_forward(m, d)
        r = np.asarray(res(cm, M.from_mujoco(cm, d.qpos)[0]))
        e = d.efc_pos[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
        i = j = 0
        for kind, ts in zip(cm.kinds, (None, None, 1.0, None, 1.0, 0.0)):
            np.testing.assert_allclose(r[i:i + 3], e[j:j + 3], atol=1e-12)
            if kind == "weld":
                angle = 2 * np.arcsin(min(1.0, np.linalg.norm(e[j + 3:j + 6]) / ts))
                np.testing.assert_allclose(np.linalg.norm(r[i + 3:i + 6]), angle, atol=1e-9)
            i += 3 if kind == "point" else 6
            j += 3 if ts is None else 6
        assert (i, j) == (len(r), len(e))


def test_names_limits_and_parameters(equalities):
    cm, m = equalities
    tree = cm.model
    # the jaxdyn body of a joint away from the body origin is named "<body>:<joint>"; the free
    # body keeps its name (its frame is MuJoCo's)
    assert tree.body_names == ("base:hinge_ref", "arm:slide_ref", "arm:hinge_a", "arm:hinge_b", "wrist:ball",
                               "floater", "flap:flap_hinge")
    assert tree.joint_names == ("hinge_ref", "slide_ref", "hinge_a", "hinge_b", "ball", "float", "flap_hinge")
    # motor: gear 20 x ctrlrange 3; motor with forcerange 3 but ctrlrange 1: 5 x 1; a position
    # servo without forcerange: none
    np.testing.assert_array_equal(np.asarray(tree.effort_limit)[:3], [60.0, 5.0, np.inf])
    assert np.all(np.isinf(np.asarray(tree.effort_limit)[3:]))
    np.testing.assert_array_equal(np.asarray(tree.q_lower)[:2], [-1.0, -np.inf])
    np.testing.assert_array_equal(np.asarray(tree.q_upper)[:2], [2.0, np.inf])
    np.testing.assert_allclose(np.asarray(tree.damping), m.dof_damping)
    np.testing.assert_allclose(np.asarray(tree.armature), m.dof_armature)
    np.testing.assert_allclose(np.asarray(tree.mass).sum(), m.body_mass.sum(), rtol=1e-14)


def test_state_conversions_round_trip(equalities):
    cm, m = equalities
    rng = np.random.default_rng(3)
    qpos, qvel, qacc, qfrc = _random_qpos(m, rng), *rng.normal(size=(3, m.nv))
    back = M.to_mujoco(cm, *M.from_mujoco(cm, qpos, qvel, qacc, qfrc))
    for x, y in zip(back, (qpos, qvel, qacc, qfrc)):
        np.testing.assert_allclose(x, y, atol=1e-14)


@pytest.mark.named_errors
def test_bad_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<mujoco><worldbody><body><joint type="wobbly"/></body></worldbody></mujoco>')
    with pytest.raises(MJCFError, match=r"bad\.xml: MuJoCo's compiler: .*wobbly"):
        jaxdyn.load_mjcf(str(bad))
    with pytest.raises(MJCFError, match="no such file"):
        jaxdyn.load_mjcf(str(tmp_path / "missing.xml"))
    with pytest.raises(MJCFError, match="directory"):
        jaxdyn.load_mjcf(str(tmp_path))
    (tmp_path / "text.xml").write_text("not xml at all")
    with pytest.raises(MJCFError, match=r"text\.xml: MuJoCo's compiler"):
        jaxdyn.load_mjcf(str(tmp_path / "text.xml"))
    nested = ('<mujoco><worldbody><body><joint type="hinge"/><geom size=".1"/><body><freejoint/>'
              '<geom size=".1"/></body></body></worldbody></mujoco>')
    with pytest.raises(MJCFError, match=r"<string>: .*free joint"):    # MuJoCo's own check, or jaxdyn's
        jaxdyn.load_mjcf(nested)


def test_dropped_features_are_named():
    xml = ('<mujoco><option density="1.2"/><worldbody><body><joint name="j" stiffness="3" frictionloss="0.1"/>'
           '<geom size=".1"/></body></worldbody></mujoco>')
    with pytest.warns(JaxdynWarning, match=r"frictionloss on \['j'\].*springs \(stiffness\) on \['j'\].*fluid"):
        m = jaxdyn.load_mjcf(xml)
    assert np.asarray(m.friction).tolist() == [0.1]        # MuJoCo's frictionloss, kept (not simulated)
    # a tendon with armature changes MuJoCo's M (mjx's test_data/tendon/armature.xml: by 97 %)
    xml = ('<mujoco><worldbody><site name="s0" pos="1 0 1"/><body><joint type="slide"/>'
           '<geom size=".1" mass="1"/><site name="s1"/></body></worldbody>'
           '<tendon><spatial armature="123"><site site="s0"/><site site="s1"/></spatial></tendon></mujoco>')
    with pytest.warns(JaxdynWarning, match=r"1 tendon\(s\), 1 with armature \(MuJoCo adds it to M"):
        jaxdyn.load_mjcf(xml)
