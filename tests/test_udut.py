"""Saha's UDU^T decomposition of the generalized inertia matrix and its DeNOC matrices (Saha
1997, 1999): U D U^T = M (CRBA's M, itself checked against Pinocchio) with U unit upper
triangular without fill-in and D block diagonal per joint, armature in D; the explicit inverse
against numpy and Pinocchio's M^-1; DeNOC (2)-(6) and the twists it maps to (4).  Its forward
dynamics equals ABA in test_forward_dynamics; its DH robots are in test_saha_models."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from helpers import SMALL_MODELS, close, rng_states


@pytest.mark.parametrize("name", ["puma560", "tree_float", "tree_sph"])
def test_udut_factors_and_denoc(name):
    m = SMALL_MODELS[name]()
    m = dataclasses.replace(m, armature=jnp.linspace(0.05, 0.5, m.nv))   # armature enters D
    anc = np.asarray(jaxdyn.kinematics.ancestors(m))
    body_of = np.full(m.nv, -1)
    for b, row in enumerate(np.asarray(m.vidx)):
        body_of[row[row < m.nv]] = b
    for s in range(2):
        q = jaxdyn.random_configuration(m, jax.random.PRNGKey(s))
        M = jaxdyn.crba(m, q)
        U, D = jaxdyn.saha.udut(m, q)
        close(U @ D @ U.T, M, err="U D U^T = M")
        # U: unit diagonal, U[i, j] = 0 unless body(i) is body(j) or an ancestor (no fill-in)
        np.testing.assert_allclose(np.diag(U), 1.0, atol=1e-14)
        allowed = anc[body_of[None, :], body_of[:, None]] > 0      # row dof's body is anc of col's
        assert np.all(np.abs(np.asarray(U))[~allowed] < 1e-14)
        # D block diagonal per joint
        same = body_of[:, None] == body_of[None, :]
        assert np.all(np.abs(np.asarray(D))[~same] == 0)
        close(jaxdyn.saha.udut_inverse(m, q), np.linalg.inv(np.asarray(M)), err="explicit inverse")
        # Saha's DeNOC matrices (2)-(5) and the GIM elements (6)
        dn = jaxdyn.saha.denoc(m, q)
        close(dn.N_d.T @ dn.N_l.T @ dn.M @ dn.N_l @ dn.N_d + jnp.diag(m.armature), M, err="(2)")
        close(jaxdyn.saha.gim_denoc(m, q), M, err="(6)")


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_udut_inverse_matches_pinocchio(robot_pair, name):
    pytest.importorskip("pinocchio")
    from pinutil import pin_minv
    m, pm = robot_pair(name)
    pd = pm.createData()
    for q, _, _, _ in rng_states(m, pm, 3, seed=2):
        close(jaxdyn.saha.udut_inverse(m, q), pin_minv(pm, pd, q), err="Saha explicit inverse vs pin")


def test_denoc_twists_are_mass_centre_velocities():
    """t = N_l N_d thd gives [omega_i; v_Ci] (Eq. 4), checked against point velocities."""
    m = SMALL_MODELS["tree_sph"]()
    q = jaxdyn.random_configuration(m, jax.random.PRNGKey(4))
    qd = jnp.asarray(np.random.default_rng(4).normal(size=m.nv))
    dn = jaxdyn.saha.denoc(m, q)
    t = (dn.N_l @ dn.N_d @ qd).reshape(m.nb, 6)
    for b, name in enumerate(m.body_names):
        vC = jaxdyn.kinematics.point_velocity(m, q, qd, name, m.com[b])           # world-frame velocity of C_b
        close(t[b, 3:], vC, err=f"v_C of {name}")
        w = jaxdyn.frame_velocity(m, q, qd, name, reference="local_world_aligned")[3:]
        close(t[b, :3], w, err=f"omega of {name}")
