"""The public batchable entry points of the core algorithms.  The algorithms never import this
module; the batch-last layout, chunks, fusion barriers and per-member stacks of their
``jax.vmap`` are :mod:`jaxdyn.vmap_rule`.
"""
from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from ._typing import BodyWrenches, Configuration, Gravity, JointMatrix, Tangent
from .dynamics.aba import aba_jvp, aba_passes
from .dynamics.common import check_f_ext, check_gravity, moving_jvp
from .dynamics.crba import crba_passes
from .dynamics.derivative_sweeps import aba_derivatives_terms, rnea_derivatives_terms
from .dynamics.derivatives import METHODS as DERIVATIVE_METHODS, state_jacobians
from .dynamics.minv import minv_aba
from .dynamics.registry import FD_METHODS, MINV_METHODS
from .dynamics.rnea import rnea_passes
from .errors import ArgumentError
from .model.model import Model, cast, check_state, state_dtype
from .tree import same
from .vmap_rule import batchable

tmap = jax.tree_util.tree_map


def _diag(st, p):
    """diag(armature ** p) of every lane of a stack, (B, nv, nv)."""
    return jnp.where(jnp.eye(st.nv, dtype=bool)[None], st.armature[:, None, :] ** p, 0)


def _lanes(st, x):
    """A dof vector (nv,) or (B, nv) as (B, nv), one row per lane of a stack."""
    return jnp.broadcast_to(x, st.armature.shape)


# ------------------------------------------------------------------------- entry points

def _prepare(model, **states):
    """Shape checks, then the model and states in the states' common floating dtype."""
    check_state(model, **states)
    dt = state_dtype(*states.values())
    return cast(model, dt), [jnp.asarray(x, dt) for x in states.values()]


@lru_cache(maxsize=None)
def _aba(f_ext_frame):
    core = lambda m, q, qd, tau, f, g, keep=same: aba_passes(m, q, qd, tau, f, g, f_ext_frame, keep)
    fn = jax.custom_jvp(batchable(core, 128, (("q", "v", "v", "b", None), lambda st, q, qd, tau, f, g: _lanes(st, tau) / st.armature)))
    fn.defjvp(partial(aba_jvp, f_ext_frame), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("f_ext_frame",))
