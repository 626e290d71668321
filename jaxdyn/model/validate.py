"""Physical validity of bodies and models, shared by the builders and :func:`validate`.

Inertia tolerance.  A rotational inertia I about the COM (3x3) of a body of mass m passes
when it is finite, symmetric and its smallest principal moment is >= -tol with
``tol = max(1e-9 lambda_max, 1e-12 m)``: relative round-off, or the inertia of a body
1 micrometre across (1e-12 kg m^2 per kg), so exported files with entries like 1e-20 load.
The triangle inequality I1 + I2 >= I3 is checked with the same tolerance.

Policies for data that fails (``inertia=``):

* ``"raise"``: :class:`~jaxdyn.errors.ModelError` naming the body (default of ``build_model``);
* ``"warn"``: keep the data as given, warn (default of ``load_urdf``: loads what Pinocchio
  loads, which keeps such inertias as they are);
* ``"repair"``: replace I by :func:`nearest_valid_inertia` (negative principal moments
  clipped to 0, then projected onto the triangle inequality) and warn with the change.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import JaxdynWarning, ModelError
from . import joints as J

INERTIA_POLICIES = ("raise", "warn", "repair")
_ROUNDOFF_PER_KG = 1e-12   # kg m^2 per kg: a body 1 micrometre across


def inertia_tolerance(lam, m):
    """Absolute tolerance on principal moments ``lam`` (3,) of a body of mass m."""
    return max(1e-9 * float(np.max(np.abs(lam))), _ROUNDOFF_PER_KG * max(float(m), 0.0))


def nearest_valid_inertia(I):
    """A valid inertia near I (Frobenius), same principal axes: the principal moments are
    clipped at 0 (the nearest positive-semidefinite matrix), then, if I1 + I2 < I3, projected
    orthogonally onto the plane I1 + I2 = I3 (each moves by d / 3)."""
    lam, V = np.linalg.eigh(0.5 * (I + I.T))
    lam = np.maximum(lam, 0.0)
    d = lam[2] - lam[0] - lam[1]
    if d > 0:
        lam = lam + np.array([d, d, -d]) / 3
    return (V * lam) @ V.T


def check_inertia(I, m, where, policy="raise", triangle="raise"):
    """Check one body's inertia (3, 3) about its COM; returns it (repaired under "repair").

    ``triangle``: "raise" | "warn" | "ignore" for a violated triangle inequality alone (real
    URDFs, e.g. ANYmal C's camera links, violate it slightly).
    """
    if policy not in INERTIA_POLICIES:
        raise ModelError(f"inertia policy must be one of {INERTIA_POLICIES}, got {policy!r}")
    I = np.asarray(I, float)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise ModelError(f"{where}: inertia must be a finite 3x3 matrix, got {I!r}")
    if not np.allclose(I, I.T, atol=1e-9 * max(1.0, np.abs(I).max())):
        raise ModelError(f"{where}: inertia is not symmetric: {I.tolist()}")
    lam = np.linalg.eigvalsh(I)
    tol = inertia_tolerance(lam, m)
    msg = None
    if lam[0] < -tol:
        msg = f"{where}: inertia is not positive (semi)definite, principal moments {lam.tolist()}"
    elif lam[0] + lam[1] < lam[2] - tol:
        msg = f"{where}: principal moments {lam.tolist()} violate the triangle inequality I1 + I2 >= I3"
        if triangle == "ignore":
            return I
        if triangle == "warn" and policy != "repair":
            warnings.warn(msg + " (accepted: data from a file)", category=JaxdynWarning, stacklevel=3)
            return I
    if msg is None:
        return I
    if policy == "raise":
        raise ModelError(msg)
    if policy == "warn":
        warnings.warn(msg + " (kept as given; inertia='repair' fixes it)", category=JaxdynWarning, stacklevel=3)
        return I
    R = nearest_valid_inertia(I)
    warnings.warn(msg + f"; repaired to a nearby valid inertia, principal moments "
                  f"{np.linalg.eigvalsh(R).tolist()} (change {np.abs(R - I).max():.3g})",
                  category=JaxdynWarning, stacklevel=3)
    return R


def _problems_one(model, lead=""):
    """Problems of one (unstacked) model as messages naming the body."""
    out = []
    name = model.name
    arrays = {f: np.asarray(getattr(model, f)) for f in
              ("Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia", "armature", "damping",
               "friction", "gravity", "frame_E", "frame_r")}
    for f, a in arrays.items():
        if not np.all(np.isfinite(a)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            out.append(f"{name}{lead}: {f} has a non-finite entry at {bad}")
    if out:
        return out
    jt = np.asarray(model.jtype)
    for f in ("armature", "damping", "friction"):
        if np.any(arrays[f] < 0):
            out.append(f"{name}{lead}: {f} must be nonnegative, got {arrays[f].tolist()}")
    if arrays["gravity"].shape != (3,):
        out.append(f"{name}{lead}: gravity must have shape (3,), got {arrays['gravity'].shape}")
    for i in range(model.nb):
        bn = model.body_names[i] if i < len(model.body_names) else f"body{i}"
        where = f"{name}{lead}: body {i} ({bn!r})"
        E = arrays["Xtree_E"][i]
        if not np.allclose(E @ E.T, np.eye(3), atol=1e-8):
            out.append(f"{where}: Xtree rotation is not orthonormal")
        if int(jt[i]) in (J.REVOLUTE, J.REVOLUTE_UB, J.PRISMATIC, J.HELICAL):
            n = np.linalg.norm(arrays["axis"][i])
            if abs(n - 1.0) > 1e-6:
                out.append(f"{where}: joint axis {arrays['axis'][i].tolist()} has norm {n:.6g}; it must be a unit vector")
        if arrays["mass"][i] < 0:
            out.append(f"{where}: negative mass {arrays['mass'][i]}")
    return out


def validate(model, *, triangle="raise", raise_errors=True):
    """Check a Model's parameters outside jit (e.g. after ``model.replace(...)`` or an optimizer
    step): finite values, orthonormal Xtree rotations, unit joint axes, nonnegative masses,
    armature, damping and friction, and physically valid inertias (see the module docstring for the
    tolerance; ``triangle="ignore"`` skips the triangle inequality, which some real URDFs
    violate).  A stacked model is checked robot by robot.

    Returns the list of problems (empty when valid); with ``raise_errors=True`` (default) a
    non-empty list raises :class:`~jaxdyn.errors.ModelError` listing them all.
    """
    import jax
    mass = np.asarray(model.mass)
    lead_shape = mass.shape[:-1]
    problems = []
    for idx in np.ndindex(*lead_shape):
        one = jax.tree_util.tree_map(lambda x: np.asarray(x)[idx], model)
        lead = f"[robot {idx[0] if len(idx) == 1 else idx}]" if lead_shape else ""
        ps = _problems_one(one, lead)
        if not ps:
            m, I = np.asarray(one.mass), np.asarray(one.inertia)
            for i in range(one.nb):
                bn = one.body_names[i] if i < len(one.body_names) else f"body{i}"
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        check_inertia(I[i], m[i], f"{one.name}{lead}: body {i} ({bn!r})", "raise",
                                      "ignore" if triangle == "ignore" else "raise")
                except ModelError as e:
                    ps.append(str(e))
        problems += ps
    if problems and raise_errors:
        raise ModelError("invalid model:\n  " + "\n  ".join(problems))
    return problems
