"""Shared pieces of the dynamics algorithms: body inertias, gravity, gathers, f_ext."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import spatial as sp
from ..compiled import exact_rule, for_cpu_options
from ..tree import varying_like
from ..model.configuration import gather
from ..model.model import Model, array_module, tree_arrays
from ..errors import ShapeError


def body_inertias(model: Model) -> sp.Inertia:
    """Compact spatial inertias (m, h, Ibar) of every body in its own frame (leading axis nb)."""
    return jax.vmap(sp.mcI)(model.mass, model.com, model.inertia)


def body_inertia_matrices(model: Model):
    """Dense 6x6 spatial inertias, (nb, 6, 6)."""
    return jax.vmap(sp.inertia.to_matrix)(body_inertias(model))


def check_gravity(model: Model, gravity=None):
    """Raise ShapeError unless ``gravity`` is None or has shape (3,)."""
    if gravity is not None and jnp.shape(gravity) != (3,):
        raise ShapeError(f"gravity must have shape (3,) (world frame, m/s^2) for model {model.name!r}, "
                         f"got {jnp.shape(gravity)}")


def gravity_acceleration(model: Model, gravity=None):
    """Fictitious base acceleration a0 = -[0; g] (angular-first), which adds gravity."""
    check_gravity(model, gravity)
    g = model.gravity if gravity is None else jnp.asarray(gravity, model.gravity.dtype)
    return jnp.concatenate([jnp.zeros(3, g.dtype), -g])


STATIC_RUNS = 16
"""Most contiguous runs for which :func:`take_static` slices instead of gathering."""


def take_static(x, idx):
    """x[idx] along axis 0 for a numpy index array ``idx`` (any shape): the slices of its
    contiguous runs, concatenated, when there are at most :data:`STATIC_RUNS` of them, else
    a gather.  Dof vectors and per-body slots are mostly in order (e.g. a humanoid's dofs
    after the free joint are one run), and XLA:CPU ran the gathers and scatters between
    them slower than slices (``benchmarks/results/design_measurements.md``)."""
    flat = np.asarray(idx).reshape(-1)
    if flat.size == 0:
        return jnp.zeros((0,) + x.shape[1:], x.dtype).reshape(np.shape(idx) + x.shape[1:])
    cut = np.flatnonzero(np.diff(flat) != 1) + 1
    if len(cut) >= STATIC_RUNS:
        return x[idx]
    parts = [x[int(a[0]):int(a[0]) + len(a)] for a in np.split(flat, cut)]
    out = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    return out.reshape(np.shape(idx) + x.shape[1:])


def per_body(model: Model, x):
    """Gather an (nv,) vector into (nb, k) per-body joint slots (0 on unused slots)."""
    _, vidx = tree_arrays(model)
    if isinstance(vidx, np.ndarray):
        return take_static(jnp.concatenate([x, jnp.zeros((1,), x.dtype)]), vidx)
    return gather(x, vidx)


def scatter_dofs(model: Model, vals, base=None):
    """(nb, k, ...) per-body values -> (nv, ...) (unused slots dropped; ``...`` batch axes,
    ``base`` (nv, ...) or None).  With a static topology
    (:func:`jaxdyn.model.model.tree_arrays`) each dof's slot (:func:`dof_owner`) is read by
    :func:`take_static`; else a scatter-add per state."""
    body, slot = dof_owner(model)
    rest = vals.shape[2:]
    if isinstance(body, np.ndarray):
        flat = jnp.concatenate([vals.reshape((-1,) + rest), jnp.zeros((1,) + rest, vals.dtype)])
        out = take_static(flat, np.where(body < model.nb, body * model.k + slot, model.nb * model.k))
        return out if base is None else base + out
    if rest:
        one = lambda v, b: scatter_dofs(model, v, b)
        for _ in rest:
            one = jax.vmap(one, in_axes=(-1, None if base is None else -1), out_axes=-1)
        return one(vals, base)
    out = jnp.zeros(model.nv + 1, vals.dtype) if base is None else \
        jnp.concatenate([base, jnp.zeros((1,), base.dtype)])
    return out.at[model.vidx.reshape(-1)].add(vals.reshape(-1))[:-1]


def dof_mask(model: Model):
    """(nb, k) 1.0 where the joint slot is a real dof, else 0."""
    return jnp.asarray(tree_arrays(model)[1] < model.nv).astype(model.Xtree_r.dtype)


def pivot_addend(model: Model):
    """(nb, k) what joint-space pivots D = S^T IA S get on their diagonal: the armature on real
    dof slots, 1 on unused slots (so padded slots have a unit pivot)."""
    mask = dof_mask(model)
    return (1.0 - mask) + per_body(model, model.armature) * mask


def external_forces(model: Model, f_ext, frame, X0=None):
    """User f_ext (nb, 6) in Pinocchio order [force; moment] -> internal body-frame [n; f].

    ``frame="local"``: each row is expressed in its body frame (Pinocchio's rnea/aba fext).
    ``frame="world"``: each row is a spatial force in world coordinates (about the world origin).
    """
    if f_ext is None:
        return None
    if jnp.shape(f_ext) != (model.nb, 6):
        raise ShapeError(f"f_ext must have shape (nb, 6) = ({model.nb}, 6) for model {model.name!r}, "
                         f"got {jnp.shape(f_ext)}")
    f = jnp.concatenate([f_ext[:, 3:], f_ext[:, :3]], 1)
    if frame == "local":
        return f
    if frame == "world":
        X = sp.Transform(X0.E[:-1], X0.r[:-1])
        return jax.vmap(sp.apply_force)(X, f)
    raise ValueError(f"f_ext_frame must be 'local' or 'world', got {frame!r}")


SMALL_SPD = 8
"""Largest matrix inverted by :func:`pd_inverse`'s unrolled Cholesky (joint pivots are at most
6 x 6).  Larger ones go through LAPACK."""


def spd_inverse_components(D):
    """Inverse of SPD matrices D (n, n, ...) (component-first: the matrix on the leading axes,
    any batch after them), n <= SMALL_SPD, by a Cholesky factorization unrolled over its
    entries: L L^T = D column by column, Li = L^-1 by forward substitution, D^-1 = Li^T Li,
    every entry a sum of products of entries (no reduction over an axis, no matrix product:
    one fused elementwise program, with the batch as its vector lanes).

    No LAPACK custom call: jax's batched LAPACK kernels (potrf / trsm) split large batches
    over XLA:CPU's intra-op thread pool from inside a pool task and could deadlock there
    (vmap(jacfwd(aba)) on a floating-base robot at B = 1024 hung with every thread waiting in
    jax::ParallelBatchMap), and a small unrolled factorization is cheaper than a library call.
    A pivot that is not positive (non-PD D) gives NaN.
    """
    n = D.shape[0]
    nan = jnp.asarray(jnp.nan, D.dtype)
    if n == 1:
        d = D[0, 0]
        return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), nan)[None, None]
    L = [[None] * n for _ in range(n)]
    for j in range(n):
        d = D[j, j] - sum(L[j][k] * L[j][k] for k in range(j))
        L[j][j] = jnp.sqrt(jnp.where(d > 0, d, nan))
        inv = 1.0 / L[j][j]
        for i in range(j + 1, n):
            L[i][j] = (D[i, j] - sum(L[i][k] * L[j][k] for k in range(j))) * inv
    Li = [[None] * n for _ in range(n)]
    for i in range(n):
        Li[i][i] = 1.0 / L[i][i]
        for j in range(i):
            Li[i][j] = -sum(L[i][k] * Li[k][j] for k in range(j, i)) * Li[i][i]
    out = [[sum(Li[k][a] * Li[k][b] for k in range(max(a, b), n)) for b in range(n)] for a in range(n)]
    return jnp.stack([jnp.stack(row) for row in out])


def pd_inverse(D):
    """Inverse of small SPD matrices D (..., n, n) via Cholesky; NaN if D is not positive definite.

    n <= SMALL_SPD: unrolled (:func:`spd_inverse_components`, on the matrix axes moved first);
    larger: LAPACK.
    """
    if D.shape[-1] <= SMALL_SPD:
        return jnp.moveaxis(spd_inverse_components(jnp.moveaxis(D, (-2, -1), (0, 1))), (0, 1), (-2, -1))
    L = jnp.linalg.cholesky(D)
    ok = jnp.all(jnp.diagonal(L, axis1=-2, axis2=-1) > 0, axis=-1)[..., None, None]
    Li = jax.scipy.linalg.solve_triangular(L, jnp.broadcast_to(jnp.eye(D.shape[-1], dtype=D.dtype), D.shape),
                                           lower=True)
    return jnp.where(ok, jnp.swapaxes(Li, -1, -2) @ Li, jnp.nan)


def dof_owner(model: Model):
    """The inverse of ``vidx``: for every dof its body and slot, (nv,) int32 each.  Dofs that
    no body owns (``stack`` padding) get body ``nb`` and slot 0, so gathers from per-body
    arrays extended by one zero body read zeros for them.  numpy arrays when the topology is
    static (as :func:`jaxdyn.kinematics.ancestors`)."""
    nb, k = model.nb, model.k
    _, vidx = tree_arrays(model)
    xp = array_module(vidx)                      # numpy (a constant) when the topology is static
    if model.nv == 0 or nb == 0:
        return xp.zeros(model.nv, xp.int32) + nb, xp.zeros(model.nv, xp.int32)
    hit = vidx.reshape(-1)[None, :] == xp.arange(model.nv, dtype=vidx.dtype)[:, None]   # (nv, nb k)
    flat = xp.where(hit.any(1), xp.argmax(hit, 1), nb * k).astype(xp.int32)
    return flat // k, flat % k


def with_zero_body(x):
    """Per-body array (nb, ...) -> (nb + 1, ...) with a zero last row (see :func:`dof_owner`)."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])


