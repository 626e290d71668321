"""The only place that walks the kinematic tree.

The bodies are swept in topological order, one ``lax.scan`` per run of bodies with one joint
type (:attr:`jaxdyn.model.Topology.runs`: one or two runs for most robots, e.g. a floating
base and its revolute limbs).  A forward sweep keeps a buffer of per-body values plus one
*sink* slot (index nb) that stands for the world, so no step needs a branch for the root.  A
backward sweep keeps only the accumulators still waiting for children, in slots reused along
the sweep (:func:`accumulator_slots`: one for a chain, two for a humanoid), so its working set
does not grow with the number of bodies.  A step handles one body of a known joint type, so
its motion subspace S has exactly that joint's columns.  Compile time does not grow with the
number of bodies.

* ``forward_sweep(step, model, init, xs)``: for i = 0..nb-1, ``val_i, y_i = step(val[parent_i],
  x_i)`` with ``val[world] = init``.
* ``backward_sweep(step, model, init, xs)``: for i = nb-1..0, ``acc_i`` is ``init[i]`` plus what
  the children of i sent; ``to_parent, y_i = step(acc_i, x_i)`` and ``acc[parent_i] +=
  to_parent`` (the world's sum lands in the sink slot).
* ``backward_sweep_with_parent`` / ``forward_sweep_with_siblings``: variants whose step also
  sees the parent's running accumulator (Yamane-Nakamura's sequential elimination).

Per-body inputs ``xs`` are arrays with a leading axis nb or :class:`PerRun` values (one entry
per run, leading axis the run's length: quantities whose shape depends on the joint type,
such as S (n, 6, nv_t)); per-body outputs come back as a :class:`PerRun`.  Every array may
carry trailing batch axes (a batch-last chunk of states, :mod:`jaxdyn.batching`).

``keep``: identity for one state; in a batch-last chunk the batching module's fusion barrier
(:func:`jaxdyn.batching.barrier`), applied here to what each step reads at the scan index (its
parent's or its own slot and its inputs) and passed to the step (``step(..., keep=keep)``),
which applies it to the quantities it computes.  A run of one body is not a loop, and gets
the identity.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .model.model import Model, Run

tmap = jax.tree_util.tree_map


def same(x):
    """The identity ``keep`` (no fusion barrier): x, or x() for a function."""
    return x() if callable(x) else x


class PerRun(tuple):
    """Per-body values grouped by the model's runs (:attr:`Model.runs`): entry j holds the
    values of run j's bodies (leading axis run.n)."""

    def bodies(self):
        """The entries concatenated along the body axis: (nb, ...) (equal shapes after it)."""
        return jnp.concatenate(self, 0)

    def dofs(self):
        """Per-joint values (n, nv_t, ...) of each run flattened into dofs: (nv, ...)."""
        return jnp.concatenate([x.reshape((-1,) + x.shape[2:]) for x in self], 0)


jax.tree_util.register_pytree_node(PerRun, lambda p: (tuple(p), None), lambda _, c: PerRun(c))


def _by_run(ys):
    """A list of per-run outputs (pytrees of one structure) as that structure with a
    :class:`PerRun` at every leaf (an empty PerRun for a model without bodies)."""
    if not ys:
        return PerRun(())
    return tmap(lambda *a: PerRun(a), *ys)


def per_run(model: Model, x) -> PerRun:
    """A per-dof array (nv, ...) as per-joint slots: entry j (run.n, run.nv, ...)."""
    return PerRun(x[r.v0:r.v0 + r.n * r.nv].reshape((r.n, r.nv) + x.shape[1:]) for r in model.runs)


def _of_run(xs, j, run: Run):
    """Run j's part of ``xs`` (arrays with a leading axis nb, or PerRun)."""
    return tmap(lambda a: a[j] if isinstance(a, PerRun) else a[run.start:run.stop], xs,
                is_leaf=lambda a: isinstance(a, PerRun))


