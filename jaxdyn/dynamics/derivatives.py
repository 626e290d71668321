"""Partial derivatives of inverse and forward dynamics in Pinocchio's conventions.

``rnea_derivatives`` / ``aba_derivatives`` return what Pinocchio's ``computeRNEADerivatives``
/ ``computeABADerivatives`` return: the Jacobians of tau = RNEA(q, qd, qdd) and of
qdd = ABA(q, qd, tau) with respect to q (in the tangent space at q: columns are derivatives
along ``jaxdyn.integrate(model, q, e_j t)`` at t = 0, so (nv, nv) for every joint type,
quaternions included) and to qd, plus M (resp. M^-1 = d qdd / d tau).

Method "analytic" (default): the O(n^2) algorithm of Carpentier & Mansard (2018), with
every term written once for one state and for batch-last chunks
(:mod:`jaxdyn.dynamics.derivative_sweeps`).  Every body's velocity v_i, acceleration a_i
(gravity as the base acceleration), spatial inertia I_i and every dof's motion subspace
column J_k are taken in one fixed frame per tree (the root body's frame at q; see
:mod:`jaxdyn.dynamics.crba` for why not the world); v and a are sums over the dofs that move
a body.  Moving joint k by its tangent displaces its whole subtree rigidly by J_k, which
gives, with p = parent of k's body,

    u_k    = v_p x J_k                          (d v_j / d q_k = J_k x v_j + u_k)
    dA_q,k = a_p x J_k + v_p x u_k              (d a_j / d q_k = J_k x a_j + dA_q,k + u_k x v_j)
    dA_v,k = v_k x J_k + u_k                    (d a_j / d qd_k = dA_v,k - v_j x J_k)

and with B_j = v_j x* I_j - I_j v_j x + (. x* h_j), h_j = I_j v_j (the derivative of
f_j = I_j a_j + v_j x* h_j along a change u of v_j) and the subtree sums IC, BC, F of I, B, f:

    d tau_c / d q_k  = J_c^T (IC_d dA_q,k + BC_d u_k) + [c strictly above k] J_c^T (J_k x* F_k)
    d tau_c / d qd_k = J_c^T (IC_d dA_v,k + BC_d J_k)
    M_ck             = J_c^T IC_d J_k

where d is the deeper of the two bodies (of dofs c and k; the terms vanish unless one is an
ancestor of the other).  All S are constant in the child frame (``jaxdyn.model.joints``), so
d J_c / d q_k = J_k x J_c for k above c.  Per-body terms are O(n); the pairwise assembly is
one masked (nv, nv) product per matrix.  ABA's derivatives follow from RNEA's (Carpentier &
Mansard, Sec. IV): d qdd / d x = -M^-1 d tau / d x at qdd = ABA(q, qd, tau); here qdd =
M^-1 (tau - h) with h and M from the same terms (h: the joint forces at qdd = 0) and M^-1 by
nested Schur complements over the tree's branches (:mod:`jaxdyn.dynamics.tree_inverse`; for a
traced topology, e.g. a stack's lanes, Gauss-Jordan sweeps on all of M); no LAPACK call, NaN
where M is not positive definite.

Method "autodiff": reverse-mode automatic differentiation of ``rnea`` / ``aba`` through the
tangent map (nv vector-Jacobian products through the scans), kept as the independent
reference for the analytical sweeps.

Batches: ``derivatives_batch`` runs a batch in chunks of ``chunk`` states, one after the other
(``lax.map``), so memory is bounded by ``chunk`` states: the analytic method on batch-last
chunks, autodiff as vmapped chunks; with several devices (e.g. two host devices on a 2-core
CPU) each runs its share of the chunks (``shard_map``, as :func:`jaxdyn.aba_batch`).
``jax.vmap`` of the analytic per-state functions over states of one model runs the same
chunks on one device (a ``custom_vmap`` rule, instead of batching every small product;
vmap vs batch figures in ``benchmarks/results/grad.json``).
"""
from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from .._typing import Configuration, JointMatrix, Tangent
from ..errors import ArgumentError, ShapeError
from ..model.configuration import integrate
from ..model.model import Model, check_state
from . import derivative_sweeps as ds
from .aba import aba
from .aba_steps import same
from ..compiled import DOT_OPTIONS, cpu_jit, exact_rule, for_cpu_options, tracing_for
from .chunks import default_chunk, device_count, map_chunks, replicated, split_rows
from .common import batched_like, materialize, vmap_axes
from .minv import minv
from .crba import crba
from .rnea import rnea

METHODS = ("analytic", "autodiff")


def _check_method(method):
    if method not in METHODS:
        raise ArgumentError(f"method must be one of {METHODS}, got {method!r}")


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


