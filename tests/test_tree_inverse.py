"""tree_spd_inverse (nested Schur complements over a tree's branches) against numpy's inverse
on matrices with branch-induced sparsity: trees numbered depth-first and breadth-first (a
permuted result), multi-dof bodies, a forest, a batch, and NaN on a tree that is not
positive definite on its rows and columns (the other tree's block stays exact); the dense SPD
inverses beneath them (pd_inverse, spd_inverse_components) likewise."""
import jax
import jax.numpy as jnp
import numpy as np

from jaxdyn.dynamics.common import pd_inverse, spd_inverse_components
from jaxdyn.dynamics.tree_inverse import branches, tree_spd_inverse


def tree_masks(parent, ndof):
    """(pair, same) (nv, nv) as derivative_sweeps.Topology for bodies with ``parent`` (-1: a
    root; parents before children) and ``ndof`` dofs each, dofs numbered body by body."""
    body = np.repeat(np.arange(len(parent)), ndof)
    anc = np.eye(len(parent), dtype=bool)
    for i, p in enumerate(parent):
        if p >= 0:
            anc[i] |= anc[p]
    return anc[body][:, body].astype(np.int32), (body[:, None] == body[None, :]).astype(np.int32)


def spd_with_sparsity(pair, same, rng):
    """sum_k x_k x_k^T + a positive diagonal, x_k supported on dof k and the dofs above it:
    M_ck != 0 only where one of c, k is above the other (pair or its transpose)."""
    nv = pair.shape[0]
    idx = np.arange(nv)
    up = pair.astype(bool) & (~same.astype(bool) | (idx[None, :] <= idx[:, None]))
    X = rng.normal(size=(nv, nv)) * up
    M = X.T @ X + np.diag(rng.uniform(0.5, 1.5, nv))
    assert np.all((np.abs(M) > 0) <= (pair | pair.T).astype(bool))
    return M


CASES = {
    "chain": ([-1, 0, 1, 2], [1, 1, 1, 1]),
    "humanoid-like, depth first": ([-1, 0, 1, 2, 1, 4, 1, 0, 7, 0, 9], [6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
    "breadth first, multi-dof": ([-1, 0, 0, 1, 2, 1, 2, 3], [3, 2, 1, 1, 3, 1, 2, 1]),
    "forest": ([-1, 0, 1, -1, 3, 3, 0], [6, 1, 2, 1, 1, 1, 1]),
}


def test_tree_inverse_equals_numpy():
    rng = np.random.default_rng(0)
    for name, (parent, ndof) in CASES.items():
        pair, same = tree_masks(parent, ndof)
        roots = branches(pair, same)
        order = np.concatenate([r.dofs() for r in roots])
        assert sorted(order) == list(range(pair.shape[0])), name     # every dof once
        Ms = np.stack([spd_with_sparsity(pair, same, rng) for _ in range(3)], -1)
        inverse = jax.jit(lambda M, roots=roots: tree_spd_inverse(M, roots))    # one program per shape
        got = np.asarray(inverse(jnp.asarray(Ms)))
        for b in range(3):
            want = np.linalg.inv(Ms[..., b])
            np.testing.assert_allclose(got[..., b], want, rtol=0, atol=1e-12 * np.abs(want).max(), err_msg=name)
        one = np.asarray(inverse(jnp.asarray(Ms[..., 0])))
        np.testing.assert_allclose(one, got[..., 0], rtol=0, atol=1e-13 * np.abs(one).max(), err_msg=name)
    assert [len(r.seg) for r in branches(*tree_masks(*CASES["humanoid-like, depth first"]))] == [6]
    assert len(branches(*tree_masks(*CASES["forest"]))) == 2
    bfs = np.concatenate([r.dofs() for r in branches(*tree_masks(*CASES["breadth first, multi-dof"]))])
    assert not np.array_equal(bfs, np.arange(len(bfs)))     # the permuted path is exercised


def test_tree_inverse_nan_on_a_tree_that_is_not_positive_definite():
    """As jaxdyn.minv: NaN on the rows and columns of the tree whose block is singular."""
    parent, ndof = CASES["forest"]
    pair, same = tree_masks(parent, ndof)
    roots = branches(pair, same)
    M = spd_with_sparsity(pair, same, np.random.default_rng(1))
    first = np.arange(sum(ndof[:3]))                     # bodies 0, 1, 2 and 6 form the first tree
    first = np.concatenate([first, [pair.shape[0] - 1]])
    second = np.setdiff1d(np.arange(pair.shape[0]), first)
    bad = M.copy()
    leaf = pair.shape[0] - 1                             # body 6's dof: a leaf of the first tree
    bad[leaf, :] = bad[:, leaf] = 0.0
    got = np.asarray(tree_spd_inverse(jnp.asarray(bad), roots))
    assert np.all(np.isnan(got[np.ix_(first, first)]))
    want = np.linalg.inv(M[np.ix_(second, second)])
    np.testing.assert_allclose(got[np.ix_(second, second)], want, rtol=0, atol=1e-12 * np.abs(want).max())
    assert np.all(np.isnan(got[np.ix_(first, second)])) and np.all(np.isnan(got[np.ix_(second, first)]))
    good = np.asarray(tree_spd_inverse(jnp.asarray(M), roots))
    assert np.all(good[np.ix_(first, second)] == 0.0)


def test_tree_inverse_of_no_dofs():
    """A model without dofs: an empty inverse (one state and a batch), as Gauss-Jordan gives."""
    assert branches(np.zeros((0, 0), int), np.zeros((0, 0), int)) == ()
    assert tree_spd_inverse(jnp.zeros((0, 0)), ()).shape == (0, 0)
    assert tree_spd_inverse(jnp.zeros((0, 0, 3)), ()).shape == (0, 0, 3)


def test_dense_spd_inverses_against_numpy():
    """pd_inverse (LAPACK Cholesky, matrices on the last axes) and spd_inverse_components (the
    unrolled pivots of the sweeps, matrices on the first axes, batch last) equal numpy's inverse
    for n = 1, 3, 6 (a scalar, a ball joint, a free joint), one matrix and a batch, and give
    NaN for a matrix that is not positive definite (the other batch members stay exact)."""
    def components(A):                                   # (k, n, n) through the batch-last layout
        return np.moveaxis(np.asarray(spd_inverse_components(jnp.asarray(np.moveaxis(A, 0, -1)))), -1, 0)

    rng = np.random.default_rng(3)
    for n in (1, 3, 6):
        X = rng.normal(size=(5, n, n))
        A = X @ np.swapaxes(X, 1, 2) + 0.1 * np.eye(n)
        want = np.linalg.inv(A)
        tol = 1e-10 * np.abs(want).max()
        np.testing.assert_allclose(np.asarray(pd_inverse(jnp.asarray(A))), want, rtol=0, atol=tol)
        np.testing.assert_allclose(np.asarray(pd_inverse(jnp.asarray(A[0]))), want[0], rtol=0, atol=tol)
        np.testing.assert_allclose(components(A), want, rtol=0, atol=tol)
        bad = A.copy()
        bad[2] = -bad[2]                                  # negative definite
        for got in (np.asarray(pd_inverse(jnp.asarray(bad))), components(bad)):
            assert np.all(np.isnan(got[2]))
            np.testing.assert_allclose(np.delete(got, 2, 0), np.delete(want, 2, 0), rtol=0, atol=tol)
