"""The only place that walks the kinematic tree.

Both sweeps are ``lax.scan`` over bodies in topological order with a buffer of per-body
values plus one *sink* slot (index nb) that stands for the world / the root's parent, so
no step needs a ``lax.cond`` for the root.  Compile time is independent of the number of
bodies.

* ``forward_sweep(step, model, init, xs)``: for i = 0..nb-1,
  ``val_i, y_i = step(val[parent[i]], x_i)`` with ``val[world] = init``.
* ``backward_sweep(step, model, init, xs)``: for i = nb-1..0, ``acc_i`` starts at ``init[i]``
  plus the contributions of all children; ``to_parent, y_i = step(acc_i, x_i)`` and
  ``acc[parent[i]] += to_parent`` (the world's sum lands in the sink slot).
* ``backward_sweep_with_parent`` / ``forward_sweep_with_siblings``: variants whose step also
  sees the parent's running accumulator (children visited one at a time, for Yamane-Nakamura's
  sequential elimination); ``sum_over_children``: a one-level gather.

A ``model`` whose parent array has a trailing lane axis (nb, C) sweeps batch-last buffers
(nb + 1, ..., C) of C models of different topology at once (``jaxdyn.stack`` under
``vmap(aba)``): the parent slot is read and accumulated per lane, among each body's few
possible parents when the sweep's model lists them (``candidates``, from
``Model.lane_parents``), else by a gather and a scatter-add.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

tmap = jax.tree_util.tree_map


def parent_slots(model):
    """Parent indices with the world (-1) mapped to the sink slot nb.  (nb,) int32, or
    (nb, C) for per-lane parents (see :func:`_read`)."""
    return jnp.where(model.parent < 0, model.nb, model.parent).astype(jnp.int32)


def candidate_slots(model):
    """For per-lane parents (nb, C) of a sweep's ``model`` that lists each body's possible
    parents in a field ``candidates`` (a tuple per body, -1 the world; the ABA lanes kernel's
    plan from ``Model.lane_parents``): those parents as sweep slots (the world -> nb),
    (nb, P) int32 numpy, each row padded with its first slot (the body's *primary*
    candidate); else None."""
    cands = getattr(model, "candidates", None)
    if cands is None or jnp.ndim(model.parent) != 2:
        return None
    slots = [sorted({model.nb if c < 0 else c for c in row}) for row in cands]
    P = max(map(len, slots), default=1)
    return np.array([row + row[:1] * (P - len(row)) for row in slots], np.int32).reshape(len(slots), P)


def lanes_off_candidates(model):
    """(C,) True for a lane with a body whose parent is neither the world nor among the
    body's candidates (:func:`candidate_slots`; a stack whose parents were changed by hand
    without ``Model.replace``): the sweeps read the body's primary candidate's slot for it
    and drop what it adds, so the caller returns NaN for it.  A body on the world outside the
    candidates is a stack's padding, which adds nothing and whose values nothing reads.  None
    without candidates."""
    cand = candidate_slots(model)
    if cand is None:
        return None
    p = parent_slots(model)                                                   # (nb, C)
    ok = jnp.any(p[:, None, :] == cand[:, :, None], 1) | (p == model.nb)
    return ~jnp.all(ok, 0)


def _parents(model):
    """What a sweep step gets as its parent: the slot (), a slot per lane (C,), or a slot per
    lane and the body's candidate slots ((C,), (P,)) (:func:`candidate_slots`)."""
    cand = candidate_slots(model)
    return parent_slots(model) if cand is None else (parent_slots(model), jnp.asarray(cand))


def _read(b, p):
    """Slot p of a buffer b (nb + 1, ...).  A scalar p is one slot for every state; p of shape
    (C,) is a slot per lane of a batch-last buffer (nb + 1, ..., C) (models of different
    topology in one chunk, ``jaxdyn.stack``), read by a gather, or, with the body's candidate
    slots (p, cand) (:func:`_parents`), as the primary candidate's slot with the lanes of
    another candidate selected from its slot.  A lane on none of them (a stack's padding,
    whose values nothing uses) reads the primary's."""
    if isinstance(p, tuple):
        p, cand = p
        out = lax.dynamic_index_in_dim(b, cand[0], keepdims=False)
        for j in range(1, cand.shape[0]):
            out = jnp.where(p == cand[j], lax.dynamic_index_in_dim(b, cand[j], keepdims=False), out)
        return out
    if p.ndim == 0:
        return lax.dynamic_index_in_dim(b, p, keepdims=False)
    return jnp.take_along_axis(b, p.reshape((1,) * (b.ndim - 1) + p.shape), 0)[0]


