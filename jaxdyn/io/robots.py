"""Built-in robots: Saha's Table II (Saha 2003) and random trees for tests."""
from __future__ import annotations

import numpy as np

from ..model import joints as J
from ..model.model import build_model
from .dh import from_dh


def planar_chain(lengths, masses, name="planar"):
    """An n-DOF planar chain of revolute joints (DH a_i = lengths, b_i = alpha_i = 0).

    Links are uniform slender rods of length a_i and mass m_i along X_{i+1}: the mass
    center is at the middle, so ``[r_i]_{i+1} = (a_i / 2, 0, 0)``, and
    ``[I_i]_{i+1} = diag(0, m a^2/12, m a^2/12)``.  The chain moves in the X_1-Y_1 plane and
    gravity is -9.81 m/s^2 along Y_1 (a vertical plane): q = 0 is horizontal, q_1 = -pi/2
    hangs down.
    """
    a, m = np.asarray(lengths, float), np.asarray(masses, float)
    if a.ndim != 1 or a.shape != m.shape or a.size == 0:
        raise ValueError(f"lengths and masses must be equal-length 1-D lists, got {a.shape}, {m.shape}")
    n = a.size
    table = np.stack([a, np.zeros(n), np.zeros(n), np.zeros(n)], 1)
    I = np.stack([[0.0, mi * ai**2 / 12, mi * ai**2 / 12] for mi, ai in zip(m, a)])
    r = np.stack([[ai / 2, 0.0, 0.0] for ai in a])
    return from_dh(table, joints="R" * n, mass=m, r=r, inertia=I, gravity=(0.0, -9.81, 0.0), name=name)


def planar3(lengths=(1.0, 0.8, 0.6), masses=(1.0, 0.8, 0.6)):
    """Three-DOF planar RRR arm (Saha Sec. 4; the paper gives no link data, these are ours):
    :func:`planar_chain` of three uniform rods."""
    return planar_chain(lengths, masses, name="planar3")


def double_pendulum(lengths=(1.0, 1.0), masses=(1.0, 1.0)):
    """A double pendulum of two uniform rods in a vertical plane (:func:`planar_chain`):
    hanging at q = (-pi/2, 0), upright at q = (pi/2, 0)."""
    return planar_chain(lengths, masses, name="double_pendulum")


# Saha Table II (i): Stanford arm.  Columns a, b, alpha(deg), theta(deg); m; r; Ixx Iyy Izz.
_STANFORD = dict(
    table=[[0, 0.1, -90, 0], [0, 0.1, -90, 0], [0, 0.0, 0, 0], [0, 0.6, 90, 0], [0, 0, -90, 0], [0, 0, 0, 0]],
    joints="RRPRRR",
    mass=[9, 6, 4, 1, 0.6, 0.5],
    r=[[0, -0.1, 0], [0, 0, 0], [0, 0, 0], [0, -0.1, 0], [0, 0, 0], [0, 0, 0]],
    inertia=[[0.01, 0.02, 0.01], [0.05, 0.06, 0.01], [0.4, 0.4, 0.01], [0.001, 0.001, 0.0005],
             [0.0005, 0.0005, 0.0002], [0.003, 0.001, 0.002]],
)

# Saha Table II (ii): PUMA.  The printed table shows minus signs on I_yy of link 1, I_zz of
# link 3, I_yy of link 4 and I_zz of link 5.  No rigid body has a negative principal moment;
# the magnitudes satisfy the triangle inequality (e.g. link 1: 1.612 <= 1.612 + 0.5091), so we
# read the signs as typesetting artefacts and use the magnitudes.
_PUMA = dict(
    table=[[0, 0, -90, 0], [0.432, 0.149, 0, 0], [0.02, 0, 90, 0], [0, 0.432, -90, 0], [0, 0, 90, 0],
           [0, 0.056, 0, 0]],
    joints="RRRRRR",
    mass=[10.521, 15.761, 8.767, 1.052, 1.052, 0.351],
    r=[[0, 0, 0.054], [0.292, 0, 0], [-0.02, 0, -0.197], [0, -0.057, 0], [0, 0, -0.007], [0, 0, 0.019]],
    inertia_printed=[[1.612, -1.612, 0.5091], [0.4898, 8.0783, 8.2672], [3.3768, 3.3768, -0.3009],
                     [0.181, -0.1273, 0.181], [0.0735, 0.1273, -0.0735], [0.0071, 0.0071, 0.0141]],
)


def stanford_arm():
    """The six-DOF Stanford arm of Saha Table II(i) (joint 3 prismatic; gravity -Z_1)."""
    d = _STANFORD
    return from_dh(d["table"], joints=d["joints"], mass=d["mass"], r=d["r"], inertia=d["inertia"],
                   degrees=True, name="stanford_arm")


def puma560():
    """The six-DOF PUMA of Saha Table II(ii) (gravity -Z_1); principal moments = |printed|."""
    d = _PUMA
    return from_dh(d["table"], joints=d["joints"], mass=d["mass"], r=d["r"],
                   inertia=np.abs(np.asarray(d["inertia_printed"])), degrees=True, name="puma560")


def _random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def random_inertia(rng, m):
    """A random physically valid rotational inertia about the COM (box of random sides)."""
    sides = rng.uniform(0.05, 0.5, 3)
    a, b, c = sides**2
    Ip = m / 12 * np.array([b + c, a + c, a + b])
    R = _random_rotation(rng)
    return R @ np.diag(Ip) @ R.T


def random_tree(nb, branching=0.5, seed=0, joint_types=("revolute", "prismatic", "helical", "spherical",
                                                       "revolute_unbounded", "planar"),
                floating_base=False):
    """A random kinematic tree for tests.

    Body i attaches to body i-1 with probability 1 - branching, else to a uniformly random
    earlier body.  Joint types are drawn from ``joint_types`` (names); with ``floating_base``
    body 0 has a FREE joint.  Axes, Xtree, masses, COMs and inertias are random but physical.
    """
    rng = np.random.default_rng(seed)
    parent, jt, E, r, axis, mass, com, I, pitch = [], [], [], [], [], [], [], [], []
    codes = [J.joint_code(t) for t in joint_types]
    for i in range(nb):
        if i == 0:
            parent.append(-1)
        else:
            parent.append(i - 1 if rng.uniform() >= branching else int(rng.integers(0, i)))
        t = J.FREE if (i == 0 and floating_base) else codes[int(rng.integers(len(codes)))]
        jt.append(t)
        E.append(_random_rotation(rng))
        r.append(rng.uniform(-0.5, 0.5, 3))
        ax = rng.normal(size=3)
        axis.append(ax / np.linalg.norm(ax))
        m = rng.uniform(0.5, 2.0)
        mass.append(m)
        com.append(rng.uniform(-0.2, 0.2, 3))
        I.append(random_inertia(rng, m))
        pitch.append(rng.uniform(-0.2, 0.2) if t == J.HELICAL else 0.0)
    return build_model(parent=parent, jtype=jt, Xtree_E=np.stack(E), Xtree_r=np.stack(r),
                       axis=np.stack(axis), mass=mass, com=np.stack(com), inertia=np.stack(I),
                       pitch=pitch, name=f"random_tree{nb}_s{seed}")
