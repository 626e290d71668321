"""M(q)^-1 by a registered method (``minv_methods()``): "aba" (one ABA factorization and the
tau-linear passes per unit vector, O(n nv)), "cholesky" (CRBA + Cholesky inverse, one
factorization per tree), and "operator" (Rodriguez-Kreutz innovations inverse, registered by
the operator module).  A tree with a singular pivot (a massless leaf on a joint) gives NaN
on its own rows and columns with every method."""
from __future__ import annotations


import jax
import jax.numpy as jnp

from .._typing import Configuration, JointMatrix
from ..errors import ArgumentError
from ..model.model import Model, check_state
from .aba import ABAFactor, aba_factor, aba_solve
from .crba import crba
from . import closed_form
from .registry import MINV_METHODS, minv_methods, register_minv
from ..compiled import cpu_jit


@register_minv("aba")
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
