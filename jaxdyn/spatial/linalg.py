"""Component-first small linear algebra: one formulation for one object and for a batch.

Every function indexes vector and matrix *components on the leading axes* and treats any
trailing axes as a batch, so the same code serves one object (a vector (6,), a matrix
(6, 6)) and a batch-last chunk (a vector (6, C), a matrix (6, 6, C): C states on the minor
axis, the layout of :mod:`jaxdyn.vmap_rule`).  Products are explicit sums of broadcast
multiplies (no ``dot``): XLA fuses them into vectorized loops over the trailing axes, and
no matrix-product precision setting (e.g. TF32 on a GPU) applies to them.
"""
from __future__ import annotations

import jax.numpy as jnp
from jax import lax

HIGHEST = lax.Precision.HIGHEST
"""Precision of jaxdyn's few ``dot`` products ((nv, nv) matrices): full f32 products (a GPU's
default TF32 keeps a 10-bit mantissa)."""


def _parts(x, axis):
    """x split along ``axis`` into its components (that axis removed)."""
    return [lax.squeeze(p, (axis,)) for p in lax.split(x, (1,) * x.shape[axis], axis)]


def _mul(x, y):
    """x * y with size-1 axes broadcast: for operands of one rank and dtype a single ``lax.mul``
    (``jnp.multiply``'s promotion costs more to trace than the product), else ``x * y``."""
    if x.ndim != y.ndim or x.dtype != y.dtype:
        return x * y
    shape = tuple(map(max, x.shape, y.shape))
    return lax.mul(*(a if a.shape == shape else lax.broadcast_in_dim(a, shape, tuple(range(a.ndim))) for a in (x, y)))


def tree_sum(terms):
    """Sum of a non-empty list of arrays of one shape and dtype, as a balanced tree of adds:
    depth log2 n, not a chain of n - 1 (XLA's simplifier moves a reshape one add down such a
    chain per pass over the program)."""
    while len(terms) > 1:
        terms = [lax.add(terms[i], terms[i + 1]) if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def mm(a, b):
    """Matrix product (i, k, ...) x (k, j, ...) -> (i, j, ...)."""
    if a.ndim == 2 and b.ndim == 2:
        return jnp.matmul(a, b, precision=HIGHEST)
    if a.shape[1] == 0:
        return jnp.zeros(a.shape[:1] + b.shape[1:2] + jnp.broadcast_shapes(a.shape[2:], b.shape[2:]), a.dtype)
    ak, bk = _parts(a, 1), _parts(b, 0)
    return tree_sum([_mul(lax.expand_dims(x, (1,)), lax.expand_dims(y, (0,))) for x, y in zip(ak, bk)])


def mv(a, v):
    """Matrix-vector product (i, k, ...) x (k, ...) -> (i, ...)."""
    if a.ndim == 2 and v.ndim == 1:
        return jnp.matmul(a, v, precision=HIGHEST)
    if a.shape[1] == 0:
        return jnp.zeros(a.shape[:1] + jnp.broadcast_shapes(a.shape[2:], v.shape[1:]), a.dtype)
    ak, vk = _parts(a, 1), _parts(v, 0)
    return tree_sum([_mul(x, lax.expand_dims(y, (0,))) for x, y in zip(ak, vk)])


def tr(a):
    """Transpose of the two leading (component) axes: (i, j, ...) -> (j, i, ...)."""
    return jnp.swapaxes(a, 0, 1)


def cross3(a, b):
    """3-D cross product a x b of (3, ...) component stacks."""
    if a.ndim == 1 and b.ndim == 1:
        return jnp.cross(a, b)
    (a0, a1, a2), (b0, b1, b2) = _parts(a, 0), _parts(b, 0)
    return jnp.stack([lax.sub(_mul(a1, b2), _mul(a2, b1)), lax.sub(_mul(a2, b0), _mul(a0, b2)),
                      lax.sub(_mul(a0, b1), _mul(a1, b0))])


def skew_right(M, r):
    """M skew(r): M (i, 3, ...), r (3, ...) -> (i, 3, ...)."""
    r = r[:, None]
    return jnp.stack([M[:, 1] * r[2] - M[:, 2] * r[1], M[:, 2] * r[0] - M[:, 0] * r[2],
                      M[:, 0] * r[1] - M[:, 1] * r[0]], 1)


def eye_like(n: int, x):
    """Identity (n, n, 1, ..., 1) broadcastable against a component-first matrix like x."""
    return jnp.eye(n, dtype=x.dtype).reshape((n, n) + (1,) * (x.ndim - 2))


def matmul(a, b):
    """a @ b of matrices whose matrix axes are the *last* two (a ``dot``, at :data:`HIGHEST`)."""
    return jnp.matmul(a, b, precision=HIGHEST)
