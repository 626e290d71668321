"""The ABA entry points on the batch-last kernel of :mod:`jaxdyn.dynamics.batch`: one state
(:func:`aba_one_state`, what :func:`jaxdyn.aba` runs), many states of one model
(:func:`aba_batch`, what ``jax.vmap(jaxdyn.aba)`` runs) and a model per state
(:func:`aba_lanes`, a ``jaxdyn.stack`` under ``jax.vmap``): argument checks, chunking,
sharding and compilation around :func:`jaxdyn.dynamics.batch.aba_layout_kernel`."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._typing import BatchConfiguration, BatchTangent, BatchWrenches, Gravity
from ..errors import ArgumentError, ShapeError
from ..model.model import DATA_FIELDS, Model
from ..compiled import cpu_jit, for_cpu_options
from .batch import aba_layout_kernel, body_constants, scan_plan
from .chunks import ObjectCache, chunk_rows, default_chunk, device_count, filled, map_chunks, replicated, split_rows
from .common import check_gravity, gravity_acceleration, slice_barrier


def aba_one_state(model: Model, q, qd, tau, fx=None, gravity=None):
    """:func:`jaxdyn.aba` of one state by :func:`aba_layout_kernel` (a floating root outside
    the sweeps, pass 2 in one sweep): q (nq,), qd, tau (nv,), fx (nb, 6) [n; f] in the body
    frames or None -> qdd (nv,)."""
    dt = jnp.result_type(q, qd, tau)
    q, qd, tau = (jnp.asarray(a, dt) for a in (q, qd, tau))
    fx = jnp.zeros((model.nb, 6), dt) if fx is None else fx.astype(dt)
    a0 = gravity_acceleration(model, gravity).astype(dt)
    return aba_layout_kernel(model, q, qd, tau, fx, a0, body_constants(model, dt, ()), *scan_plan(model))


def _aba_batch(model, q, qd, tau, f_ext, gravity, chunk, ndev, free, k, types):
    dt = jnp.result_type(q, qd, tau)
    q, qd, tau = (jnp.asarray(a, dt) for a in (q, qd, tau))
    B = q.shape[0]
    if f_ext is None:
        fx = jnp.zeros((B, model.nb, 6), dt)
    else:
        f_ext = jnp.asarray(f_ext, dt)
        fx = jnp.concatenate([f_ext[..., 3:], f_ext[..., :3]], -1)
    a0 = gravity_acceleration(model, gravity).astype(dt)
    consts = body_constants(model, dt)
    return map_chunks(lambda ci, x: aba_layout_kernel(model, *x, a0, consts, free, k, types, ci=ci), (q, qd, tau, fx),
                      chunk, ndev)


def aba_lanes(model: Model, q, qd, tau, fx, gravity=None, chunk=None):
    """ABA of B states of B models: ``model`` a stack (every leaf with a leading axis B, as
    :func:`jaxdyn.stack` builds), q (B, nq), qd, tau (B, nv), fx (B, nb, 6) [n; f] in the
    body frames or None (no external forces), gravity None or (3,) -> qdd (B, nv).  The batch-last kernel
    (:func:`aba_layout_kernel` with ``lanes``) on chunks of ``chunk`` models, so robots of
    different structure run the sweeps of one robot, each lane reading its own parent.  A
    chunk whose lanes all hold the same model (:func:`one_model_chunks`) runs one model's
    kernel instead, the model read from its first lane (a ``lax.cond`` per chunk).  Lanes
    grouped by member run as given; lanes interleaved more finely than the chunks run sorted by
    :func:`member_key` (:func:`lane_order`; states permuted in, results back), so most chunks
    hold one member.  Four-robot benchmark stack, 4096 lanes, ``jaxdyn.jit``, alternating
    processes: grouped 5.7 µs per state (5.4 before the sorting; 6.9-7.1 with the lanes
    kernel on every chunk), interleaved at random 5.9-6.0 (from 6.7-7.0), every lane a
    different model (all chunks mixed) 6.9-7.3 (from 6.8-7.1); in a plain ``jax.jit``
    8.2, 8.5 and 10.5 (from 8.4-8.6, 9.9-10.2 and 9.9-10.2).  Such a chunk reads neither
    ``Model.lane_parents`` nor ``Model.lane_dofs``, so where a stack edited by hand makes
    them stale, its lanes get their ABA, and a mixed chunk's affected lanes NaN.  The
    plan (floating root outside the scan) is ``model.scan_layout``, which ``stack`` sets when
    every member has a lone floating root.  What ``jax.vmap(jaxdyn.aba)`` over a stack runs.
    ``chunk`` None: on the CPU 128 traced for :data:`CPU_OPTIONS`, else 64 (what ran fastest
    for the four benchmark robots, same-process A/B: 0.94x of 64, resp. 0.86x of 128); on
    other backends :func:`jaxdyn.dynamics.chunks.default_chunk`'s."""
    chunk = default_chunk(chunk, 128 if for_cpu_options() else 64)
    dt = jnp.result_type(q, qd, tau)
    q, qd, tau = (jnp.asarray(a, dt) for a in (q, qd, tau))
    fx = None if fx is None else jnp.asarray(fx, dt)
    free, k, types = scan_plan(model)
    last = lambda a: jnp.moveaxis(a, 0, -1)

    def mixed(ci, m, q, qd, tau, fx):          # a model per lane
        I6, padarm = jax.vmap(lambda mm: body_constants(mm, dt, ()))(m)
        a0 = jax.vmap(lambda mm: gravity_acceleration(mm, gravity).astype(dt))(m)
        return aba_layout_kernel(m, q, qd, tau, fx, last(a0), (last(I6), last(padarm)), free, k, types, lanes=True,
                                 ci=ci)

    def uniform(ci, m0, q, qd, tau, fx):       # every lane holds the model m0: one model's kernel
        a0 = gravity_acceleration(m0, gravity).astype(dt)
        return aba_layout_kernel(m0, q, qd, tau, fx, a0, body_constants(m0, dt), free, k, types, ci=ci)

    B = q.shape[0]
    if fx is not None and free:     # a stack's padded bodies, roots the plan hangs from the root: no f_ext
        fx = jnp.where(((model.parent < 0) & (jnp.arange(model.nb) > 0)[None])[..., None], 0.0, fx)
    order, moved = lane_order(model, chunk)
    same = lax.cond(moved, lambda: one_model_chunks(model, chunk, order), lambda: one_model_chunks(model, chunk))
    xs = lax.cond(moved, lambda xs: jax.tree_util.tree_map(lambda a: a[order], xs), lambda xs: xs, (q, qd, tau, fx))

    read = model.replace(**{f: None for f in NOT_READ_BY_ABA})      # the fields the kernels read
    C, rows = chunk_rows(B, chunk)
    firsts = jax.tree_util.tree_map(lambda a: a[order[::C]], read)  # (chunks, ...): each chunk's first lane

    def uniform_chunk(ci, lanes, q, qd, tau, fx):
        m0 = jax.tree_util.tree_map(lambda a: lax.dynamic_index_in_dim(a, ci, keepdims=False), firsts)
        return uniform(ci, slice_barrier(m0, ci), q, qd, tau, fx)

    def mixed_chunk(ci, lanes, q, qd, tau, fx):     # lanes: the chunk's, the fill's = order[0]
        gather = lambda: jax.tree_util.tree_map(lambda a: jnp.take(a, lanes, axis=0), read)
        if rows > B:        # a slice of the last chunk would run past B (XLA clamps its start)
            m = gather()
        else:               # lanes as given: a slice (cheaper than the gather)
            m = lax.cond(moved, gather, lambda: jax.tree_util.tree_map(
                lambda a: lax.dynamic_slice_in_dim(a, lanes[0], C), read))
        return mixed(ci, slice_barrier(m, ci), q, qd, tau, fx)

    def run(ci, x):
        lanes, q, qd, tau, fx, same = x
        if fx is None:                         # a constant XLA folds away
            fx = jnp.zeros(q.shape[:1] + (model.nb, 6), dt)
        return lax.cond(same[0], uniform_chunk, mixed_chunk, ci, lanes, q, qd, tau, fx)

    out = map_chunks(run, (order,) + xs + (same,), chunk)
    return lax.cond(moved, lambda o: o[positions(order)], lambda o: o, out)


