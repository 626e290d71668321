"""FK, frame placements, Jacobians, velocities and accelerations against Pinocchio (<= 1e-10)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

import jaxdyn
from helpers import rng_states
from jaxdyn.kinematics import frame_terms
from pinutil import align_rub_axes, to_pinocchio

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