def _added(bufs, p, vs):
    """The buffers ``bufs`` (a pytree, leaves (nb + 1, ...)) with ``vs`` (leaves as one slot)
    added at slot p (as :func:`_read`).  With candidates (p, cand): each lane adds at its
    candidate's slot; a lane on none of them (a stack's padding, whose f_ext may be nonzero
    where the plan keeps the roots in the sweep) adds nothing.  The slots of further
    candidates are updated under one ``lax.cond`` per step, so a body with one candidate
    (most of a stack's; its row repeats it) updates one slot, as a single model's sweep
    does: about 0.2 µs less per state of the four-robot benchmark stack than updating every
    candidate's slot (alternating processes, 2-core CPU)."""
    if not isinstance(p, tuple) or not jax.tree_util.tree_leaves(bufs):
        return tmap(lambda b, v: _add(b, p, v.astype(b.dtype)), bufs, vs)
    p, cand = p

    def at(bufs, c, lanes):
        return tmap(lambda b, v: lax.dynamic_update_index_in_dim(
            b, lax.dynamic_index_in_dim(b, c, keepdims=False) + jnp.where(lanes, v, 0.0).astype(b.dtype), c, 0),
            bufs, vs)
    bufs = at(bufs, cand[0], p == cand[0])
    for j in range(1, cand.shape[0]):
        bufs = lax.cond(cand[j] != cand[0], partial(at, c=cand[j], lanes=p == cand[j]), lambda b: b, bufs)
    return bufs


def _add(b, p, v):
    """b with v added at slot p: a scalar slot, or a slot per lane (C,) (see :func:`_read`)."""
    if p.ndim == 0:
        return lax.dynamic_update_index_in_dim(b, lax.dynamic_index_in_dim(b, p, keepdims=False) + v, p, 0)
    lanes = jnp.arange(p.shape[0])
    return b.at[(p,) + (slice(None),) * (b.ndim - 2) + (lanes,)].add(jnp.moveaxis(v, -1, 0))


def varying_like(carry, *others):
    """``carry`` cast to vary over every manual mesh axis that an array leaf of ``carry`` or
    ``others`` varies over (pass the arrays the scan's body reads).  Under a caller's
    ``shard_map`` a scan whose initial carry is built from constants (zeros, the model's
    inertias) would otherwise change its carry's type in the body, which ``lax.scan``
    rejects; elsewhere it returns ``carry`` unchanged."""
    typeof = getattr(jax, "typeof", None)
    if typeof is None or not (hasattr(lax, "pcast") or hasattr(lax, "pvary")):    # no varying manual axes
        return carry

    def vma(a):                             # the aval's varying axes (named differently by jax version)
        t = a if isinstance(a, jax.ShapeDtypeStruct) else typeof(a)
        mat = getattr(t, "manual_axis_type", None)
        return frozenset(mat.varying if mat is not None else getattr(t, "vma", ()))
    arrays = [a for a in jax.tree_util.tree_leaves((carry, others)) if hasattr(a, "shape") and hasattr(a, "dtype")]
    axes = frozenset().union(*map(vma, arrays))
    if not axes:
        return carry
    def cast(a):
        missing = tuple(sorted(axes - vma(a)))
        if not missing:
            return a
        return lax.pcast(a, missing, to="varying") if hasattr(lax, "pcast") else lax.pvary(a, missing)
    return tmap(cast, carry)


def inside_shard_map():
    """Whether the current trace is inside a ``shard_map`` (a context mesh with manual axes)."""
    get = getattr(jax.sharding, "get_abstract_mesh", None)
    mesh = get() if get is not None else None
    return mesh is not None and not mesh.empty and "Manual" in str(getattr(mesh, "axis_types", ()))


def scan_carry(body, carry, xs=None):
    """``carry`` ready for ``lax.scan(body, carry, xs)`` under a caller's ``shard_map``: cast
    to the manual mesh axes that the body's output carry varies over, found by tracing one
    step abstractly (``jax.eval_shape``; it sees what the body closes over, e.g. a sharded
    torque inside a dynamics function).  Outside ``shard_map`` it returns ``carry`` at no
    cost."""
    if not inside_shard_map():
        return carry
    x0 = None if xs is None else tmap(lambda a: a[0], xs)
    out = jax.eval_shape(lambda c, x: body(c, x)[0], carry, x0)
    return varying_like(carry, out)


def forward_sweep(step, model, init, xs, read=None):
    """Root-to-leaves sweep.

    Args:
      step: ``(parent_val, x_i) -> (val_i, y_i)``; pytrees of per-body values.
      init: the world's value (pytree of arrays).
      xs: per-body inputs (pytree of arrays with leading axis nb).
      read: None, or ``read(thunk, i)`` returning ``thunk()``, the step's inputs at body i
        (:func:`_reads`): a caller's fusion barrier around the reads at the scan index.
    Returns:
      (vals, ys): vals has leading axis nb + 1 (slot nb = world = init); ys leading axis nb.
    """
    def with_siblings(pv, _, x):
        val, y = step(pv, x)
        return val, (), y
    return forward_sweep_with_siblings(with_siblings, model, init, (), xs, read)