def dof_ancestry(model: Model, anc, body):
    """Dof-pair masks from the body ancestry ``anc`` ((nb + 1, nb), :func:`jaxdyn.kinematics.ancestors`)
    and each dof's body ``body`` (:func:`dof_owner`): ``(below, same)``, both (nv, nv), with
    below[c, k] = 1 when k's body is c's body or an ancestor of it, same[c, k] = 1 when they
    are the same body (padded dofs: 0)."""
    nb = model.nb
    xp = array_module(anc)                       # numpy when anc and body are
    below = xp.concatenate([anc, xp.zeros((nb + 1, 1), anc.dtype)], 1)[body[:, None], body[None, :]]
    same = ((body[:, None] == body[None, :]) & (body < nb)[:, None]).astype(anc.dtype)
    return below, same


def dof_blocks(model: Model, blocks):
    """Per-joint (nb, k, k) blocks -> block-diagonal (nv, nv) matrix (padded dofs get 1).
    A gather through :func:`dof_owner` (no scatter)."""
    body, col = dof_owner(model)
    same = (body[:, None] == body[None, :]).astype(blocks.dtype)
    return with_zero_body(blocks)[body[:, None], col[:, None], col[None, :]] * same + jnp.diag(model.v_pad)


def materialize(x, i):
    """Identity on a pytree x that XLA:CPU cannot fuse through; ``i`` is a traced index (a
    scan or chunk counter).  XLA fuses a product into the product that consumes it and then
    *recomputes* each element of the inner product for every use; ``optimization_barrier``
    is removed before fusion on CPU, so this is a ``lax.cond`` whose predicate XLA cannot
    fold.  The batch-last kernels pass it as their ``keep``.  On other backends (where a cond
    would sync with the host) it returns x as is.

    x may also be a thunk (a function of no arguments returning the pytree).  In a program
    traced for XLA:CPU's default fusion emitters (a caller's plain ``jax.jit``) the thunk is
    then computed inside the cond's branch, so the cond's result is written once: without
    region analysis in copy insertion (one of :data:`jaxdyn.CPU_OPTIONS`) XLA copies an
    operand that a branch returns as is.  ``jax.jit(jax.vmap(jaxdyn.aba))`` on
    talos_reduced: 0.92x.  Traced for :data:`jaxdyn.CPU_OPTIONS` (where the copy is aliased
    away) the thunk is computed before the cond: computing it in the branch there was
    1.23x slower."""
    if callable(x) and (for_cpu_options() or jax.default_backend() != "cpu"):
        x = x()
    if jax.default_backend() != "cpu":
        return x
    if callable(x):
        shapes = jax.eval_shape(x)        # zeros varying as x's leaves under a caller's shard_map
        return lax.cond(i >= 0, x, lambda: jax.tree_util.tree_map(
            lambda s: varying_like(jnp.zeros(s.shape, s.dtype), s), shapes))
    return lax.cond(i >= 0, lambda x: x, lambda x: jax.tree_util.tree_map(jnp.zeros_like, x), x)