def _scan(body, carry, run: Run, reverse):
    """``lax.scan`` of ``body(carry, (i, j, parent slot))`` over the bodies of ``run`` (i the
    body, j its place in the run); one body is one call (no loop)."""
    idx = jnp.arange(run.start, run.stop, dtype=jnp.int32)
    par = jnp.asarray(run.parent, jnp.int32)
    if run.n == 1:
        carry, y = body(carry, (idx[0], jnp.int32(0), par[0]))
        return carry, tmap(lambda a: a[None], y)
    return lax.scan(body, carry, (idx, idx - run.start, par), reverse=reverse)


def _read(buf, slot):
    return tmap(lambda b: lax.dynamic_index_in_dim(b, slot, keepdims=False), buf)


def _write(buf, slot, vals):
    return tmap(lambda b, v: lax.dynamic_update_index_in_dim(b, v.astype(b.dtype), slot, 0), buf, vals)


def _add(buf, slot, vals):
    return _write(buf, slot, tmap(lambda a, v: a + v.astype(a.dtype), _read(buf, slot), vals))


def forward_sweep(step, model: Model, init, xs, keep=same):
    """Root-to-leaves sweep.

    Args:
      step: ``(parent_val, x_i, keep=...) -> (val_i, y_i)``, pytrees of one body's values.
      init: the world's value (a pytree of arrays).
      xs: per-body inputs (leading axis nb, or :class:`PerRun`).
    Returns:
      (vals, ys): vals with leading axis nb + 1 (slot nb = world = init); ys the step's
      output structure with a :class:`PerRun` at each leaf.
    """
    def with_siblings(pv, _, x, keep):
        val, y = step(pv, x, keep=keep)
        return val, (), y
    return forward_sweep_with_siblings(with_siblings, model, init, (), xs, keep)


def forward_sweep_with_siblings(step, model: Model, init, sib_init, xs, keep=same):
    """Root-to-leaves sweep that also accumulates, per parent, values of already-visited
    siblings: ``val_i, to_parent, y_i = step(val_parent, sib_parent_so_far, x_i, keep=...)`` and
    ``sib[parent] += to_parent``; children are visited in increasing index order.
    ``sib_init``: per-slot initial accumulators (leading axis nb + 1; ``()`` for none, which
    is :func:`forward_sweep`).  Returns (vals (nb + 1, ...), ys :class:`PerRun`)."""
    nb = model.nb
    buf = tmap(lambda a: jnp.broadcast_to(a, (nb + 1,) + jnp.shape(a)).astype(jnp.result_type(a)), init)
    carry, ys = (buf, sib_init), []
    for j, run in enumerate(model.runs):
        def body(carry, inp, x=_of_run(xs, j, run), keep=keep):
            buf, sib = carry
            i, k, p = inp
            pv, ps, x = keep(lambda: (_read(buf, p), _read(sib, p), _read(x, k)))
            val, to_parent, y = step(pv, ps, x, keep=keep)
            return (_write(buf, i, val), _add(sib, p, to_parent)), y
        carry, y = _scan(body, carry, run, False)
        ys.append(y)
    return carry[0], _by_run(ys)


def backward_sweep(step, model: Model, init, xs, keep=same):
    """Leaves-to-root sweep.

    Args:
      step: ``(acc_i, x_i, keep=...) -> (to_parent, y_i)``.
      init: per-body initial accumulators (leading axis nb).
      xs: per-body inputs (leading axis nb, or :class:`PerRun`).
    Returns:
      (acc, ys): final accumulators with leading axis nb + 1 (slot nb = what the roots sent),
      ys a :class:`PerRun`.
    """
    return _backward(lambda acc, _, x, keep: step(acc, x, keep=keep), model, init, xs, keep, False)


def backward_sweep_with_parent(step, model: Model, init, xs, keep=same):
    """Leaves-to-root sweep whose step also sees the parent's *current* accumulator:
    ``to_parent, y_i = step(acc_i, acc_parent_so_far, x_i, keep=...)``.  Children are visited in
    decreasing index order, so ``acc_parent_so_far`` holds init[parent] plus what the siblings
    with larger index sent (the sequential elimination order of Yamane-Nakamura's path 1).
    For root bodies the parent slot is the sink (world).  Returns (acc, ys) like
    :func:`backward_sweep`."""
    return _backward(step, model, init, xs, keep, True)