def _analytic(fn, model: Model, q, qd, x, i=None, topo=None):
    """Carpentier & Mansard's derivatives (:mod:`jaxdyn.dynamics.derivative_sweeps`) of one
    state (q (nq,), qd, x (nv,)) or a chunk (q (C, nq), qd, x (C, nv); ``i`` its traced index,
    for the fusion barriers; ``topo`` the model's topology, computed once for all chunks):
    (nv, nv) or (C, nv, nv) each."""
    terms = ds.aba_derivatives_terms if fn == "aba" else ds.rnea_derivatives_terms
    last = (lambda a: a) if q.ndim == 1 else (lambda a: jnp.moveaxis(a, 0, -1))
    keep = same if i is None else partial(materialize, i=i)
    out = terms(model, *ds.state_transforms(model, q), last(qd), last(x), keep=keep, topo=topo)
    return out if q.ndim == 1 else tuple(jnp.moveaxis(a, -1, 0) for a in out)


@lru_cache(maxsize=None)
def _batchable(fn, cpu_options):
    """:func:`_analytic` of one state whose ``jax.vmap`` over states of one model runs the
    batch-last chunks of :func:`derivatives_batch` (a ``custom_vmap`` rule, on the caller's
    device; a batched model keeps the plain vmap), wrapped in a ``custom_jvp`` whose rule
    differentiates the one-state terms: derivatives of the derivatives, also under vmap,
    take the plain path (``custom_vmap`` has no differentiation rule of its own).
    ``cpu_options``: as for :func:`jaxdyn.dynamics.aba._batchable`."""

    @jax.custom_batching.custom_vmap
    def one(model, q, qd, x):
        return _analytic(fn, model, q, qd, x)

    @one.def_vmap
    @exact_rule
    def rule(axis_size, in_batched, model, q, qd, x):
        if any(jax.tree_util.tree_leaves(in_batched[0])):
            out = jax.vmap(partial(_analytic, fn), in_axes=tuple(vmap_axes(in_batched)))(model, q, qd, x)
            return out, (True,) * 3
        q, qd, x = (batched_like(a, b, axis_size) for a, b in zip((q, qd, x), in_batched[1:]))
        with tracing_for(cpu_options):
            return _derivatives_batch(model, q, qd, x, None, fn, default_chunk(None, CHUNK[fn], "matrices"), "analytic", 1), (True,) * 3

    @jax.custom_jvp
    def terms(model, q, qd, x):
        return one(model, q, qd, x)

    @terms.defjvp
    @exact_rule
    def rule_jvp(primals, tangents):
        out, tan = jax.jvp(partial(_analytic, fn), primals, tangents)
        # Under vmap JAX keeps one set of output batch axes for ``one`` and this rule, and
        # ``one``'s vmap rule batches every output: tie every primal output to every state
        # argument and model parameter (a select of two equal values, which XLA folds away) so
        # that this rule's outputs are batched alike (M alone does not depend on qd or x).
        floats = [a for a in jax.tree_util.tree_leaves(primals) if jnp.issubdtype(a.dtype, jnp.floating)]
        p = jnp.isnan(sum(jnp.sum(a).astype(out[0].dtype) for a in floats))
        return tuple(jnp.where(p, a, a) for a in out), tan

    return terms


