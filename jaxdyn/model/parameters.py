"""The Model's differentiable parameters as a plain dict, for optimizers.

A :class:`~jaxdyn.Model` mixes float parameters with integer topology (parent, joint types,
q/v addresses) and static metadata, so optax cannot update it and ``jax.grad`` needs
``allow_int=True``.  ``parameters(model)`` returns a dict of float arrays only, and
``with_parameters(model, params)`` puts (some of) them back::

    p = jaxdyn.parameters(model, ("mass", "com", "inertia"))
    g = jax.grad(lambda p: loss(jaxdyn.with_parameters(model, p)))(p)
    updates, state = opt.update(g, state, p); p = optax.apply_updates(p, updates)

The algorithms read only the symmetric part of ``inertia`` (``0.5 (I + I^T)``), so its gradient
is symmetric and an optimizer step keeps it symmetric.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import spatial as sp
from ..errors import ArgumentError, ShapeError

PARAMETERS = ("mass", "com", "inertia", "armature", "damping", "friction", "Xtree_E", "Xtree_r", "axis", "pitch",
              "gravity")
"""Float fields of a Model that ``parameters`` may return (joint limits and frame placements
are data, not parameters; ``v_pad`` is padding bookkeeping)."""


def parameters(model, names=PARAMETERS) -> dict:
    """Dict {name: array} of the model's float parameters (shapes as in the Model: mass (nb,),
    com (nb, 3), inertia (nb, 3, 3), armature/damping/friction (nv,), Xtree_E (nb, 3, 3), Xtree_r (nb, 3),
    axis (nb, 3), pitch (nb,), gravity (3,); a leading axis for stacked models)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    for n in names:
        if n not in PARAMETERS:
            raise ArgumentError(f"unknown parameter {n!r}; parameters are {PARAMETERS}")
    return {n: getattr(model, n) for n in names}


def with_parameters(model, params: dict):
    """The model with the given parameters replaced (any subset of :data:`PARAMETERS`).

    Shapes must match the model's fields (ShapeError naming the key).  Works under jit and
    grad; no validation of physical meaning (use :func:`jaxdyn.validate` outside jit).
    """
    if not isinstance(params, dict):
        raise ArgumentError(f"params must be a dict of arrays (from jaxdyn.parameters), got {type(params).__name__}")
    new = {}
    for n, v in params.items():
        if n not in PARAMETERS:
            raise ArgumentError(f"unknown parameter {n!r}; parameters are {PARAMETERS}")
        old = getattr(model, n)
        v = jnp.asarray(v)
        if jnp.shape(v) != jnp.shape(old):
            raise ShapeError(f"parameter {n!r} must have shape {jnp.shape(old)} for model {model.name!r}, "
                             f"got {jnp.shape(v)}")
        if not jnp.issubdtype(v.dtype, jnp.floating):
            raise ShapeError(f"parameter {n!r} must be a floating-point array, got dtype {v.dtype}")
        new[n] = v
    return model.replace(**new)


def body_inertias(model):
    """Compact spatial inertias of every body in its own frame, about its origin: m (nb, ...),
    h = m c (nb, 3, ...), Ibar = Ic + m (|c|^2 1 - c c^T) (nb, 3, 3, ...) (Featherstone 2008,
    Eq. 2.63; :func:`jaxdyn.spatial.inertia.mcI` per body), Ic symmetrized; trailing axes: a
    model per lane."""
    m, c, Ic = model.mass, model.com, model.inertia
    Ic = 0.5 * (Ic + jnp.swapaxes(Ic, 1, 2))
    eye = jnp.eye(3, dtype=m.dtype).reshape((1, 3, 3) + (1,) * (m.ndim - 1))
    Ibar = Ic + m[:, None, None] * (jnp.sum(c * c, 1)[:, None, None] * eye - c[:, :, None] * c[:, None, :])
    return sp.Inertia(m, c * m[:, None], Ibar)


@jax.jit
def log_cholesky_parameters(model):
    """Per-body log-Cholesky parameters theta (nb, 10) of the pseudo-inertias (Rucker & Wensing
    2022; :func:`jaxdyn.spatial.inertia.to_log_cholesky`).  Every real theta is a physically
    consistent body, so optimize theta instead of (mass, com, inertia) when every iterate must
    be valid.  NaN rows for bodies without a positive-definite pseudo-inertia (massless or
    flat bodies)."""
    return jax.vmap(sp.inertia.to_log_cholesky)(body_inertias(model))


@jax.jit
def with_log_cholesky_parameters(model, theta):
    """The model with mass, com and inertia (about the COM) set from theta (nb, 10)."""
    theta = jnp.asarray(theta)
    if theta.shape != (model.nb, 10):
        raise ShapeError(f"theta must have shape (nb, 10) = ({model.nb}, 10) for model {model.name!r}, "
                         f"got {theta.shape}")
    m, c, Ic = jax.vmap(lambda t: sp.inertia.to_mcI(sp.inertia.from_log_cholesky(t)))(theta)
    return model.replace(mass=m, com=c, inertia=Ic)