def accumulator_slots(parent):
    """The static plan of a leaves-to-root sweep's accumulators (bodies visited nb-1..0;
    ``parent`` (nb,), -1 for the world).  Only a body with children needs a slot, from the
    visit of its first (highest-index) child to its own visit, so slots are reused: a chain
    needs one, talos_reduced two, and the buffer does not grow with the number of bodies.

    Returns (K, own, has, to, first), arrays (nb,): K slots plus the world's (index K); body
    i reads its children's sum from slot own[i] where has[i], and sends to slot to[i],
    overwriting it where first[i] (the first child of its parent to send) and adding to it
    otherwise."""
    nb = len(parent)
    kids = [[] for _ in range(nb)]
    for i, p in enumerate(parent):
        if p >= 0:
            kids[p].append(i)
    own, to, first = np.zeros(nb, np.int32), np.zeros(nb, np.int32), np.zeros(nb, bool)
    has = np.array([bool(k) for k in kids], bool).reshape(nb)
    free, K = [], 0
    for i in reversed(range(nb)):
        if has[i]:                      # read at this visit: free for the parent's sum
            free.append(own[i])
        p = parent[i]
        if p < 0:
            to[i] = -1
        elif i == max(kids[p]):
            if free:
                own[p] = free.pop()
            else:
                own[p], K = K, K + 1
            to[i], first[i] = own[p], True
        else:
            to[i] = own[p]
    to[to < 0] = K
    return K, own, has, to, first


def _backward(step, model: Model, init, xs, keep, with_parent):
    K, own, has, to, first = accumulator_slots(np.asarray(model.topology.parent, np.int64).reshape(model.nb))
    buf = tmap(lambda a: jnp.zeros((K + 1,) + a.shape[1:], a.dtype), init)
    padded = tmap(lambda a: jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)], 0), init) if with_parent else None
    zero = jnp.zeros_like
    ys = [None] * len(model.runs)
    for j in reversed(range(len(model.runs))):
        run = model.runs[j]
        sl = slice(run.start, run.stop)
        plan = (_of_run(init, j, run),) + tuple(jnp.asarray(a[sl]) for a in (own, has, to, first))

        def body(buf, inp, x=_of_run(xs, j, run), plan=plan, keep=keep):
            _, k, p = inp
            mine, own, has, to, first = plan

            def reads():               # init[i] + what i's children sent; the same for the parent so far
                acc = tmap(lambda a, b: a + jnp.where(has[k], b, zero(b)), _read(mine, k), _read(buf, own[k]))
                accp = tmap(lambda a, b: a + jnp.where(first[k], zero(b), b), _read(padded, p), _read(buf, to[k])) if with_parent else None
                return acc, accp, _read(x, k)
            acc, accp, x = keep(reads)
            to, first = to[k], first[k]
            to_parent, y = step(acc, accp, x, keep=keep)
            sent = tmap(lambda o, v: jnp.where(first, v.astype(o.dtype), o + v.astype(o.dtype)), _read(buf, to), to_parent)
            return _write(buf, to, sent), (acc, y)
        buf, ys[j] = _scan(body, buf, run, True)
    acc = tmap(lambda a, w: jnp.concatenate([a.bodies(), w[K:]], 0) if len(a) else w[K:],
               _by_run([y[0] for y in ys]), buf, is_leaf=lambda a: isinstance(a, PerRun))
    return acc, _by_run([y[1] for y in ys])


def sum_over_children(model: Model, vals):
    """Per body, the sum of ``vals`` (nb, ...) over its children: (nb, ...)."""
    parent = jnp.asarray([p if p >= 0 else model.nb for p in model.topology.parent], jnp.int32)
    out = jnp.zeros((model.nb + 1,) + vals.shape[1:], vals.dtype)
    return out.at[parent].add(vals)[:-1]