def slice_barrier(x, i):
    """:func:`materialize` of what a batch-last loop step reads at the traced index ``i`` (a
    scan's per-body inputs, a sweep buffer's slot, a row block of a matrix) when the program
    is compiled with XLA:CPU's default fusion emitters (inside a caller's own jit); x as is
    when it is compiled with :data:`jaxdyn.CPU_OPTIONS` (:func:`jaxdyn.compiled.for_cpu_options`).
    The fusion emitters turn a fusion that reads a dynamic slice into scalar code that
    reloads the index for every element; behind the barrier the slice is a copy of its own
    and the products that read it vectorize.  The legacy emitters vectorize such fusions,
    and there the barrier only adds a copy (``benchmarks/results/grad.json``: ``vmap(aba)``
    inside a plain ``jax.jit`` and inside ``jaxdyn.jit``, the ``vmap_aba`` rows)."""
    return x if for_cpu_options() else materialize(x, i)


def batched_like(x, batched, axis_size):
    """A ``custom_vmap`` rule's argument x with a leading batch axis of ``axis_size``: x itself
    when ``batched``, else x broadcast to (axis_size, ...)."""
    return x if batched else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))


def vmap_axes(in_batched):
    """``jax.vmap`` in_axes from a ``custom_vmap`` rule's ``in_batched`` pytree of flags: 0 where
    batched, else None (the rule's fallback to a plain vmap)."""
    return jax.tree_util.tree_map(lambda b: 0 if b else None, in_batched)


def batched_over_states(one, batch, reference, plain_vmap=lambda model: False):
    """A function f(model, q) equal to ``one(model, q)`` for one state whose ``jax.vmap`` over
    states of one model runs ``batch(model, Q)`` (Q (B, nq); a ``custom_vmap`` rule) and whose
    derivatives are those of ``reference(model, q)`` (a ``custom_jvp`` rule: ``custom_vmap``
    has no differentiation rule of its own).  Over a batched model (``jaxdyn.stack``), or when
    ``plain_vmap(model)`` (e.g. a topology unknown while tracing), the rule is the plain vmap
    of ``reference``."""
    @jax.custom_batching.custom_vmap
    def states(model, q):
        return one(model, q)

    @states.def_vmap
    @exact_rule
    def rule(axis_size, in_batched, model, q):
        if any(jax.tree_util.tree_leaves(in_batched[0])) or plain_vmap(model):
            return jax.vmap(reference, in_axes=tuple(vmap_axes(in_batched)))(model, q), True
        return batch(model, batched_like(q, in_batched[1], axis_size)), True

    @jax.custom_jvp
    def f(model, q):
        return states(model, q)

    f.defjvp(exact_rule(lambda primals, tangents: jax.jvp(reference, primals, tangents)))
    return f
