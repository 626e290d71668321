"""Component-first small linear algebra: the one formulation behind both array layouts.

Every function indexes vector and matrix *components on the leading axes* and treats any
trailing axes as a batch, so the same code serves

* one object: a vector (3,) or (6,), a matrix (6, 6) (``jax.vmap`` adds batch axes in front,
  which vmap keeps out of sight), and
* a batch-last chunk: a vector (6, C), a matrix (6, 6, C) with C robots on the minor axis
  (the layout of :func:`jaxdyn.aba_batch`).

With trailing batch axes, products are explicit sums of broadcast multiplies: XLA fuses them
into one loop over the trailing axes (a vectorized loop over C), which is what makes the
batch-last layout fast on CPU, where a batched ``dot`` is slow (``docs/architecture.md``).
A single object (no trailing axes) takes one ``dot`` (``jnp.cross`` for 3-vectors) instead:
one kernel, and a much smaller program to differentiate and compile (figures:
``benchmarks/results/design_measurements.md``).  Under ``jax.vmap`` a function sees the
single-object shapes, so it keeps the dots, which vmap batches.
"""
from __future__ import annotations

import jax.numpy as jnp


def mm(a, b):
    """Matrix product (i, k, ...) x (k, j, ...) -> (i, j, ...)."""
    if a.ndim == 2 and b.ndim == 2:
        return a @ b
    out = a[:, 0, None] * b[None, 0]
    for k in range(1, a.shape[1]):
        out = out + a[:, k, None] * b[None, k]
    return out


def mv(a, v):
    """Matrix-vector product (i, k, ...) x (k, ...) -> (i, ...)."""
    if a.ndim == 2 and v.ndim == 1:
        return a @ v
    out = a[:, 0] * v[0][None]
    for k in range(1, a.shape[1]):
        out = out + a[:, k] * v[k][None]
    return out


def tr(a):
    """Transpose of the two leading (component) axes: (i, j, ...) -> (j, i, ...)."""
    return jnp.swapaxes(a, 0, 1)


def cross3(a, b):
    """3-D cross product a x b of (3, ...) component stacks."""
    if a.ndim == 1 and b.ndim == 1:
        return jnp.cross(a, b)
    return jnp.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def skew_left(r, M):
    """skew(r) M: r (3, ...), M (3, j, ...) -> (3, j, ...) (r x each column of M)."""
    r = r[:, None]
    return jnp.stack([r[1] * M[2] - r[2] * M[1], r[2] * M[0] - r[0] * M[2], r[0] * M[1] - r[1] * M[0]], 0)


def skew_right(M, r):
    """M skew(r): M (i, 3, ...), r (3, ...) -> (i, 3, ...)."""
    r = r[:, None]
    return jnp.stack([M[:, 1] * r[2] - M[:, 2] * r[1], M[:, 2] * r[0] - M[:, 0] * r[2],
                      M[:, 0] * r[1] - M[:, 1] * r[0]], 1)


def eye_like(n: int, x):
    """Identity (n, n, 1, ..., 1) broadcastable against a component-first matrix like x."""
    return jnp.eye(n, dtype=x.dtype).reshape((n, n) + (1,) * (x.ndim - 2))