def positions(order):
    """(B,) int32: the inverse of the permutation ``order`` (B,), each lane's position in it."""
    B = order.shape[0]
    return jnp.zeros(B, jnp.int32).at[order].set(jnp.arange(B, dtype=jnp.int32))


def member_key(model: Model):
    """(B,) uint32 for a stack's lanes ``model`` (leaves (B, ...)): a hash of each lane's
    parents, joint types and masses, equal for lanes that hold the same model (and, but
    for a hash collision, different for the members of a stack).  Cheap: it reads 16 bytes per
    body, not the lane's whole model (~10 KB per lane for talos_reduced)."""
    nb = model.parent.shape[-1]
    rng = np.random.default_rng(20181126)
    c = [jnp.asarray(rng.integers(0, 2**31, (1, nb), dtype=np.int64).astype(np.uint32) * 2 + 1) for _ in range(4)]
    u = lambda a: a.astype(jnp.uint32)
    m = lax.bitcast_convert_type(model.mass.astype(jnp.float64), jnp.uint32)          # (B, nb, 2)
    return jnp.sum(u(model.parent) * c[0] + u(model.jtype) * c[1] + m[..., 0] * c[2] + m[..., 1] * c[3], axis=-1,
                   dtype=jnp.uint32)


def lane_order(model: Model, chunk):
    """(order (B,) int32, moved () bool): the order in which :func:`aba_lanes` runs a stack's
    lanes ``model`` (leaves (B, ...)) in chunks of ``chunk``.  Lanes as given when they
    change :func:`member_key` no more often than once per chunk (lanes grouped by member;
    ``moved`` False, ``order`` the identity), else sorted by it (stable) when that gives more
    chunks of one key, so that lanes interleaved at random still run one model's kernel on
    most chunks.  Which lanes hold the same model is then checked in full
    (:func:`one_model_chunks`), so a hash collision costs speed, never an answer."""
    B = model.parent.shape[0]
    C, rows = chunk_rows(B, chunk)
    key = member_key(model)
    ident = jnp.arange(B, dtype=jnp.int32)

    def by_key():
        perm = jnp.argsort(key, stable=True).astype(jnp.int32)
        better = jnp.sum(uniform_chunks(key[perm], C, rows)) > jnp.sum(uniform_chunks(key, C, rows))
        return jnp.where(better, perm, ident), better

    changes = jnp.sum(key[1:] != key[:-1])
    return lax.cond(changes > rows // C, by_key, lambda: (ident, jnp.asarray(False)))


NOT_READ_BY_ABA = ("damping", "q_lower", "q_upper", "frame_body", "frame_E", "frame_r")
"""Model fields that the ABA does not read (:func:`one_model_chunks` does not compare them)."""


def one_model_chunks(model: Model, chunk, order=None):
    """(B,) bool for a stack's lanes ``model`` (leaves (B, ...)): whether every lane of the
    state's chunk (:func:`jaxdyn.dynamics.chunks.map_chunks` on one device, the last chunk
    filled with copies of the first lane) holds the same model in the fields the ABA reads
    (all but :data:`NOT_READ_BY_ABA`).  ``order`` None: the lanes as given; else (B,) the
    order in which they run (:func:`lane_order`), the result then per position in that order
    (each lane read in place and compared with its chunk's first lane; the fill's lanes,
    whose results are dropped, count as equal).  :func:`aba_lanes` then runs one model's kernel on the
    chunk (no per-lane parents, joint types, dof slots or inertias), as on a batch of one
    member alone.  Computed for the whole batch before the chunk loop: inside it, a plain
    ``jax.jit`` (XLA's fusion emitters) ran the comparisons of the chunk's dynamic slices as
    scalar code, about 1.2 µs per state of a talos_reduced stack.  Before it, one pass over
    the lanes' models: 0.45-0.55 µs per state of the four-robot benchmark stack timed alone
    (~12 KB per lane)."""
    B = jax.tree_util.tree_leaves(model)[0].shape[0]
    C, rows = chunk_rows(B, chunk)
    fields = [getattr(model, f) for f in DATA_FIELDS if f not in NOT_READ_BY_ABA]
    if order is not None:   # each lane against its chunk's first lane, read in the lanes' own order
        chunk_of = positions(order) // C
        firsts = order[::C]
        ok = jnp.ones(B, bool)
        for a in fields:
            ok = ok & jnp.all(a == a[firsts][chunk_of], axis=tuple(range(1, a.ndim)))
        ok = jnp.concatenate([ok[order], jnp.ones(rows - B, bool)])     # the fill's results are dropped
        return jnp.repeat(jnp.all(ok.reshape(rows // C, C), axis=1), C)[:B]
    same = jnp.ones(rows // C, bool)
    for a in fields:
        same = same & uniform_chunks(a, C, rows)
    return jnp.repeat(same, C)[:B]


def uniform_chunks(a, C, rows):
    """(rows / C,) bool for ``a`` (B, ...) in chunks of C lanes, filled to ``rows`` with copies
    of its first lane (:func:`jaxdyn.dynamics.chunks.filled`): whether each chunk's lanes all
    equal its first lane."""
    a = filled(a, rows).reshape((rows // C, C) + a.shape[1:])
    return jnp.all(a == a[:, :1], axis=tuple(range(1, a.ndim)))


def aba_batch(model: Model, q: BatchConfiguration, qd: BatchTangent, tau: BatchTangent,
              f_ext: BatchWrenches | None = None, gravity: Gravity | None = None, chunk=None,
              devices=None) -> BatchTangent:
    """Forward dynamics qdd of B states of one model (throughput version of :func:`jaxdyn.aba`).

    Args:
      model: one (unbatched) Model.
      q: (B, nq); qd, tau: (B, nv).  f_ext: optional (B, nb, 6) spatial forces, Pinocchio order
        [force; moment], each in its body frame (as ``aba(..., f_ext_frame="local")``).
      gravity: optional (3,) world gravity.
      chunk: robots per chunk (static).  Default (None): 128 on the CPU (the chunk's arrays
        stay in L2 cache), 65536 on other backends (a GPU runs a chunk's states in parallel;
        :func:`jaxdyn.dynamics.chunks.default_chunk`).
      devices: how many devices of the default backend share the batch (static).  Default:
        all of them on the CPU backend when B * nb >=
        :data:`jaxdyn.dynamics.chunks.MULTI_DEVICE_MIN_WORK` (and not inside your own
        ``shard_map``), else 1.  XLA:CPU runs one program on one core, so to use both cores
        of a 2-core machine start JAX with two host devices,
        ``jax.config.update("jax_num_cpu_devices", 2)``, before any JAX work.  Each call
        splits q, qd, tau over the devices (:func:`jaxdyn.dynamics.chunks.split_rows`, one
        copy per device; its cost is in ``benchmarks/results/two_devices.json``);
        inputs already split along B over them (the previous call's output when B fills
        whole chunks on every device, or ``jax.device_put(x, NamedSharding(Mesh(jax.devices(),
        ("b",)), P("b")))``) skip that copy.
    Returns:
      qdd (B, nv), equal to ``jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(model, q, qd, tau)`` to
      rounding.  No damping is applied (as :func:`jaxdyn.aba`).  Jit-able and differentiable
      (it is plain lax.scan/lax.cond); for a model of different robots use ``vmap(aba)``.
    """
    for nm, a in (("q", q), ("qd", qd), ("tau", tau)):
        if a is None or isinstance(a, (list, tuple)):
            raise ShapeError(f"aba_batch: {nm} must be an array, got {type(a).__name__}")
    B = jnp.shape(q)[0] if jnp.ndim(q) == 2 else None
    for nm, a, shape in (("q", q, (B, model.nq)), ("qd", qd, (B, model.nv)), ("tau", tau, (B, model.nv)),
                         ("f_ext", f_ext, (B, model.nb, 6))):
        if a is not None and jnp.shape(a) != shape:
            want = "(" + ", ".join("B" if d is None else str(d) for d in shape) + ")"
            raise ShapeError(f"aba_batch: {nm} must have shape {want} for model {model.name!r} "
                             f"(B = q.shape[0]), got {jnp.shape(a)}")
    if B == 0:
        raise ShapeError("aba_batch: empty batch (B = 0)")
    for nm, a in (("q", q), ("qd", qd), ("tau", tau)):
        dt = a.dtype if hasattr(a, "dtype") else jnp.result_type(a)
        if not jnp.issubdtype(dt, jnp.floating):
            raise ShapeError(f"aba_batch: {nm} must be a floating-point array, got dtype {dt}")
    check_gravity(model, gravity)
    chunk = default_chunk(chunk, 128)
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ArgumentError(f"aba_batch: chunk must be a positive int (robots per chunk), got {chunk!r}")
    free, k, types = _PLANS.get(model, None, lambda: scan_plan(model))     # once per model object
    ndev = device_count(devices, B * model.nb, "aba_batch")
    q, qd, tau, f_ext = split_rows((q, qd, tau, f_ext), int(chunk), ndev)
    return _compiled(replicated(model, ndev), q, qd, tau, f_ext, gravity, int(chunk), ndev, free, k, types)


_compiled = cpu_jit(_aba_batch, static_argnames=("chunk", "ndev", "free", "k", "types"))
_PLANS = ObjectCache(8)
