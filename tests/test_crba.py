"""CRBA (Featherstone 2008, Table 6.2): the joint-space inertia M(q) and its inverse M^-1(q)
against Pinocchio (<= 1e-10 relative, f64) on example-robot-data robots and random trees with
every joint type; identities with RNEA and the kinetic energy; every M^-1 method; the per-tree
Cholesky solve; gradients against central differences (check_grads)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

pin = pytest.importorskip("pinocchio")

import jaxdyn
from helpers import close, rand_state, SMALL_MODELS
from pinutil import PIN_CRBA_INCONSISTENT, REFERENCE_CASES, pin_mass_matrix, pin_minv, reference_case


@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_crba_and_minv_match_pinocchio(robot_pair, name):
    m, pm, states = reference_case(robot_pair, name)
    pd = pm.createData()
    use_crba = name not in PIN_CRBA_INCONSISTENT
    for q, _, _, _ in states:
        close(jaxdyn.crba(m, q), pin_mass_matrix(pm, pd, q, use_crba), err="crba")
        close(jaxdyn.minv(m, q), pin_minv(pm, pd, q, use_crba), err="minv")


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_crba_identities(name):
    """M a + h = rnea(a), M^-1 M = 1 for every M^-1 method, T = 1/2 qd^T M qd (three states)."""
    m = SMALL_MODELS[name]()
    for s in range(3):
        q, qd, a = rand_state(m, s)
        M = jaxdyn.crba(m, q)
        np.testing.assert_allclose(M @ a + jaxdyn.bias_forces(m, q, qd), jaxdyn.rnea(m, q, qd, a), atol=1e-10)
        for k in jaxdyn.minv_methods():
            np.testing.assert_allclose(jaxdyn.minv(m, q, method=k) @ M, np.eye(m.nv), atol=1e-10, err_msg=k)
        np.testing.assert_allclose(jaxdyn.kinetic_energy(m, q, qd), 0.5 * qd @ M @ qd, rtol=1e-12)


def test_crba_gradients_check_grads():
    m = jaxdyn.robots.puma560()
    q, _, _ = rand_state(m, 0)
    check_grads(jax.jit(lambda q: jaxdyn.crba(m, q)), (q,), order=1, modes=["fwd", "rev"])


def test_tree_solve_is_blockwise_with_nan_per_tree():
    """forward.tree_solve: M block diagonal over trees (masks), one Cholesky per tree.  It
    equals numpy's solve of each block; a block that is not positive definite gives NaN on
    its own dofs only."""
    from jaxdyn.dynamics.forward import tree_solve
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(3, 3)), rng.normal(size=(2, 2))
    A, B = A @ A.T + 3 * np.eye(3), B @ B.T + 2 * np.eye(2)
    idx_a, idx_b = [0, 2, 4], [1, 3]                     # interleaved trees
    M = np.zeros((5, 5))
    M[np.ix_(idx_a, idx_a)], M[np.ix_(idx_b, idx_b)] = A, B
    masks = np.zeros((2, 5))
    masks[0, idx_a], masks[1, idx_b] = 1.0, 1.0
    b = rng.normal(size=5)
    x = np.asarray(jax.jit(lambda M, b: tree_solve(M, b, masks))(M, b))
    np.testing.assert_allclose(x[idx_a], np.linalg.solve(A, b[idx_a]), rtol=1e-13)
    np.testing.assert_allclose(x[idx_b], np.linalg.solve(B, b[idx_b]), rtol=1e-13)
    Ms = M.copy()
    Ms[np.ix_(idx_b, idx_b)] = [[1.0, 2.0], [2.0, 1.0]]   # indefinite block
    x = np.asarray(tree_solve(jnp.asarray(Ms), jnp.asarray(b), masks))
    assert np.all(np.isnan(x[idx_b])) and np.all(np.isfinite(x[idx_a]))
    np.testing.assert_allclose(x[idx_a], np.linalg.solve(A, b[idx_a]), rtol=1e-13)
