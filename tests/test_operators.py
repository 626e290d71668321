"""Rodriguez-Kreutz's spatial operator algebra (Rodriguez, Jain & Kreutz-Delgado 1991-1992): the
innovations factorization M = (1 + H Phi K) D (1 + H Phi K)^T (4.11), its inverse (4.14) and
M^-1 (4.16) against numpy and Pinocchio; the innovations factor equals Saha's U; FD2's link
accelerations (5.6); the operational-space inverse inertia J M^-1 J^T (Kreutz-Delgado, Jain &
Rodriguez 1992) against dense algebra.  Its forward dynamics FD1-FD4 equals ABA in
test_forward_dynamics."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import SMALL_MODELS, close, rng_states


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_innovations_factorization(name):
    m = SMALL_MODELS[name]()
    m = dataclasses.replace(m, armature=jnp.linspace(0.05, 0.5, m.nv))   # armature enters D
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        M = jaxdyn.crba(m, q)
        K, Dk, Kinv = jaxdyn.operators.innovations_operators(m, q)
        U, D = jaxdyn.saha.udut(m, q)
        close(K, U, err="(1 + H Phi L) = Saha's U")
        close(Dk, D)
        close(K @ Dk @ K.T, M, err="(4.11)")
        close(Kinv @ K, np.eye(m.nv), err="(4.14)")
        Mi = np.linalg.inv(np.asarray(M))
        close(Kinv.T @ np.linalg.inv(np.asarray(Dk)) @ Kinv, Mi, err="(4.16)")
        close(jaxdyn.minv(m, q, method="operator"), Mi)


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_operator_minv_matches_pinocchio(robot_pair, name):
    pytest.importorskip("pinocchio")
    from pinutil import pin_minv
    m, pm = robot_pair(name)
    pd = pm.createData()
    for q, _, _, _ in rng_states(m, pm, 3, seed=2):
        close(jaxdyn.minv(m, q, method="operator"), pin_minv(pm, pd, q), err="operator M^-1 vs pin")


def test_operator_fd2_link_accelerations():
    """FD2's alpha (5.6) are the bodies' spatial accelerations under the computed qdd."""
    m = SMALL_MODELS["tree_float"]()
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(6))
    r = np.random.default_rng(6)
    qd, tau = jnp.asarray(r.normal(size=m.nv)), jnp.asarray(r.normal(size=m.nv) * 3)
    qdd, alpha = jaxdyn.operators.operator_fd2(m, q, qd, tau)
    close(qdd, jaxdyn.aba(m, q, qd, tau))
    for b, name in enumerate(m.body_names):
        close(alpha[b], jaxdyn.frame_acceleration(m, q, qd, qdd, name, reference="local"), err=name)


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_opspace_inverse_inertia(name):
    m = SMALL_MODELS[name]()
    frames = list(m.frame_names)
    pick = [frames[-1], frames[len(frames) // 2], frames[1]]
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(10 + s))
        Mi = jaxdyn.minv(m, q)
        for ref in ("world", "local", "local_world_aligned"):
            J = jnp.concatenate([jaxdyn.frame_jacobian(m, q, f, reference=ref) for f in pick], 0)
            close(jaxdyn.operators.opspace_inverse_inertia(m, q, pick, reference=ref), J @ Mi @ J.T, err=ref)
    if name == "puma560":
        J = jaxdyn.frame_jacobian(m, q, "ee", reference="local_world_aligned")
        Lam = jaxdyn.operators.opspace_inertia(m, q, "ee")
        close(Lam @ (J @ Mi @ J.T), np.eye(6), rtol=1e-9)
        # 3 frames on a 6-dof arm: 18 coordinates, rank 6 -> singular -> NaN (documented)
        assert np.isnan(np.asarray(jaxdyn.operators.opspace_inertia(m, q, pick))).any()


def test_opspace_two_feet_talos(robot_pair):
    pytest.importorskip("pinocchio")
    m, pm = robot_pair("talos_reduced")
    q = jnp.asarray(rng_states(m, pm, 1, seed=9)[0][0])
    fr = ["left_sole_link", "right_sole_link", "gripper_left_joint"]
    fr = [f for f in fr if f in m.frame_names] or list(m.frame_names)[-2:]
    J = jnp.concatenate([jaxdyn.frame_jacobian(m, q, f, reference="local") for f in fr], 0)
    close(jaxdyn.operators.opspace_inverse_inertia(m, q, fr, reference="local"), J @ jaxdyn.minv(m, q) @ J.T)
