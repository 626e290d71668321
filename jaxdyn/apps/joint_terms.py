"""Joint terms of the identification model: armature, viscous and Coulomb friction.

The motor torque of dof j is the rigid-body torque plus, per dof,

    tau_j = rnea_j(q, qd, qdd) + armature_j qdd_j + viscous_j qd_j + coulomb_j sign(qd_j)

(the Model fields ``armature``, ``damping`` and ``friction``; ``forward_dynamics`` applies
the first two and not the Coulomb term).  Each term is linear in its coefficient, so it is one
more regressor column.  The full parameter vector follows Gautier and Khalil (1990) and
Pinocchio's per-body grouping: for each body in order, its 10 inertial parameters (see
:mod:`jaxdyn.apps.sysid`), then for each dof of its joint the chosen terms in the order of
:data:`JOINT_TERMS` (e.g. ``[m, mcx, ..., Izz, Ia, Fv, Fs]`` per revolute joint).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentError, ShapeError

JOINT_TERMS = ("armature", "viscous", "coulomb")
"""Per-dof terms, in parameter order: coefficients of qdd_j, qd_j and sign(qd_j)."""
FIELDS = {"armature": "armature", "viscous": "damping", "coulomb": "friction"}
"""The Model field holding each term's coefficient."""


def check_terms(terms) -> tuple:
    """``terms`` as a tuple in :data:`JOINT_TERMS` order; unknown or repeated names raise
    :class:`ArgumentError`."""
    terms = (terms,) if isinstance(terms, str) else tuple(terms)
    bad = [t for t in terms if t not in JOINT_TERMS]
    if bad or len(set(terms)) != len(terms):
        raise ArgumentError(f"joint terms {list(terms)}: each must be one of {JOINT_TERMS}, at most once")
    return tuple(t for t in JOINT_TERMS if t in terms)


class Layout(NamedTuple):
    """Where each parameter sits in the full vector x (p,) = ``10 nb + len(terms) nv``:
    ``x[inertial] == pi`` (10 nb,) and ``x[joint].reshape(nv, T)[j, k]`` is dof j's
    coefficient of ``terms[k]``; ``names`` (p,) = (owner, parameter) with the owner a body
    name (inertial) or a joint name (joint terms)."""
    terms: tuple
    inertial: np.ndarray
    joint: np.ndarray
    names: tuple

    @property
    def p(self) -> int:
        """Length of the full parameter vector."""
        return len(self.names)


INERTIAL_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
"""Names of a body's 10 inertial parameters (Pinocchio's order)."""


def layout(model, terms=()) -> Layout:
    """The :class:`Layout` of the parameters of ``model`` with the joint ``terms``."""
    terms = check_terms(terms)
    T, nb = len(terms), model.nb
    dof_body = np.asarray(model.topology.dof_body)
    inertial, joint, names = np.zeros(10 * nb, int), np.zeros(T * model.nv, int), []
    col = 0
    for b in range(nb):
        inertial[10 * b:10 * b + 10] = np.arange(col, col + 10)
        names += [(model.body_names[b], n) for n in INERTIAL_NAMES]
        col += 10
        for j in np.flatnonzero(dof_body == b):
            joint[T * j:T * j + T] = np.arange(col, col + T)
            suffix = "" if np.sum(dof_body == b) == 1 else f"[{j - np.flatnonzero(dof_body == b)[0]}]"
            names += [(model.joint_names[b] + suffix, t) for t in terms]
            col += T
    return Layout(terms, inertial, joint, tuple(names))


def _columns(qd, qdd, terms):
    """(nv, T): the value multiplying each term's coefficient, per dof."""
    col = {"armature": qdd, "viscous": qd, "coulomb": jnp.sign(qd)}
    return jnp.stack([col[t] for t in terms], -1) if terms else jnp.zeros(qd.shape + (0,), qd.dtype)


def joint_regressor(qd, qdd, terms):
    """(nv, T nv): row j holds dof j's term values at columns j T .. j T + T - 1 (the order of
    ``x[layout.joint]``)."""
    terms = check_terms(terms)
    C = _columns(qd, qdd, terms)
    nv = qd.shape[0]
    return (jnp.eye(nv, dtype=qd.dtype)[:, :, None] * C[None, :, :]).reshape(nv, nv * len(terms))


def joint_torque(model, qd, qdd, terms=JOINT_TERMS):
    """(nv,) the model's joint-term torques ``sum_k coef_k * value_k`` over ``terms`` (all three
    by default: the motor torque on top of :func:`jaxdyn.rnea` without armature)."""
    terms = check_terms(terms)
    C = _columns(qd, qdd, terms)
    coef = jnp.stack([getattr(model, FIELDS[t]) for t in terms], -1) if terms else C
    return jnp.sum(coef * C, -1)


def joint_parameters(model, terms) -> jnp.ndarray:
    """(T nv,) the model's joint-term coefficients in ``x[layout.joint]`` order."""
    terms = check_terms(terms)
    if not terms:
        return jnp.zeros(0, model.mass.dtype)
    return jnp.stack([getattr(model, FIELDS[t]) for t in terms], -1).reshape(-1)


def with_joint_parameters(model, xj, terms):
    """The model with the joint-term coefficients xj (T nv,) (``x[layout.joint]`` order) set."""
    terms = check_terms(terms)
    xj = jnp.asarray(xj)
    if xj.shape != (len(terms) * model.nv,):
        raise ShapeError(f"joint parameters for terms {terms} must have shape ({len(terms) * model.nv},), "
                         f"got {xj.shape}")
    X = xj.reshape(model.nv, len(terms))
    return model.replace(**{FIELDS[t]: X[:, k] for k, t in enumerate(terms)})
