"""Inverses of SPD joint-space inertias, one matrix or a batch-last stack: :func:`spd_inverse`
(block Gauss-Jordan sweeps on a dense matrix) and :func:`tree_spd_inverse` (nested Schur
complements over a kinematic tree's branches, which exploits M's sparsity).

Nested Schur complements.  M_ck vanishes unless one of the dofs c, k moves the other's body
(branch-induced sparsity, Featherstone 2008, Ch. 6).  Cut the dof tree into *branches*:
chains of dofs in which each dof is the only child of the one before.  A branch with dofs s whose last dof has child
subtrees 1..m has, in the order (s, subtree 1, ..., subtree m),

    M = [[A, B^T], [B, D]],   D = blockdiag(D_1, ..., D_m)   (no dof of one subtree moves another's)

and with G = D^-1 B (each G_c = D_c^-1 B_c), the Schur complement S = A - B^T G:

    M^-1 = [[S^-1, -(G S^-1)^T], [-G S^-1, D^-1 + G S^-1 G^T]].

D_c^-1 is the same formula one branch down; a branch without children inverts its own block.
Every block is inverted densely (:func:`jaxdyn.dynamics.common.spd_inverse_components` up to
:data:`SMALL_BLOCK` dofs, else Gauss-Jordan sweeps), so the work is the branches' own
inverses plus one rank-|s| update per branch point, instead of sweeps over all of M (nv = 38
on talos_reduced, whose largest block has 7 dofs).  A chain is one branch: its block is M
itself.

Matrices are component-first (n, n, ...) with an optional batch after the matrix axes, as in
:mod:`jaxdyn.dynamics.derivative_sweeps`.  A block that is not positive definite gives NaN,
which reaches every entry of its tree (a tree's S^-1 enters all of its blocks); in a forest
the rows and columns of that tree are NaN and the other trees' blocks stay exact (the
contract of :func:`jaxdyn.minv`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..kinematics.bodies import take
from ..spatial.linalg import HIGHEST, mm, tr, tree_sum
from ..tree import same
from .common import spd_inverse_components


SMALL_BLOCK = 3
"""Blocks of up to this many dofs are inverted by the unrolled Cholesky
(:func:`jaxdyn.dynamics.common.spd_inverse_components`), larger ones by Gauss-Jordan sweeps
(the threshold's measurements: ``benchmarks/results/history.md``)."""


SWEEP_BLOCK = 2
"""Pivots eliminated per step of :func:`spd_inverse` (one pass over the matrix per step)."""


def spd_inverse(M, keep=same):
    """Inverse of SPD matrices M (n, n, ...) (one, or a batch-last stack) by block
    Gauss-Jordan sweeps: n / b steps (b = :data:`SWEEP_BLOCK`), each eliminating a b x b
    diagonal block K (P = M_KK^-1 by :func:`jaxdyn.dynamics.common.spd_inverse_components`):
    A <- A - A_:K P A_K:, A_K: <- P A_K:, A_:K <- A_:K P, A_KK <- -P, which leaves -M^-1.
    Vectorized over the trailing axes; SPD matrices need no pivoting.  ``keep`` (the batching
    module's fusion barrier) is applied to the row block A_K: each step reads.  No LAPACK
    call.
    NaN where M is not positive definite."""
    @jax.custom_jvp
    def inverse(M):
        return _sweeps(M, keep)

    @inverse.defjvp
    def inverse_jvp(primals, tangents):        # d(M^-1) = -M^-1 dM M^-1, not the sweeps' derivative
        Mi = inverse(primals[0])
        return Mi, -matmul(Mi, matmul(tangents[0], Mi))
    return inverse(M)


def _sweeps(M, keep):
    n, b = M.shape[0], SWEEP_BLOCK
    m = -(-n // b) * b
    ones = (1,) * (M.ndim - 2)
    pad = [(0, m - n), (0, m - n)] + [(0, 0)] * len(ones)
    A0 = jnp.pad(M, pad) + jnp.diag((jnp.arange(m) >= n).astype(M.dtype)).reshape((m, m) + ones)

    def sweep(k, A):
        rows = lax.dynamic_slice_in_dim(A, k * b, b, 0)                     # A_K: (b, m, ...)
        rows = keep(rows)
        P = spd_inverse_components(lax.dynamic_slice_in_dim(rows, k * b, b, 1))     # (b, b, ...)
        Prow = mm(P, rows)                                                  # P A_K:
        A = A - tree_sum([rows[a][:, None] * Prow[a][None] for a in range(b)])
        Prow = lax.dynamic_update_slice_in_dim(Prow, -P, k * b, 1)          # new rows K, KK block -P
        A = lax.dynamic_update_slice_in_dim(A, Prow, k * b, 0)
        return lax.dynamic_update_slice_in_dim(A, tr(Prow), k * b, 1)     # and columns K

    return -lax.fori_loop(0, m // b, sweep, A0)[:n, :n]



def matmul(A, B):
    """A @ B for (n, n, ...) stacks, as one batched dot (not :func:`jaxdyn.spatial.linalg.mm`,
    whose unrolled sum was slower at these sizes: ``benchmarks/results/history.md``)."""
    if A.ndim == 2:
        return jnp.matmul(A, B, precision=HIGHEST)
    return jnp.moveaxis(jnp.matmul(jnp.moveaxis(A, -1, 0), jnp.moveaxis(B, -1, 0), precision=HIGHEST), 0, -1)


class Branch(NamedTuple):
    """A chain of dofs ``seg`` (each the only child of the one before; numbering of M) and the
    branches that start at children of its last dof."""
    seg: tuple
    children: tuple

    def dofs(self):
        """The dofs of this branch's subtree, in the order of its inverse's rows."""
        return self.seg + sum((c.dofs() for c in self.children), ())


def branches(pair, same_body):
    """The branch forest of a dof tree, from numpy masks (nv, nv) (as
    :class:`jaxdyn.dynamics.derivative_sweeps.Topology`): pair[c, k] when k's body is c's body
    or above it, same_body[c, k] when it is c's body (its dofs are a chain in index order).
    Returns a tuple of root :class:`Branch` es.  A dof that no body owns (stack padding: no
    pair entry) is a root of its own."""
    pair, same_body = np.asarray(pair, bool), np.asarray(same_body, bool)
    nv = pair.shape[0]
    k = np.arange(nv)
    up = pair & (~same_body | (k[None, :] <= k[:, None]))      # up[c, k]: k is c or above c
    depth = up.sum(1)
    parent = [max(np.flatnonzero(up[c] & (k != c)), key=lambda a: depth[a], default=-1) for c in range(nv)]
    children = [[] for _ in range(nv)]
    for c, p in enumerate(parent):
        if p >= 0:
            children[p].append(c)

    def build(c):
        seg = [c]
        while len(children[seg[-1]]) == 1:
            seg.append(children[seg[-1]][0])
        return Branch(tuple(int(a) for a in seg), tuple(build(a) for a in children[seg[-1]]))
    return tuple(build(c) for c in range(nv) if parent[c] < 0)


def _block(M, rows, cols):
    """M[rows][:, cols] for static index tuples (slices of their contiguous runs)."""
    return jnp.moveaxis(take(jnp.moveaxis(take(M, np.asarray(rows)), 1, 0), np.asarray(cols)), 0, 1)


def _dense_inverse(A, keep):
    """Inverse of one SPD block (n, n, ...)."""
    if A.shape[0] <= SMALL_BLOCK:
        return keep(spd_inverse_components(A))
    return keep(spd_inverse(A, keep))


def _block_diagonal(blocks, like):
    """Block-diagonal (n, n, ...) of square blocks (n_c, n_c, ...), one row of blocks at a time."""
    sizes = [b.shape[0] for b in blocks]
    n = sum(sizes)
    zeros = lambda r, c: jnp.zeros((r, c) + like.shape[2:], like.dtype)
    rows, left = [], 0
    for b, k in zip(blocks, sizes):
        parts = ([zeros(k, left)] if left else []) + [b] + ([zeros(k, n - left - k)] if n - left - k else [])
        rows.append(jnp.concatenate(parts, 1) if len(parts) > 1 else b)
        left += k
    return jnp.concatenate(rows, 0) if len(rows) > 1 else rows[0]


def _subtree_inverse(M, b: Branch, keep):
    """Inverse of M's block on ``b.dofs()`` (in that order)."""
    s = b.seg
    if not b.children:
        return _dense_inverse(_block(M, s, s), keep)
    Dinv = [_subtree_inverse(M, c, keep) for c in b.children]
    Bc = [_block(M, c.dofs(), s) for c in b.children]            # (n_c, |s|, ...)
    G = [keep(mm(Di, Bi)) for Di, Bi in zip(Dinv, Bc)]             # D_c^-1 B_c
    S = _block(M, s, s) - tree_sum([mm(tr(Bi), Gi) for Bi, Gi in zip(Bc, G)])
    Si = _dense_inverse(keep(S), keep)
    G = jnp.concatenate(G, 0) if len(G) > 1 else G[0]             # all children's rows
    H = keep(mm(G, Si))                                            # G S^-1
    low = mm(H, tr(G)) + _block_diagonal(Dinv, M)                  # D^-1 + G S^-1 G^T
    return keep(jnp.concatenate([jnp.concatenate([Si, -tr(H)], 1), jnp.concatenate([-H, low], 1)], 0))


def tree_spd_inverse(M, roots, keep=same):
    """M^-1 (n, n, ...) of an SPD joint-space inertia M (n, n, ...) whose sparsity follows the
    branch forest ``roots`` (:func:`branches`), by nested Schur complements (module docstring).
    ``keep``: the fusion barrier applied to every product (as in
    :mod:`jaxdyn.dynamics.aba`).  NaN on the rows and columns of a tree whose block of M
    is not positive definite."""
    n = M.shape[0]
    if n == 0 or not roots:
        return M
    parts = [(r.dofs(), _subtree_inverse(M, r, keep)) for r in roots]
    order = np.concatenate([np.asarray(d, int) for d, _ in parts])
    X = _block_diagonal([Xi for _, Xi in parts], M)
    if len(parts) > 1:         # forest: 0 * (trace_i + trace_j) on block (i, j), NaN for a NaN tree
        t = jnp.concatenate([jnp.broadcast_to(tree_sum([Xi[a, a] for a in range(len(d))]), (len(d),) + M.shape[2:])
                             for d, Xi in parts], 0)
        X = X + 0.0 * (t[:, None] + t[None, :])
    if np.array_equal(order, np.arange(n)):
        return X
    back = np.argsort(order)
    return _block(X, back, back)
