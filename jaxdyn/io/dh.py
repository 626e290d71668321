"""Standard Denavit-Hartenberg builder in Saha's convention (Saha 2003, Appendix A, Fig. 8).

Frame i (axes X_i, Y_i, Z_i) is attached to link i-1 and Z_i is the axis of joint i.  Link i
carries frame i+1 and goes from frame i to frame i+1 by
``Rot_z(theta_i) Trans_z(b_i) Trans_x(a_i) Rot_x(alpha_i)``
(so ``[a_i]_i = (a_i cos theta_i, a_i sin theta_i, b_i)`` and Q_i as in Sec. 3).

jaxdyn body i-1 (0-based) is link i.  Its frame is frame i moved by the joint variable (the
frame at joint i that turns with link i); the rest of the link transform is the constant
``Xtree`` of the next body.  Link data follow Sec. 3 of the paper:

* ``r``: ``[r_i]_{i+1}``, the vector from the mass center C_i to the origin O_{i+1} of the
  next joint, in frame i+1: the mass center is at ``-r`` in frame i+1;
* ``inertia``: ``[I_i]_{i+1}``, about C_i in frame i+1 (3 principal moments or 3x3).

Named frames ``dh1 .. dh{n+1}`` are Saha's frames (``dh1`` = base, fixed to the world) and
``ee`` = ``dh{n+1}``.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import DHError, ModelError
from ..model import joints as J
from ..model.model import build_model

_ROW_KEYS = ("a", "b", "alpha", "theta")


def _rotz(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _rotx(t):
    c, s = np.cos(t), np.sin(t)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def _parse_table(table):
    if isinstance(table, (list, tuple)) and table and isinstance(table[0], Mapping):
        rows, extra = [], []
        for i, row in enumerate(table):
            missing = [k for k in _ROW_KEYS if k not in row]
            unknown = [k for k in row if k not in _ROW_KEYS + ("joint", "m", "r", "I")]
            if missing or unknown:
                raise DHError(f"DH row {i + 1}: missing columns {missing}, unknown columns {unknown}; "
                              f"expected {_ROW_KEYS} (+ optional joint, m, r, I)")
            rows.append([float(row[k]) for k in _ROW_KEYS])
            extra.append(row)
        return np.asarray(rows), extra
    arr = np.asarray(table, float)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise DHError(f"DH table must have 4 columns (a, b, alpha, theta) per row, got shape {arr.shape}")
    return arr, [{} for _ in range(arr.shape[0])]


def from_dh(table, *, joints=None, mass=None, r=None, inertia=None, degrees=False,
            gravity=(0.0, 0.0, -9.81), name="dh", q_lower=None, q_upper=None):
    """Build a serial Model from a standard DH table (Saha, App. A).

    Args:
      table: (n, 4) rows ``[a_i, b_i, alpha_i, theta_i]`` or a list of mappings with keys
        a, b, alpha, theta (+ optional ``joint`` "R"/"P", ``m``, ``r``, ``I``).  For a revolute
        joint theta_i is a constant offset added to q_i; for a prismatic one b_i is.
      joints: "R"/"P" per row (string like "RRPRRR" or list); default all revolute.
      mass (n,), r (n, 3) = [r_i]_{i+1}, inertia (n, 3) principal or (n, 3, 3): link data.
      degrees: alpha and theta columns in degrees.
    """
    T, extra = _parse_table(table)
    n = T.shape[0]
    if n == 0:
        raise DHError("DH table has no rows")
    if degrees:
        T = T.copy(); T[:, 2:] = np.deg2rad(T[:, 2:])
    if joints is None:
        joints = [row.get("joint", "R") for row in extra]
    joints = list(joints)
    if len(joints) != n or any(j not in ("R", "P") for j in joints):
        raise DHError(f"joints must give 'R' or 'P' for each of the {n} rows, got {joints!r}")
    if mass is None:
        mass = [row.get("m", 0.0) for row in extra]
    if r is None:
        r = [row.get("r", (0.0, 0.0, 0.0)) for row in extra]
    if inertia is None:
        inertia = [row.get("I", (0.0, 0.0, 0.0)) for row in extra]
    mass, r = np.asarray(mass, float), np.asarray(r, float)
    inertia = np.asarray(inertia, float)
    if mass.shape != (n,) or r.shape != (n, 3):
        raise DHError(f"mass must be ({n},) and r ({n}, 3); got {mass.shape}, {r.shape}")
    if inertia.shape == (n, 3):
        inertia = np.stack([np.diag(x) for x in inertia])
    if inertia.shape != (n, 3, 3):
        raise DHError(f"inertia must be ({n}, 3) principal moments or ({n}, 3, 3); got {inertia.shape}")
    if np.any(T[:, 0] < 0):
        i = int(np.argmax(T[:, 0] < 0))
        raise DHError(f"DH row {i + 1}: a_i = {T[i, 0]} must be nonnegative (Saha App. A rule 3)")

    # Placement of frame i+1 in the joint-moved frame of link i: the constant part
    # Rot_z(theta) Trans_z(b) Trans_x(a) Rot_x(alpha).  Rot_z and Trans_z commute, so the
    # joint variable (q added to theta for R, to b for P) can act first, and the table's
    # theta / b entry is the constant offset in both cases.
    Rf, pf = [], []
    for i in range(n):
        a, b, al, th = T[i]
        Rf.append(_rotz(th) @ _rotx(al))
        pf.append(np.array([0.0, 0.0, b]) + _rotz(th) @ np.array([a, 0.0, 0.0]))
    Xtree_E = [np.eye(3)] + [Rf[i].T for i in range(n - 1)]
    Xtree_r = [np.zeros(3)] + [pf[i] for i in range(n - 1)]
    com = np.stack([pf[i] - Rf[i] @ r[i] for i in range(n)])
    Ic = np.stack([Rf[i] @ inertia[i] @ Rf[i].T for i in range(n)])
    frames = [("dh1", -1, np.eye(3), np.zeros(3))]
    for i in range(n):
        frames.append((f"dh{i + 2}", i, Rf[i].T, pf[i]))
    frames.append(("ee", n - 1, Rf[n - 1].T, pf[n - 1]))
    try:
        return build_model(
            parent=np.arange(n) - 1,
            jtype=[J.REVOLUTE if j == "R" else J.PRISMATIC for j in joints],
            Xtree_E=np.stack(Xtree_E), Xtree_r=np.stack(Xtree_r),
            axis=np.tile([0.0, 0.0, 1.0], (n, 1)), mass=mass, com=com, inertia=Ic,
            gravity=gravity, name=name, body_names=[f"link{i + 1}" for i in range(n)],
            joint_names=[f"joint{i + 1}" for i in range(n)], frames=frames,
            q_lower=q_lower, q_upper=q_upper)
    except ModelError as e:
        raise DHError(f"{name}: {e}") from None
