"""The forward-dynamics front door: one name, many methods, identical answers."""
from __future__ import annotations


import jax.numpy as jnp

from .._typing import BodyWrenches, Configuration, Gravity, Tangent
from ..model.model import Model, check_state
from .aba import aba
from . import closed_form
from .crba import crba
from .registry import FD_METHODS as _METHODS, methods, register_method
from .rnea import rnea
from ..compiled import cpu_jit

@register_method("aba")
def _fd_aba(model, q, qd, tau, f_ext=None, gravity=None):
    return aba(model, q, qd, tau, f_ext=f_ext, gravity=gravity)


@register_method("crba")
def _fd_crba(model, q, qd, tau, f_ext=None, gravity=None):
    """CRBA + Cholesky: qdd = M^-1 (tau - h), h from RNEA with qdd = 0 (O(n^3) reference).
    One Cholesky factorization per tree when the topology is known while tracing
    (:func:`jaxdyn.dynamics.closed_form.tree_solve`), so a tree whose M block is singular
    gets NaN on its own dofs only, as with ABA; else (a ``jaxdyn.stack`` member) one for
    the whole M."""
    M = crba(model, q)
    h = rnea(model, q, qd, jnp.zeros_like(qd), f_ext=f_ext, gravity=gravity)
    return closed_form.tree_solve(M, tau - h, closed_form.tree_dof_masks(model))


@cpu_jit(static_argnames=('method',))
def forward_dynamics(model: Model, q: Configuration, qd: Tangent, tau: Tangent, method="aba",
                     f_ext: BodyWrenches | None = None, gravity: Gravity | None = None) -> Tangent:
    """Joint accelerations qdd (nv,) under torques tau, with the model's joint damping.

    ``tau_eff = tau - damping * qd``.  ``method`` picks the algorithm (see :func:`methods`);
    every method returns the same numbers to round-off.
    """
    check_state(model, q=q, qd=qd, tau=tau)
    if method not in _METHODS:
        raise ValueError(f"unknown forward-dynamics method {method!r}; available: {methods()}")
    tau_eff = tau - model.damping * qd
    return _METHODS[method](model, q, qd, tau_eff, f_ext=f_ext, gravity=gravity)
