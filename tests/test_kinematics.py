"""Kinematics (Featherstone 2008, ch. 4; Pinocchio's frame conventions): forward kinematics,
frame placements, Jacobians, velocities and accelerations, the kinetic and potential energies,
the centre of mass and the centroidal momentum, against Pinocchio (<= 1e-10, f64) on
example-robot-data robots and random trees with every joint type; Jacobians against finite
differences of the placements; integrate / difference on the configuration manifold."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

import jaxdyn
from helpers import close, rand_state, rng_states, urdf_path
from jaxdyn.kinematics import frame_terms
from pinutil import REFERENCE_CASES, align_rub_axes, reference_case, to_pinocchio

REFS = {"world": pin.ReferenceFrame.WORLD, "local": pin.ReferenceFrame.LOCAL,
        "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}


def test_urdf_structure_matches_pinocchio(robot_pair):
    for name in ["panda", "ur5", "anymal_c", "talos_reduced", "g1"]:
        m, pm = robot_pair(name)
        assert (m.nq, m.nv) == (pm.nq, pm.nv), name
        pin_names = [n for n in pm.names[1:]]
        assert list(m.joint_names) == pin_names, name
        np.testing.assert_allclose(np.asarray(m.mass).sum(),
                                   sum(pm.inertias[i].mass for i in range(1, pm.njoints)), rtol=1e-12)
        np.testing.assert_allclose(jaxdyn.total_mass(m), pin.computeTotalMass(pm), rtol=1e-12)


@pytest.mark.parametrize("name", ["panda", "ur5", "anymal_c", "talos_reduced"])
def test_frames_and_jacobians(robot_pair, name):
    m, pm = robot_pair(name)
    pd = pm.createData()
    fnames = sorted({f.name for f in pm.frames if f.name != "universe"} & set(m.frame_names))
    assert len(fnames) >= m.nb
    pick = fnames[:: max(1, len(fnames) // 12)]
    first = {}
    for i, f in enumerate(pm.frames):
        first.setdefault(f.name, i)
    jac = jaxdyn.frame_jacobian
    poses = jax.jit(jaxdyn.frame_poses)
    for q, v, a, _ in rng_states(m, pm, 3, seed=1):
        pin.forwardKinematics(pm, pd, q, v, a)
        pin.updateFramePlacements(pm, pd)
        pin.computeJointJacobians(pm, pd, q)
        R_all, p_all = poses(m, jnp.asarray(q))
        for fn in fnames:
            fid = first[fn]
            k = m.frame_id(fn)
            np.testing.assert_allclose(p_all[k], pd.oMf[fid].translation, atol=1e-10, err_msg=fn)
            np.testing.assert_allclose(R_all[k], pd.oMf[fid].rotation, atol=1e-10, err_msg=fn)
        for fn in pick:
            fid = first[fn]
            for ref, pref in REFS.items():
                Jp = pin.getFrameJacobian(pm, pd, fid, pref)
                np.testing.assert_allclose(jac(m, jnp.asarray(q), fn, ref), Jp, atol=1e-10,
                                           err_msg=f"{fn} {ref}")
                vp = pin.getFrameVelocity(pm, pd, fid, pref).vector
                ap = pin.getFrameAcceleration(pm, pd, fid, pref).vector
                np.testing.assert_allclose(jaxdyn.frame_velocity(m, q, v, fn, ref), vp, atol=1e-10)
                np.testing.assert_allclose(jaxdyn.frame_acceleration(m, q, v, a, fn, ref), ap, atol=1e-10)
        ac = pin.getFrameClassicalAcceleration(pm, pd, fid, pin.ReferenceFrame.LOCAL).vector
        np.testing.assert_allclose(jaxdyn.kinematics.frame_classical_acceleration(m, q, v, a, fn, "local"), ac,
                                   atol=1e-10)


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_energies_com_and_momentum_match_pinocchio(robot_pair, name):
    m, pm, states = reference_case(robot_pair, name)
    pd = pm.createData()
    for q, v, _, _ in states:
        close(jaxdyn.kinetic_energy(m, q, v), pin.computeKineticEnergy(pm, pd, q, v), err="T")
        close(jaxdyn.potential_energy(m, q), pin.computePotentialEnergy(pm, pd, q), err="V")
        close(jaxdyn.center_of_mass(m, q), pin.centerOfMass(pm, pd, q), err="com")
        pin.computeCentroidalMomentum(pm, pd, q, v)
        close(jaxdyn.centroidal_momentum(m, q, v), pd.hg.vector, err="hg")


def all_joint_tree(seed=4, floating=True, nb=12):
    """Random tree holding every joint type (seed 4 draws all seven), RUB axes along z."""
    return align_rub_axes(jaxdyn.robots.random_tree(nb, branching=0.5, seed=seed, floating_base=floating))


def test_random_tree_every_joint_type_matches_pinocchio():
    m = all_joint_tree()
    types = set(np.asarray(m.jtype).tolist())
    assert len(types) == 7, types
    pm = to_pinocchio(m)
    pd = pm.createData()
    assert (pm.nq, pm.nv) == (m.nq, m.nv)
    terms = jax.jit(frame_terms, static_argnums=(3, 4))
    for s in range(3):
        q = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s)))
        v = np.random.default_rng(s).normal(size=m.nv)
        a = np.random.default_rng(s + 10).normal(size=m.nv)
        pin.forwardKinematics(pm, pd, q, v, a)
        pin.computeJointJacobians(pm, pd, q)
        R, p = jaxdyn.forward_kinematics(m, q)
        for i in range(m.nb):
            np.testing.assert_allclose(p[i], pd.oMi[i + 1].translation, atol=1e-10)
            np.testing.assert_allclose(R[i], pd.oMi[i + 1].rotation, atol=1e-10)
            for ref, pref in REFS.items():
                Jp = pin.getJointJacobian(pm, pd, i + 1, pref)
                np.testing.assert_allclose(jaxdyn.frame_jacobian(m, q, m.body_names[i], ref), Jp, atol=1e-10)
            np.testing.assert_allclose(jaxdyn.frame_velocity(m, q, v, m.body_names[i], "local"),
                                       pd.v[i + 1].vector, atol=1e-10)
            np.testing.assert_allclose(jaxdyn.frame_acceleration(m, q, v, a, m.body_names[i], "local"),
                                       pd.a[i + 1].vector, atol=1e-10)
        # frame_terms: every body's frame from one pass, at qdd = 0 (Pinocchio's joint frames)
        pin.forwardKinematics(pm, pd, q, v, np.zeros(m.nv))
        fids = tuple(m.frame_id(n) for n in m.body_names)
        for ref, pref in REFS.items():
            ft = terms(m, q, v, fids, ref)
            for i in range(m.nb):
                np.testing.assert_allclose(ft.R[i], pd.oMi[i + 1].rotation, atol=1e-10)
                np.testing.assert_allclose(ft.p[i], pd.oMi[i + 1].translation, atol=1e-10)
                np.testing.assert_allclose(ft.J[i], pin.getJointJacobian(pm, pd, i + 1, pref), atol=1e-10)
                np.testing.assert_allclose(ft.v[i], pin.getVelocity(pm, pd, i + 1, pref).vector, atol=1e-10)
                np.testing.assert_allclose(ft.a[i], pin.getClassicalAcceleration(pm, pd, i + 1, pref).vector,
                                           atol=1e-10, err_msg=f"classical bias acceleration {ref}")


def test_integrate_difference_match_pinocchio():
    m = all_joint_tree()
    pm = to_pinocchio(m)
    for s in range(4):
        q0 = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(s)))
        v = np.random.default_rng(s).normal(size=m.nv)
        np.testing.assert_allclose(jaxdyn.integrate(m, q0, v, 0.7), pin.integrate(pm, q0, 0.7 * v), atol=1e-12)
        q1 = np.asarray(jaxdyn.random_configuration(m, jax.random.PRNGKey(100 + s)))
        np.testing.assert_allclose(jaxdyn.difference(m, q0, q1), pin.difference(pm, q0, q1), atol=1e-9)


def test_integrate_difference_roundtrip():
    m = jaxdyn.robots.random_tree(10, 0.5, 918, floating_base=True)
    assert len(set(m.types)) == 7
    for s in range(3):
        q0 = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        v = jnp.asarray(np.random.default_rng(s).normal(size=m.nv))
        q1 = jaxdyn.integrate(m, q0, v, 0.5)
        np.testing.assert_allclose(jaxdyn.difference(m, q0, q1), 0.5 * v, atol=1e-10)


def test_jacobian_columns_equal_fd_of_fk():
    m = jaxdyn.robots.random_tree(8, 0.5, 663, floating_base=True)
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(0))
    name = m.body_names[-1]
    path = np.asarray(m.topology.jtype)[np.asarray(m.topology.ancestors)[-1] > 0]   # the frame's joints
    assert len(set(path.tolist())) == 7
    J = jaxdyn.frame_jacobian(m, q, name, "local_world_aligned")
    R0, p0 = jaxdyn.frame_pose(m, q, name)
    eps = 1e-6
    from jaxdyn.spatial.rotations import log3
    for k in range(m.nv):
        dv = jnp.zeros(m.nv).at[k].set(eps)
        Rp, pp = jaxdyn.frame_pose(m, jaxdyn.integrate(m, q, dv), name)
        Rm, pm_ = jaxdyn.frame_pose(m, jaxdyn.integrate(m, q, -dv), name)
        np.testing.assert_allclose((pp - pm_) / (2 * eps), J[:3, k], atol=1e-7)
        np.testing.assert_allclose((log3(Rp @ R0.T) - log3(Rm @ R0.T)) / (2 * eps), J[3:, k], atol=1e-7)


def test_q_off_the_unit_sphere_is_its_projection():
    """Quaternions and (cos, sin) pairs are normalized inside the joint transforms: at a q off
    the unit sphere (every rotation coordinate scaled and perturbed), rnea, crba, aba and the
    kinematics equal the same functions at jaxdyn.normalize(q).  A floating random tree with
    every joint type; one compiled call."""
    m = jaxdyn.robots.random_tree(10, 0.4, 92, floating_base=True)
    assert len(set(m.types)) == 7
    q, qd, x = rand_state(m, 0)
    off = q * 1.3 + 0.05 * jnp.asarray(np.random.default_rng(2).normal(size=m.nq))

    def all_of(q):
        return (jaxdyn.rnea(m, q, qd, x), jaxdyn.crba(m, q), jaxdyn.aba(m, q, qd, x), jaxdyn.forward_kinematics(m, q)[0])

    at_off, at_unit = jax.jit(lambda a, b: (all_of(a), all_of(b)))(off, jaxdyn.normalize(m, off))
    for i, name in enumerate(("rnea", "crba", "aba", "fk")):
        np.testing.assert_allclose(at_off[i], at_unit[i], rtol=1e-11, atol=1e-11, err_msg=name)


def test_stacked_heterogeneous_models_under_vmap():
    """Forward kinematics over a stack equals each member's, body by body (through the
    stack's body maps); aba, rnea and crba are checked in test_batching."""
    panda = jaxdyn.load_urdf(urdf_path("panda"))
    ms = [jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm(), panda,
          jaxdyn.robots.random_tree(5, 0.5, 1, floating_base=True)]
    big = jaxdyn.stack(ms)
    qs = [rand_state(m, j)[0] for j, m in enumerate(ms)]
    Q = jnp.stack([big.q(j, q) for j, q in enumerate(qs)])
    R, P = jax.vmap(jaxdyn.forward_kinematics)(big, Q)
    for j, m in enumerate(ms):
        Rj, Pj = jaxdyn.forward_kinematics(m, qs[j])
        u = np.asarray(big.body_maps[j])
        np.testing.assert_allclose(P[j, u], Pj, atol=1e-12)
        np.testing.assert_allclose(R[j, u], Rj, atol=1e-12)


def test_a_model_without_bodies_has_no_frame_poses():
    """An MJCF of world geoms only loads as a model of no bodies (nq = nv = 0): its frame
    poses are empty (was an IndexError), its dynamics are empty, its total mass 0."""
    z = np.zeros
    m = jaxdyn.build_model(parent=[], jtype=[], Xtree_E=z((0, 3, 3)), Xtree_r=z((0, 3)), axis=z((0, 3)), mass=z(0),
                           com=z((0, 3)), inertia=z((0, 3, 3)))
    q = jaxdyn.neutral(m)
    R, p = jaxdyn.frame_poses(m, q)
    assert R.shape == (0, 3, 3) and p.shape == (0, 3)
    assert jaxdyn.aba(m, q, q, q).shape == (0,) and jaxdyn.crba(m, q).shape == (0, 0)
    assert float(jaxdyn.total_mass(m)) == 0.0