@cpu_jit(static_argnames=("method",), options=DOT_OPTIONS)
def rnea_derivatives(model: Model, q: Configuration, qd: Tangent, qdd: Tangent,
                     method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dtau_dq (nv, nv), dtau_dqd (nv, nv), M (nv, nv)) of tau = RNEA(q, qd, qdd).

    dtau_dq is taken in the tangent space at q (Pinocchio's ``computeRNEADerivatives``);
    gravity is included, joint damping is not (as ``rnea``).  ``method``: "analytic"
    (Carpentier & Mansard 2018, O(n^2)) or "autodiff" (reverse mode through ``rnea``).
    """
    check_state(model, q=q, qd=qd, qdd=qdd)
    _check_method(method)
    if method == "analytic":
        return _batchable("rnea", for_cpu_options())(model, q, qd, qdd)
    dq, dv = _state_jacobians(lambda qq, vv: rnea(model, qq, vv, qdd), model, q, qd)
    return dq, dv, crba(model, q)


@cpu_jit(static_argnames=("method",), options=DOT_OPTIONS)
def aba_derivatives(model: Model, q: Configuration, qd: Tangent, tau: Tangent,
                    method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dqdd_dq (nv, nv), dqdd_dqd (nv, nv), Minv (nv, nv)) of qdd = ABA(q, qd, tau).

    dqdd_dq is taken in the tangent space at q (Pinocchio's ``computeABADerivatives``);
    dqdd_dtau = Minv.  No joint damping (as ``aba``).  ``method="analytic"``:
    -M^-1 (d tau / d q, d tau / d qd) at qdd = ABA(q, qd, tau) (Carpentier & Mansard 2018);
    "autodiff": reverse mode through ``aba``.
    """
    check_state(model, q=q, qd=qd, tau=tau)
    _check_method(method)
    if method == "analytic":
        return _batchable("aba", for_cpu_options())(model, q, qd, tau)
    dq, dv = _state_jacobians(lambda qq, vv: aba(model, qq, vv, tau), model, q, qd)
    return dq, dv, minv(model, q)


CHUNK = {"aba": 32, "rnea": 32}
"""Default states per chunk of :func:`derivatives_batch` per ``fn``: the fastest of 8 to 64 on
one CPU device, B = 2048 (figures: ``benchmarks/results/design_measurements.md``)."""


def derivatives_batch(model: Model, Q, QD, X, fn="aba", chunk=None, method="analytic", devices=None,
                      out=None):
    """``aba_derivatives`` (fn="aba") or ``rnea_derivatives`` (fn="rnea") of B states at once.

    Q (B, nq), QD (B, nv), X (B, nv) (tau, resp. qdd).  Returns the three (B, nv, nv) arrays.
    Runs chunks of ``chunk`` states (default :data:`CHUNK` for ``fn`` on the CPU, 4096 on other
    backends: :func:`jaxdyn.dynamics.chunks.default_chunk`) one after the other,
    so memory stays bounded: the analytic method on batch-last chunks
    (:mod:`jaxdyn.dynamics.derivative_sweeps`; a top-level call on CPU is compiled with
    :data:`jaxdyn.compiled.DOT_OPTIONS`; inside your own function compile it with
    ``jaxdyn.jit``), autodiff as vmapped chunks.  The result equals ``vmap`` of the
    per-state function.

    ``devices``: how many devices of the default backend share the batch (static), as in
    :func:`jaxdyn.aba_batch`: by default all of them on the CPU backend when B * nb >=
    :data:`jaxdyn.dynamics.chunks.MULTI_DEVICE_MIN_WORK`, else 1 (two cores need two host devices,
    ``jax.config.update("jax_num_cpu_devices", 2)`` before any JAX work).

    ``out``: None, or three (B, nv, nv) JAX arrays of the result's dtype (typically the
    previous call's result) whose buffers a top-level call reuses for the results: they are
    donated (deleted, as with ``jax.jit``'s ``donate_argnums``; use the returned arrays).
    Without it every call writes its 3 B nv^2 numbers into new memory, which glibc maps
    fresh for blocks this large (page faults on every call; talos_reduced, B = 4096:
    34.8 -> 25.9 µs per state with ``out``, min of 8 calls alternated with the other modes
    in ``benchmarks/results/allocator.json``).  Inside your own jit ``out`` is an ordinary
    input that the chunk loop writes into.
    """
    if fn not in ("aba", "rnea"):
        raise ArgumentError(f"fn must be 'aba' or 'rnea', got {fn!r}")
    chunk = default_chunk(chunk, CHUNK[fn], "matrices")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ArgumentError(f"chunk must be a positive int, got {chunk!r}")
    _check_method(method)
    B = jnp.shape(Q)[0] if jnp.ndim(Q) == 2 else None
    for nm, a, n in (("Q", Q, model.nq), ("QD", QD, model.nv), ("X", X, model.nv)):
        if jnp.ndim(a) != 2 or jnp.shape(a) != (B, n):
            raise ShapeError(f"derivatives_batch: {nm} must have shape (B, {n}) for model {model.name!r}, "
                             f"got {jnp.shape(a)}")
    if B == 0:
        raise ShapeError("derivatives_batch: empty batch (B = 0)")
    if out is not None:
        out = _check_out(out, B, model, jnp.result_type(Q, QD, X))
    ndev = device_count(devices, B * model.nb, "derivatives_batch")
    Q, QD, X, out = split_rows((Q, QD, X, out), chunk, ndev)
    return _batch_compiled(replicated(model, ndev), Q, QD, X, out, fn=fn, chunk=chunk, method=method, devices=ndev)


def _check_out(out, B, model, dtype):
    """``out`` of :func:`derivatives_batch` as a tuple of three (B, nv, nv) arrays of ``dtype``,
    else a named error."""
    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise ArgumentError(f"derivatives_batch: out must be a tuple of three (B, nv, nv) arrays, got {type(out).__name__}"
                            + (f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""))
    for j, a in enumerate(out):
        if jnp.shape(a) != (B, model.nv, model.nv) or jnp.result_type(a) != dtype:
            raise ShapeError(f"derivatives_batch: out[{j}] must be a ({B}, {model.nv}, {model.nv}) {dtype} array "
                             f"for model {model.name!r}, got {jnp.shape(a)} {jnp.result_type(a)}")
    if len({id(a) for a in out}) < 3:
        raise ArgumentError("derivatives_batch: out must hold three different arrays (each is donated)")
    return tuple(out)


def _derivatives_batch(model: Model, Q, QD, X, out, fn, chunk, method, devices):
    if method == "analytic":
        topo = ds.topology(model)
        return map_chunks(lambda i, x: _analytic(fn, model, *x, i=i, topo=topo), (Q, QD, X), chunk, devices, init=out)
    f = jax.vmap(partial(aba_derivatives if fn == "aba" else rnea_derivatives, model, method=method))
    return map_chunks(lambda _, x: f(*x), (Q, QD, X), chunk, devices, init=out)


_batch_compiled = cpu_jit(_derivatives_batch, static_argnames=("fn", "chunk", "method", "devices"),
                          options=DOT_OPTIONS, donate_argnums=(4,))
