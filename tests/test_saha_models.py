"""Saha Table II robots: hand-derived end-effector positions, planar 3R closed-form M and h."""
import sys

import numpy as np
import pytest

import jaxdyn


def test_puma_end_effector_hand_derived():
    m = jaxdyn.robots.puma560()
    # q = 0: X2 = X1, Z2 = Y1; b2 = 0.149 along Y1, a2 = 0.432 and a3 = 0.02 along X1;
    # frame 4 is aligned with frame 1, b4 = 0.432 along Z1; Z6 = Z1 and b6 = 0.056.
    q = np.zeros(6)
    np.testing.assert_allclose(jaxdyn.frame_pose(m, q, "ee")[1], [0.452, 0.149, 0.488], atol=1e-12)
    # theta_1 = 90 deg turns the arm about Z1: (x, y) -> (-y, x)
    q[0] = np.pi / 2
    np.testing.assert_allclose(jaxdyn.frame_pose(m, q, "ee")[1], [-0.149, 0.452, 0.488], atol=1e-12)


def test_stanford_end_effector_hand_derived():
    m = jaxdyn.robots.stanford_arm()
    # q = 0: b1 = 0.1 up Z1; Z2 = Y1 so b2 = 0.1 along Y1; Z3 = -Z1, b4 = 0.6 down.
    q = np.zeros(6)
    np.testing.assert_allclose(jaxdyn.frame_pose(m, q, "ee")[1], [0.0, 0.1, -0.5], atol=1e-12)
    # theta_2 = 90 deg (the paper's initial value) turns Z3 from -Z1 to -X1; b3 = 0.1
    q[1], q[2] = np.pi / 2, 0.1
    np.testing.assert_allclose(jaxdyn.frame_pose(m, q, "ee")[1], [-0.7, 0.1, 0.1], atol=1e-12)


def test_puma_inertias_are_physical_and_match_table_magnitudes():
    m = jaxdyn.robots.puma560()
    for i in range(6):
        lam = np.linalg.eigvalsh(np.asarray(m.inertia[i]))
        assert lam.min() > 0
        assert lam[0] + lam[1] >= lam[2]
    table = vars(sys.modules[jaxdyn.robots.puma560.__module__])["_PUMA"]     # the module's printed table
    printed = np.abs(np.asarray(table["inertia_printed"]))
    for i in range(6):
        np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(np.asarray(m.inertia[i]))), np.sort(printed[i]),
                                   atol=1e-12)
    np.testing.assert_allclose(np.asarray(m.mass), [10.521, 15.761, 8.767, 1.052, 1.052, 0.351])


def test_dh_mass_center_placement_follows_r_definition():
    """[r_i]_{i+1} points from C_i to O_{i+1}: the COM of a planar rod is mid-link."""
    m = jaxdyn.robots.planar3()
    c = jaxdyn.center_of_mass(m, np.zeros(3))
    a, mm = np.array([1.0, 0.8, 0.6]), np.array([1.0, 0.8, 0.6])
    x = (mm[0] * a[0] / 2 + mm[1] * (a[0] + a[1] / 2) + mm[2] * (a[0] + a[1] + a[2] / 2)) / mm.sum()
    np.testing.assert_allclose(c, [x, 0, 0], atol=1e-12)


# ---- planar 3R closed form (independent of the library) -------------------------------
A = np.array([1.0, 0.8, 0.6])
MS = np.array([1.0, 0.8, 0.6])
G = 9.81


def planar_M(q):
    """M = sum m_i Jv_i^T Jv_i + I_i Jw^T Jw for uniform rods (works on complex q)."""
    s = np.cumsum(q)
    de = lambda t: np.array([-np.sin(t), np.cos(t)])
    M = np.zeros((3, 3), dtype=q.dtype)
    for i in range(3):
        Jv = np.zeros((2, 3), dtype=q.dtype)
        for k in range(i + 1):        # COM of link i: sum_{j<i} a_j e(s_j) + a_i/2 e(s_i)
            for j in range(k, i + 1):
                L = A[j] / 2 if j == i else A[j]
                Jv[:, k] += L * de(s[j])
        Jw = np.array([[1.0 if k <= i else 0.0 for k in range(3)]])
        M = M + MS[i] * Jv.T @ Jv + MS[i] * A[i] ** 2 / 12 * Jw.T @ Jw
    return M


def planar_V(q):
    s = np.cumsum(q)
    y, V = 0.0, 0.0
    for i in range(3):
        V = V + MS[i] * G * (y + A[i] / 2 * np.sin(s[i]))
        y = y + A[i] * np.sin(s[i])
    return V


def cstep(f, q, k, h=1e-30):
    dq = np.zeros(3, complex); dq[k] = 1j * h
    return np.imag(f(q + dq)) / h


def planar_h(q, qd):
    """h_i = sum_jk (dM_ij/dq_k - 1/2 dM_jk/dq_i) qd_j qd_k + dV/dq_i (complex-step derivatives)."""
    dM = [cstep(planar_M, q.astype(complex), k) for k in range(3)]
    h = np.zeros(3)
    for i in range(3):
        h[i] = sum((dM[k][i, j] - 0.5 * dM[i][j, k]) * qd[j] * qd[k] for j in range(3) for k in range(3))
        h[i] += cstep(planar_V, q.astype(complex), i)
    return h


@pytest.mark.parametrize("seed", range(4))
def test_planar3_matches_closed_form(seed):
    m = jaxdyn.robots.planar3()
    r = np.random.default_rng(seed)
    q, qd = r.uniform(-3, 3, 3), r.normal(size=3)
    np.testing.assert_allclose(jaxdyn.crba(m, q), planar_M(q), atol=1e-12)
    np.testing.assert_allclose(jaxdyn.bias_forces(m, q, qd), planar_h(q, qd), atol=1e-10)
    np.testing.assert_allclose(jaxdyn.potential_energy(m, q), planar_V(q), atol=1e-12)
