"""M(q)^-1 by a registered method (``minv_methods()``): "aba" (one ABA factorization and the
tau-linear passes per unit vector, O(n nv)), "cholesky" (CRBA + Cholesky inverse, one
factorization per tree), and "operator" (Rodriguez-Kreutz innovations inverse, registered by
the operator module).  A tree with a singular pivot (a massless leaf on a joint) gives NaN
on its own rows and columns with every method.

``jax.vmap(minv)`` over states of one model (method "aba") runs batch-last chunks instead of
batching the per-state solves: M by :func:`jaxdyn.dynamics.derivative_sweeps.crba_terms`, M^-1
by nested Schur complements over the tree's branches
(:func:`jaxdyn.dynamics.tree_inverse.tree_spd_inverse`, NaN per tree like the per-state
method), a ``custom_vmap`` rule (:func:`minv_batch`); derivatives differentiate the per-state
method.  A batched model (``jaxdyn.stack``) or a topology unknown while tracing keeps the plain
vmap."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Configuration, JointMatrix
from ..errors import ArgumentError
from ..model.model import Model, check_state
from .aba import ABAFactor, aba_factor, aba_solve
from .crba import crba
from . import closed_form
from . import derivative_sweeps as ds
from .chunks import default_chunk, map_chunks
from .common import batched_over_states, materialize
from .registry import MINV_METHODS, minv_methods, register_minv
from ..compiled import cpu_jit


def _minv_aba(model: Model, q):
    return minv_from_factor(model, aba_factor(model, q))


def minv_from_factor(model: Model, fac: ABAFactor):
    """M^-1 (nv, nv), symmetrized, from an ABA factorization (:func:`jaxdyn.dynamics.aba.aba_factor`):
    the tau-linear passes on every unit vector, O(n nv)."""
    dt = fac.Xup.r.dtype
    z = jnp.zeros((model.nb, 6), dt)
    cols = jax.vmap(lambda e: aba_solve(model, fac, z, z, e, jnp.zeros(6, dt)))(jnp.eye(model.nv, dtype=dt))
    Mi = cols.T
    return 0.5 * (Mi + Mi.T)


@register_minv("cholesky")
def _minv_cholesky(model: Model, q):
    """CRBA + Cholesky inverse.  One factorization per tree when the topology is known while
    tracing (:func:`jaxdyn.dynamics.closed_form.tree_solve` on every unit vector), so a tree
    whose M block is singular gets NaN on its own rows and columns only, as with "aba";
    else (a ``jaxdyn.stack`` member) one for the whole M."""
    M = crba(model, q)
    masks = closed_form.tree_dof_masks(model)
    Mi = jax.vmap(lambda e: closed_form.tree_solve(M, e, masks), out_axes=1)(jnp.eye(model.nv, dtype=M.dtype))
    return 0.5 * (Mi + Mi.T)


@cpu_jit(static_argnames=('method',))
def minv(model: Model, q: Configuration, method="aba") -> JointMatrix:
    """M(q)^-1 (nv, nv), symmetric.  ``method``: see the module docstring."""
    check_state(model, q=q)
    if method not in MINV_METHODS:
        raise ArgumentError(f"unknown minv method {method!r}; available: {minv_methods()}")
    return MINV_METHODS[method](model, q)


def minv_batch(model: Model, q, chunk=None):
    """M^-1 of B states of one model with a static topology, q (B, nq) -> (B, nv, nv),
    symmetric, in batch-last chunks of ``chunk`` states (default 32 on the CPU,
    :func:`jaxdyn.dynamics.chunks.default_chunk`): M by
    :func:`jaxdyn.dynamics.derivative_sweeps.crba_terms`, its inverse by
    :func:`jaxdyn.dynamics.derivative_sweeps.inverse_mass_matrix`.  What ``jax.vmap(minv)``
    runs."""
    topo = ds.topology(model)

    def run(i, qc):
        keep = partial(materialize, i=i)
        Mi = ds.inverse_mass_matrix(topo, ds.crba_terms(model, *ds.state_transforms(model, qc), keep=keep, topo=topo), keep)
        Mi = jnp.moveaxis(Mi, -1, 0)
        return 0.5 * (Mi + jnp.swapaxes(Mi, -1, -2))

    return map_chunks(run, q, default_chunk(chunk, 32, "matrices"))


register_minv("aba")(batched_over_states(
    _minv_aba, minv_batch, _minv_aba,
    plain_vmap=lambda model: not isinstance(ds.topology(model).pair, np.ndarray)))
# Method "aba": one state by _minv_aba; jax.vmap over states of one model with a static topology
# on batch-last chunks (minv_batch); derivatives and batched models through _minv_aba.
