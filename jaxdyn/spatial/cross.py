"""Spatial cross products (Featherstone 2010 Table 1: crm, crf).

Motion ``v = [w; vo]``.  ``v x m = [w x mw; w x mv + vo x mw]`` and ``v x* f = -(v x)^T f``.
``cross_motion`` and ``cross_force`` are component-first (:mod:`jaxdyn.spatial.linalg`): one
vector (6,) or a batch-last stack (6, C).
"""
from __future__ import annotations

import jax.numpy as jnp

from .linalg import cross3
from .transforms import skew


def cross_motion(v, m):
    """v x m (both motion vectors, (6, ...))."""
    w, vo = v[:3], v[3:]
    return jnp.concatenate([cross3(w, m[:3]), cross3(w, m[3:]) + cross3(vo, m[:3])])


def cross_force(v, f):
    """v x* f (v motion, f force, (6, ...))."""
    w, vo = v[:3], v[3:]
    return jnp.concatenate([cross3(w, f[:3]) + cross3(vo, f[3:]), cross3(w, f[3:])])


def crm(v):
    """6x6 matrix of v x (motion cross product)."""
    W, V = skew(v[:3]), skew(v[3:])
    return jnp.block([[W, jnp.zeros_like(W)], [V, W]])


def crf(v):
    """6x6 matrix of v x* (force cross product) = -crm(v)^T."""
    return -crm(v).T
