"""Spatial algebra against its dense 6x6 definitions (Featherstone Table 1) and IK."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn import spatial as sp
from jaxdyn.spatial import inertia as si
from jaxdyn.spatial.rotations import exp3, log3, quat_to_rot, rot_to_quat


def rand_X(r):
    qq = r.normal(size=4)
    return sp.Transform(quat_to_rot(jnp.asarray(qq / np.linalg.norm(qq))).T, jnp.asarray(r.normal(size=3)))


def test_transform_ops_match_matrices():
    r = np.random.default_rng(0)
    for _ in range(5):
        X, Y = rand_X(r), rand_X(r)
        m, f = jnp.asarray(r.normal(size=6)), jnp.asarray(r.normal(size=6))
        X6 = sp.to_matrix(X)
        np.testing.assert_allclose(sp.apply_motion(X, m), X6 @ m, atol=1e-12)
        np.testing.assert_allclose(sp.apply_force(X, f), sp.to_force_matrix(X) @ f, atol=1e-12)
        np.testing.assert_allclose(sp.to_force_matrix(X), np.linalg.inv(X6).T, atol=1e-12)
        np.testing.assert_allclose(sp.apply_force_T(X, f), X6.T @ f, atol=1e-12)
        np.testing.assert_allclose(sp.apply_motion_inv(X, m), np.linalg.solve(X6, m), atol=1e-12)
        np.testing.assert_allclose(sp.to_matrix(sp.compose(Y, X)), sp.to_matrix(Y) @ X6, atol=1e-12)
        np.testing.assert_allclose(sp.to_matrix(sp.inverse(X)), np.linalg.inv(X6), atol=1e-12)
        Xb = sp.from_matrix(X6)
        np.testing.assert_allclose(Xb.r, X.r, atol=1e-12)
        # X^T I X of a symmetric matrix that is not a rigid-body inertia (an articulated inertia),
        # one object and a batch-last stack of 3 (lane 1 is this one), against the 6x6 products
        G = r.normal(size=(6, 6))
        I = jnp.asarray(G @ G.T)
        np.testing.assert_allclose(sp.congruence(X, I), X6.T @ I @ X6, atol=1e-11)
        lanes = lambda *a: jnp.stack(a, -1)
        Xs = sp.Transform(lanes(X.E.T, X.E, Y.E), lanes(-X.r, X.r, Y.r))
        np.testing.assert_allclose(sp.congruence(Xs, lanes(2 * I, I, I))[..., 1], X6.T @ I @ X6, atol=1e-11)
        # cross products and their duality: (v x)^T = -(v x*)
        np.testing.assert_allclose(sp.cross_motion(m, f), sp.crm(m) @ f, atol=1e-12)
        np.testing.assert_allclose(sp.cross_force(m, f), sp.crf(m) @ f, atol=1e-12)
        # X (v x m) = (X v) x (X m)
        np.testing.assert_allclose(sp.apply_motion(X, sp.cross_motion(m, f)),
                                   sp.cross_motion(sp.apply_motion(X, m), sp.apply_motion(X, f)), atol=1e-12)


def test_rotx_featherstone_convention_and_xtov():
    th = 0.3
    E = sp.rotx(th).E
    np.testing.assert_allclose(E, [[1, 0, 0], [0, np.cos(th), np.sin(th)], [0, -np.sin(th), np.cos(th)]])
    small = sp.compose(sp.xlt(jnp.array([1e-4, 2e-4, 0.0])), sp.rotz(1e-4))
    # first-order accurate: the error is second order, |theta| |r| ~ 2e-8
    np.testing.assert_allclose(sp.XtoV(small), [0, 0, 1e-4, 1e-4, 2e-4, 0], atol=1e-7)


def test_inertia_compact_ops():
    r = np.random.default_rng(1)
    for _ in range(5):
        m = r.uniform(0.5, 2)
        I = si.mcI(m, jnp.asarray(r.normal(size=3)), jnp.asarray(jaxdyn.robots.random_inertia(r, m)))
        X = rand_X(r)
        I6 = si.to_matrix(I)
        v = jnp.asarray(r.normal(size=6))
        np.testing.assert_allclose(si.apply(I, v), I6 @ v, atol=1e-12)
        X6 = sp.to_matrix(X)
        np.testing.assert_allclose(si.to_matrix(si.transform_to_parent(X, I)), X6.T @ I6 @ X6, atol=1e-12)
        np.testing.assert_allclose(si.to_matrix(si.from_vector(si.to_vector(I))), I6, atol=1e-14)
        np.testing.assert_allclose(si.to_matrix(si.from_pseudo_inertia(si.pseudo_inertia(I))), I6, atol=1e-12)
        assert np.linalg.eigvalsh(np.asarray(si.pseudo_inertia(I))).min() > 0
    theta = jnp.asarray(r.normal(size=10))
    Ilc = si.from_log_cholesky(theta)
    assert float(Ilc.m) > 0 and np.linalg.eigvalsh(np.asarray(si.pseudo_inertia(Ilc))).min() > 0


def test_rotation_maps():
    r = np.random.default_rng(2)
    for _ in range(5):
        w = jnp.asarray(r.normal(size=3))
        R = exp3(w)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        np.testing.assert_allclose(exp3(log3(R)), R, atol=1e-10)
        np.testing.assert_allclose(quat_to_rot(rot_to_quat(R)), R, atol=1e-12)
    assert np.all(np.isfinite(jax.grad(lambda w: jnp.sum(exp3(w)))(jnp.zeros(3))))


def test_inverse_kinematics_reaches_reachable_pose():
    m = jaxdyn.robots.puma560()
    q_goal = jnp.array([0.3, -0.4, 0.5, 0.2, 0.6, -0.3])
    R, p = jaxdyn.frame_pose(m, q_goal, "ee")
    q, ok, it, err = jaxdyn.inverse_kinematics(m, "ee", R, p, q_goal + 0.2)
    assert bool(ok) and int(it) < 100
    R2, p2 = jaxdyn.frame_pose(m, q, "ee")
    np.testing.assert_allclose(p2, p, atol=1e-9)
    np.testing.assert_allclose(R2, R, atol=1e-9)
    # an unreachable target is reported as not converged
    q, ok, it, err = jaxdyn.inverse_kinematics(m, "ee", R, p + 10.0, q_goal, max_iters=30)
    assert not bool(ok) and float(err) > 1.0


def _swap(n=6):
    """Permutation between Pinocchio's [linear; angular] and Featherstone's [angular; linear]."""
    return np.roll(np.eye(n), 3, axis=0)


def test_se3_maps_and_placements_match_pinocchio():
    """exp6 / log6 against pin.exp6 / pin.log6; from_placement's Plücker transform acts on a
    motion as Pinocchio's placement actInv does and carries an inertia as its act does
    (congruence); roty / rotz equal the placements of pure rotations (pin.utils.rotate)."""
    pin = pytest.importorskip("pinocchio")
    P = _swap()
    r = np.random.default_rng(3)
    for _ in range(5):
        v, w = r.normal(size=3), r.normal(size=3)
        w *= min(1.0, 2.5 / np.linalg.norm(w))                 # |w| < pi: the log is unique
        R, p = sp.exp6(jnp.asarray(v), jnp.asarray(w))
        M = pin.exp6(pin.Motion(v, w))
        np.testing.assert_allclose(R, M.rotation, atol=1e-12)
        np.testing.assert_allclose(p, M.translation, atol=1e-12)
        np.testing.assert_allclose(np.concatenate(sp.log6(R, p)), pin.log6(M).vector, atol=1e-10)
        X = sp.from_placement(R, p)
        m = r.normal(size=6)                                   # Pinocchio's order
        np.testing.assert_allclose(sp.to_matrix(X) @ (P @ m), P @ M.actInv(pin.Motion(m)).vector, atol=1e-12)
        Y = pin.Inertia.Random()
        np.testing.assert_allclose(sp.congruence(X, jnp.asarray(P @ Y.matrix() @ P.T)),
                                   P @ M.act(Y).matrix() @ P.T, atol=1e-11)
        np.testing.assert_allclose(sp.skew(jnp.asarray(v)) @ w, np.cross(v, w), atol=1e-14)
    for f, ax in ((sp.roty, "y"), (sp.rotz, "z")):
        Xr = f(0.7)
        want = sp.from_placement(jnp.asarray(pin.utils.rotate(ax, 0.7)), jnp.zeros(3))
        np.testing.assert_allclose(sp.to_matrix(Xr), sp.to_matrix(want), atol=1e-14)