def backward_sweep(step, model, init, xs, read=None):
    """Leaves-to-root sweep.

    Args:
      step: ``(acc_i, x_i) -> (to_parent, y_i)``.
      init: per-body initial accumulators (leading axis nb).
      xs: per-body inputs (leading axis nb).
      read: as in :func:`forward_sweep`.
    Returns:
      (acc, ys): final accumulators with leading axis nb + 1 (slot nb = world sum), outputs ys.
    """
    return _backward(lambda acc, _, x: step(acc, x), model, init, xs, read, False)


def backward_sweep_with_parent(step, model, init, xs, read=None):
    """Leaves-to-root sweep whose step also sees the parent's *current* accumulator.

    ``to_parent, y_i = step(acc_i, acc_parent_so_far, x_i)``: children of a body are visited
    in decreasing index order, so ``acc_parent_so_far`` holds init[parent] plus the
    contributions of the siblings with larger index (the sequential elimination order of
    Yamane-Nakamura's path 1).  For root bodies the parent slot is the sink (world); the step
    must treat it as the world.  Returns (acc, ys) like :func:`backward_sweep`.
    """
    return _backward(step, model, init, xs, read, True)


def _reads(read, i, bufs, xs):
    """A sweep step's inputs at body i: each buffer of ``bufs`` read at its slot (i, or the
    parent slot p: :func:`_read`) and the body's xs (None: they come from the scan), through
    ``read`` (:func:`forward_sweep`) when given."""
    def thunk():
        got = tuple(tmap(lambda b: _read(b, at), buf) for buf, at in bufs)
        return got if xs is None else got + (tmap(lambda a: lax.dynamic_index_in_dim(a, i, keepdims=False), xs),)
    return thunk() if read is None else read(thunk, i)


def _backward(step, model, init, xs, read, with_parent):
    nb = model.nb
    buf = tmap(lambda a: jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)], 0), init)

    def body(buf, inp):
        i, p, x = inp if read is None else inp + (None,)
        got = _reads(read, i, ((buf, i),) + (((buf, p),) if with_parent else ()), None if read is None else xs)
        acc, accp = got[0], (got[1] if with_parent else None)
        x = x if read is None else got[-1]
        to_parent, y = step(acc, accp, x)
        buf = _added(buf, p, to_parent)
        return buf, y

    buf = varying_like(buf, model, xs)
    scanned = (jnp.arange(nb, dtype=jnp.int32), _parents(model)) + ((xs,) if read is None else ())
    buf, ys = lax.scan(body, buf, scanned, reverse=True)
    return buf, ys


def forward_sweep_with_siblings(step, model, init, sib_init, xs, read=None):
    """Root-to-leaves sweep that also accumulates, per parent, values of already-visited
    siblings: ``val_i, to_parent, y_i = step(val_parent, sib_parent_so_far, x_i)`` and
    ``sib[parent] += to_parent``.  Children are visited in increasing index order.
    ``init``: the world's value; ``sib_init``: per-slot initial accumulators (leading nb + 1;
    ``()`` for none, which makes this :func:`forward_sweep`); ``read``: as in
    :func:`forward_sweep`.  Returns (vals (nb + 1), ys).
    """
    nb = model.nb
    buf = tmap(lambda a: jnp.broadcast_to(a, (nb + 1,) + jnp.shape(a)).astype(jnp.result_type(a)), init)

    def body(carry, inp):
        buf, sib = carry
        i, p, x = inp if read is None else inp + (None,)
        got = _reads(read, i, ((buf, p), (sib, p)), None if read is None else xs)
        pv, ps = got[:2]
        x = x if read is None else got[2]
        val, to_parent, y = step(pv, ps, x)
        buf = tmap(lambda b, v: lax.dynamic_update_index_in_dim(b, v.astype(b.dtype), i, 0), buf, val)
        sib = _added(sib, p, to_parent)
        return (buf, sib), y

    carry = varying_like((buf, sib_init), model, xs)
    scanned = (jnp.arange(nb, dtype=jnp.int32), _parents(model)) + ((xs,) if read is None else ())
    (buf, _), ys = lax.scan(body, carry, scanned)
    return buf, ys


def sum_over_children(model, vals):
    """Per body, the sum of ``vals`` over its children.  vals (nb, ...) -> (nb, ...)."""
    out = jnp.zeros((model.nb + 1,) + vals.shape[1:], vals.dtype)
    return out.at[parent_slots(model)].add(vals)[:-1]

