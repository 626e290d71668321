"""Partial derivatives of inverse and forward dynamics in Pinocchio's conventions.

``rnea_derivatives`` / ``aba_derivatives`` return what Pinocchio's ``computeRNEADerivatives``
/ ``computeABADerivatives`` return: the Jacobians of tau = RNEA(q, qd, qdd) and of
qdd = ABA(q, qd, tau) with respect to q (in the tangent space at q: columns are derivatives
along ``jaxdyn.integrate(model, q, e_j t)`` at t = 0, so (nv, nv) for every joint type,
quaternions included) and to qd, plus M (resp. M^-1 = d qdd / d tau).

Method: automatic differentiation of the exact algorithms through the tangent map (one
reverse-mode Jacobian, nv vector-Jacobian products), which is exact to round-off.  Carpentier &
Mansard's analytical O(n^2) sweeps (2018) are the faster route and may replace the body of
these functions; names, shapes and conventions stay.

Batches: ``jax.vmap(jax.jacfwd(aba))`` over thousands of states materializes nv tangents of
every intermediate of every state at once (talos_reduced, B = 1024: > 7 GB) and can exhaust
memory.  ``derivatives_batch`` runs any of these functions over a batch in vmapped chunks
(``lax.map(..., batch_size=chunk)``), so memory is bounded by ``chunk`` states.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from ..errors import ArgumentError, ShapeError
from ..model.configuration import integrate
from ..model.model import Model, check_state
from .aba import aba
from .minv import minv
from .crba import crba
from .rnea import rnea


def _state_jacobians(f, model, q, qd):
    """(d f / d q in the tangent at q, d f / d qd) of f(q, qd) (nv,), both (nv, nv), by one
    reverse-mode Jacobian over the stacked tangent (dq, dqd): nv vector-Jacobian products.

    (Forward mode, ``jax.jacfwd``, aborted the XLA:CPU compiler -- a CHECK on a dot output
    layout in its dot emitter, jaxlib 0.9.2 to 0.10.2 -- for some models passed as traced
    arguments; reverse mode compiled on every model tried.)
    """
    nv = model.nv
    z = jnp.zeros(2 * nv, jnp.result_type(qd))
    J = jax.jacrev(lambda x: f(integrate(model, q, x[:nv]), qd + x[nv:]))(z)
    return J[:, :nv], J[:, nv:]


@jax.jit
def rnea_derivatives(model: Model, q, qd, qdd):
    """(dtau_dq (nv, nv), dtau_dqd (nv, nv), M (nv, nv)) of tau = RNEA(q, qd, qdd).

    dtau_dq is taken in the tangent space at q (Pinocchio's ``computeRNEADerivatives``);
    gravity is included, joint damping is not (as ``rnea``).
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    dq, dv = _state_jacobians(lambda qq, vv: rnea(model, qq, vv, qdd), model, q, qd)
    return dq, dv, crba(model, q)


@jax.jit
def aba_derivatives(model: Model, q, qd, tau):
    """(dqdd_dq (nv, nv), dqdd_dqd (nv, nv), Minv (nv, nv)) of qdd = ABA(q, qd, tau).

    dqdd_dq is taken in the tangent space at q (Pinocchio's ``computeABADerivatives``);
    dqdd_dtau = Minv.  No joint damping (as ``aba``).
    """
    check_state(model, q=q, qd=qd, tau=tau)
    dq, dv = _state_jacobians(lambda qq, vv: aba(model, qq, vv, tau), model, q, qd)
    return dq, dv, minv(model, q)


@partial(jax.jit, static_argnames=("fn", "chunk"))
def derivatives_batch(model: Model, Q, QD, X, fn="aba", chunk=64):
    """``aba_derivatives`` (fn="aba") or ``rnea_derivatives`` (fn="rnea") of B states at once.

    Q (B, nq), QD (B, nv), X (B, nv) (tau, resp. qdd).  Returns the three (B, nv, nv) arrays.
    Runs vmapped chunks of ``chunk`` states one after the other, so memory stays bounded
    (see the module docstring); the result equals ``vmap`` of the per-state function.
    """
    funcs = {"aba": aba_derivatives, "rnea": rnea_derivatives}
    if fn not in funcs:
        raise ArgumentError(f"fn must be 'aba' or 'rnea', got {fn!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ArgumentError(f"chunk must be a positive int, got {chunk!r}")
    B = jnp.shape(Q)[0] if jnp.ndim(Q) == 2 else None
    for nm, a, n in (("Q", Q, model.nq), ("QD", QD, model.nv), ("X", X, model.nv)):
        if jnp.ndim(a) != 2 or jnp.shape(a) != (B, n):
            raise ShapeError(f"derivatives_batch: {nm} must have shape (B, {n}) for model {model.name!r}, "
                             f"got {jnp.shape(a)}")
    f = funcs[fn]
    return lax.map(lambda x: f(model, *x), (Q, QD, X), batch_size=min(chunk, B))