def aba(model: Model, q: Configuration, qd: Tangent, tau: Tangent, f_ext: BodyWrenches | None = None,
        gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Forward dynamics qdd = M^-1 (tau - h + J^T f_ext) (nv,) by the articulated-body
    algorithm (:mod:`jaxdyn.dynamics.aba`).

    Args:
      q (nq,), qd (nv,), tau (nv,): configuration, velocity, joint torques.
      f_ext: optional (nb, 6) external spatial forces on the bodies, rows [force; moment]
        (Pinocchio order), in each body's frame (``f_ext_frame="local"``, Pinocchio's
        convention) or in world coordinates about the world origin (``"world"``).
      gravity: optional (3,) world gravity overriding ``model.gravity``.
    Joint damping is not applied (as in Pinocchio's ``aba``); :func:`forward_dynamics`
    applies it.  Derivatives use the implicit rule of
    :func:`jaxdyn.dynamics.aba.aba_jvp`; ``jax.vmap`` runs batch-last chunks
    (:mod:`jaxdyn.batching`).
    """
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if model.nv == 0:
        return jnp.zeros_like(tau)
    return _aba(f_ext_frame)(model, q, qd, tau, f_ext, gravity)


@lru_cache(maxsize=None)
def _rnea(f_ext_frame):
    core = lambda m, q, qd, qdd, f, g, keep=same: rnea_passes(m, q, qd, qdd, f, g, f_ext_frame, keep)[0]
    fn = jax.custom_jvp(batchable(core, 128, (("q", "v", "v", "b", None), lambda st, q, qd, qdd, f, g: st.armature * _lanes(st, qdd))))
    fn.defjvp(_autodiff_rule(core, tie=False), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("f_ext_frame",))
def rnea(model: Model, q: Configuration, qd: Tangent, qdd: Tangent, f_ext: BodyWrenches | None = None,
         gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext (nv,), including
    ``armature * qdd``, by the recursive Newton-Euler algorithm (:mod:`jaxdyn.dynamics.rnea`).
    Arguments as :func:`aba`."""
    model, (q, qd, qdd) = _prepare(model, q=q, qd=qd, qdd=qdd)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if model.nv == 0:
        return jnp.zeros_like(qdd)
    return _rnea(f_ext_frame)(model, q, qd, qdd, f_ext, gravity)


@lru_cache(maxsize=None)
def _crba():
    core = lambda m, q, keep=same: crba_passes(m, q, keep)
    fn = jax.custom_jvp(batchable(core, 32, (("q",), lambda st, q: _diag(st, 1))))
    fn.defjvp(_autodiff_rule(core, tie=False), symbolic_zeros=True)
    return fn


@jax.jit
def crba(model: Model, q: Configuration) -> JointMatrix:
    """Joint-space inertia matrix M(q) (nv, nv), symmetric, armature on the diagonal, by the
    composite-rigid-body algorithm (:mod:`jaxdyn.dynamics.crba`)."""
    model, (q,) = _prepare(model, q=q)
    if model.nv == 0:
        return jnp.zeros((0, 0), q.dtype)
    return _crba()(model, q)


def _tied(out, primals):
    """``out`` made to depend on every float leaf of ``primals`` (a select of two equal values,
    which XLA folds away): under ``jax.vmap`` a derivative rule's outputs are then batched like
    the ``custom_vmap`` rule's, which batches every output."""
    floats = [a for a in jax.tree_util.tree_leaves(primals) if jnp.issubdtype(jnp.result_type(a), jnp.floating)]
    p = jnp.isnan(sum(jnp.sum(a).astype(jax.tree_util.tree_leaves(out)[0].dtype) for a in floats))
    return tmap(lambda a: jnp.where(p, a, a), out)


def _autodiff_rule(core, tie=True):
    """A ``custom_jvp(..., symbolic_zeros=True)`` rule differentiating ``core`` (one state)
    itself, with respect to the arguments that move (:func:`jaxdyn.dynamics.common.moving_jvp`);
    ``tie``: outputs batched like the ``custom_vmap`` rule's (:func:`_tied`)."""
    def rule(primals, tangents):
        out, tan = moving_jvp(core, primals, tangents)
        if tan is None:
            tan = tmap(jnp.zeros_like, out)
        return (_tied(out, primals) if tie else out), tan
    return rule


@lru_cache(maxsize=None)
def _minv():
    core = lambda m, q, keep=same: minv_aba(m, q, keep)
    fn = jax.custom_jvp(batchable(core, 32, (("q",), lambda st, q: _diag(st, -1))))
    fn.defjvp(_autodiff_rule(core), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("method",))
def minv(model: Model, q: Configuration, method="aba") -> JointMatrix:
    """M(q)^-1 (nv, nv), symmetric.  ``method``: "aba" (the articulated-body factorization
    applied to every unit vector, :mod:`jaxdyn.dynamics.minv`), "cholesky" (CRBA and one
    Cholesky factorization per tree) or "operator" (Rodriguez and Kreutz's innovations
    inverse, :func:`jaxdyn.operators.minv_operator`).  A tree with a singular pivot (a massless
    leaf on a joint) gives NaN on its own rows and columns with every method."""
    model, (q,) = _prepare(model, q=q)
    if method not in MINV_METHODS:
        raise ArgumentError(f"unknown minv method {method!r}; available: {tuple(sorted(MINV_METHODS))}")
    if model.nv == 0:
        return jnp.zeros((0, 0), q.dtype)
    if method == "aba":
        return _minv()(model, q)
    return MINV_METHODS[method](model, q)


@partial(jax.jit, static_argnames=("method", "f_ext_frame"))
def forward_dynamics(model: Model, q: Configuration, qd: Tangent, tau: Tangent, method="aba",
                     f_ext: BodyWrenches | None = None, gravity: Gravity | None = None,
                     f_ext_frame="local") -> Tangent:
    """Joint accelerations qdd (nv,) under torques tau with the model's joint damping,
    tau_eff = tau - damping * qd (Coulomb ``model.friction`` is not applied: a discontinuous
    force that needs a complementarity or event solver, as in Pinocchio's ``aba``).  ``method``: "aba" (:func:`aba`), "crba" (CRBA and a Cholesky
    solve per tree) or one of Saha's and Rodriguez-Kreutz's and Yamane-Nakamura's methods
    (:func:`methods`); every method returns the same numbers to round-off."""
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if method not in FD_METHODS:
        raise ArgumentError(f"unknown forward-dynamics method {method!r}; available: {methods()}")
    tau = tau - model.damping * qd
    if model.nv == 0:
        return jnp.zeros_like(tau)
    if method == "aba":
        return _aba(f_ext_frame)(model, q, qd, tau, f_ext, gravity)
    return FD_METHODS[method](model, q, qd, tau, f_ext, gravity, f_ext_frame)


def methods():
    """Names accepted by ``forward_dynamics(method=...)``."""
    return tuple(sorted(FD_METHODS))


def minv_methods():
    """Names accepted by ``minv(method=...)``."""
    return tuple(sorted(MINV_METHODS))


@lru_cache(maxsize=None)
def _derivatives(fn, f_ext_frame):
    terms = aba_derivatives_terms if fn == "aba" else rnea_derivatives_terms
    core = lambda m, q, qd, x, f, g, keep=same: terms(m, q, qd, x, f, g, f_ext_frame, keep=keep)
    p = -1 if fn == "aba" else 1                   # M^-1 or M on the inactive dofs
    def rest(st, q, qd, x, f, g):
        d = _diag(st, p)
        return jnp.zeros_like(d), jnp.zeros_like(d), d
    f = jax.custom_jvp(batchable(core, 32, (("q", "v", "v", "b", None), rest)))
    f.defjvp(_autodiff_rule(core), symbolic_zeros=True)
    return f


def _check_method(method):
    if method not in DERIVATIVE_METHODS:
        raise ArgumentError(f"method must be one of {DERIVATIVE_METHODS}, got {method!r}")


@partial(jax.jit, static_argnames=("f_ext_frame", "method"))
def rnea_derivatives(model: Model, q: Configuration, qd: Tangent, qdd: Tangent, f_ext: BodyWrenches | None = None,
                     gravity: Gravity | None = None, f_ext_frame="local",
                     method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dtau_dq, dtau_dqd, M), each (nv, nv), of tau = RNEA(q, qd, qdd, f_ext) (Pinocchio's
    ``computeRNEADerivatives``, fext included: dtau_dq in the tangent space at q; gravity
    included, joint damping not).  f_ext, gravity, f_ext_frame as :func:`rnea`: a force given
    in a body's frame turns with the body, one given in world coordinates does not.
    ``method``: "analytic" (Carpentier and Mansard 2018, :mod:`jaxdyn.dynamics.derivatives`)
    or "autodiff" (reverse mode through :func:`rnea`)."""
    model, (q, qd, qdd) = _prepare(model, q=q, qd=qd, qdd=qdd)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    _check_method(method)
    if model.nv == 0:
        return (jnp.zeros((0, 0), q.dtype),) * 3
    if method == "analytic":
        return _derivatives("rnea", f_ext_frame)(model, q, qd, qdd, f_ext, gravity)
    dq, dv = state_jacobians(lambda qq, vv: rnea(model, qq, vv, qdd, f_ext, gravity, f_ext_frame), model, q, qd)
    return dq, dv, crba(model, q)


@partial(jax.jit, static_argnames=("f_ext_frame", "method"))
def aba_derivatives(model: Model, q: Configuration, qd: Tangent, tau: Tangent, f_ext: BodyWrenches | None = None,
                    gravity: Gravity | None = None, f_ext_frame="local",
                    method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dqdd_dq, dqdd_dqd, Minv), each (nv, nv), of qdd = ABA(q, qd, tau, f_ext) (Pinocchio's
    ``computeABADerivatives``, fext included; dqdd_dtau = Minv; no joint damping).  f_ext,
    gravity, f_ext_frame as :func:`aba`.  ``method``: "analytic" (-M^-1 (d tau / d q,
    d tau / d qd) at qdd = ABA(q, qd, tau), Carpentier and Mansard 2018) or "autodiff"
    (reverse mode through :func:`aba`)."""
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    _check_method(method)
    if model.nv == 0:
        return (jnp.zeros((0, 0), q.dtype),) * 3
    if method == "analytic":
        return _derivatives("aba", f_ext_frame)(model, q, qd, tau, f_ext, gravity)
    dq, dv = state_jacobians(lambda qq, vv: aba(model, qq, vv, tau, f_ext, gravity, f_ext_frame), model, q, qd)
    return dq, dv, minv(model, q)


@jax.jit
def bias_forces(model: Model, q: Configuration, qd: Tangent, gravity: Gravity | None = None) -> Tangent:
    """h(q, qd) = C(q, qd) qd + g(q) (Pinocchio's ``nonLinearEffects``), (nv,)."""
    return rnea(model, q, qd, jnp.zeros_like(qd), gravity=gravity)


@jax.jit
def gravity_torques(model: Model, q: Configuration, gravity: Gravity | None = None) -> Tangent:
    """g(q), the generalized gravity (Pinocchio's ``computeGeneralizedGravity``), (nv,)."""
    z = jnp.zeros(model.nv, jnp.result_type(q))
    return rnea(model, q, z, z, gravity=gravity)
