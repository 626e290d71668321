"""The only place that walks the kinematic tree.

The bodies are swept in topological order, one ``lax.scan`` per run of bodies with one joint
type (:attr:`jaxdyn.model.Topology.runs`: one or two runs for most robots, e.g. a floating
base and its revolute limbs).  How a value moves between a body and its parent: from one
body to the next (parent i - 1) through the scan's carry; between runs through the earlier
runs' outputs (forward) or through sums carried along the run (backward).  The other links
(a branch inside a run: a humanoid's torso, a hand's fingers) go through K values carried
along the run and chosen by a static plan, so no step indexes a buffer of all bodies (whose
reverse-mode cotangent would be the whole buffer at every step):

* backward: the accumulators still waiting for children (:func:`accumulator_slots`: two for
  a humanoid);
* forward: the values still waiting for children (:func:`value_slots`: one for a humanoid).

A step handles one body of a known joint type, so its motion subspace S has exactly that
joint's columns.  Compile time does not grow with the number of bodies.

* ``forward_sweep(step, model, init, xs)``: for i = 0..nb-1, ``val_i, y_i = step(val[parent_i],
  x_i)`` with ``val[world] = init``.
* ``backward_sweep(step, model, init, xs)``: for i = nb-1..0, ``acc_i`` is ``init[i]`` plus what
  the children of i sent; ``to_parent, y_i = step(acc_i, x_i)`` and ``acc[parent_i] +=
  to_parent`` (entry nb of the returned accumulators is the world's sum).  ``init`` may be a
  function of a body's inputs, ``init(x_i)``, computed where the step reads x_i: no (nb, ...)
  array of initial values is stored (a body's 6 x 6 inertia from its compact inertia, per lane).
* ``backward_sweep_with_parent`` / ``forward_sweep_with_siblings``: variants whose step also
  sees the parent's running accumulator (Yamane-Nakamura's sequential elimination).

Per-body inputs ``xs`` are arrays with a leading axis nb or :class:`PerRun` values (one entry
per run, leading axis the run's length: quantities whose shape depends on the joint type,
such as S (n, 6, nv_t)); per-body outputs come back as a :class:`PerRun`.  Every array may
carry trailing batch axes (a batch-last chunk of states, :mod:`jaxdyn.vmap_rule`).

``keep``: identity for one state; in a batch-last chunk the batching module's fusion barrier
(:func:`jaxdyn.vmap_rule.barrier`), applied here to what each step reads at the scan index (its
parent's or its own slot and its inputs) and passed to the step (``step(..., keep=keep)``),
which applies it to the quantities it computes.  A run of one body is not a loop, and gets
the identity.

Each step is a ``jax.checkpoint``: reverse mode keeps what the step reads (its parent's or
its own accumulator and its inputs, not the values carried along the run) and recomputes the
step when it runs backwards, instead of storing each of its intermediates (a step's dozens of
small component arrays would each be written and read per body).  Per-body inputs are the scan's
inputs, so their cotangents come back per body.
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


def _scan(body, carry, run: Run, reverse, xs):
    """``lax.scan`` of ``body(carry, (i, j, parent slot, xs[j]))`` over the
    bodies of ``run`` (i the body, j its place in the run, ``xs`` the run's per-body inputs
    with leading axis run.n); one body is one call (no loop)."""
    idx = jnp.arange(run.start, run.stop, dtype=jnp.int32)
    par = jnp.asarray(run.parent, jnp.int32)
    if run.n == 1:
        carry, y = body(carry, (idx[0], jnp.int32(0), par[0], tmap(lambda a: a[0], xs)))
        return carry, tmap(lambda a: a[None], y)
    return lax.scan(body, carry, (idx, idx - run.start, par, xs), reverse=reverse)


def _remat(step, keep):
    """``step(..., keep=keep)`` as a ``jax.checkpoint``: reverse mode keeps the step's inputs
    and recomputes it on the way back."""
    return jax.checkpoint(lambda *a: step(*a, keep=keep), prevent_cse=False)


def _read(buf, slot):
    return tmap(lambda b: lax.dynamic_index_in_dim(b, slot, keepdims=False), buf)


def _add(buf, slot, vals):
    """buf[slot] += vals, leaf by leaf."""
    return tmap(lambda b, v: lax.dynamic_update_index_in_dim(b, _read(b, slot) + v.astype(b.dtype), slot, 0), buf, vals)


def _parents(model: Model):
    return np.asarray(model.topology.parent, np.int64).reshape(model.nb)


def _chain_links(model: Model):
    """(direct, outer), (nb,) bool: the body's parent is the body before it in the same run
    (the scan's carry), or is the world or lies in an earlier run."""
    start = np.zeros(model.nb, np.int64)
    for r in model.runs:
        start[r.start:r.stop] = r.start
    parent = _parents(model)
    outer = parent < start
    return (parent == np.arange(model.nb) - 1) & ~outer, outer


def value_slots(parent, links):
    """The static plan of the values that a root-to-leaves sweep keeps in slots (bodies visited
    0..nb-1; ``parent`` (nb,)).  ``links`` (nb,) bool: the bodies that read their parent's value
    from a slot (a branch inside a run).  A parent's value needs a slot from its own visit to
    the visit of its last such child, so slots are reused: K = 1 for panda's fingers and for a
    humanoid's torso.

    Returns (K, read, own, writes), arrays (nb,): body i reads its parent's value from slot
    read[i] where links[i], and writes its own value into slot own[i] where writes[i]."""
    nb = len(parent)
    links = np.asarray(links, bool)
    last = {int(parent[i]): i for i in range(nb) if links[i]}
    read, own, writes = np.zeros(nb, np.int32), np.zeros(nb, np.int32), np.zeros(nb, bool)
    free, K = [], 0
    for i in range(nb):
        if links[i]:
            read[i] = own[parent[i]]
            if last[int(parent[i])] == i:       # read before i writes: i may reuse the slot
                free.append(read[i])
        if i in last:
            writes[i] = True
            if free:
                own[i] = free.pop()
            else:
                own[i], K = K, K + 1
    return K, read, own, writes


def _cat(trees):
    """Pytrees of one structure concatenated leaf by leaf along their first axis."""
    return tmap(lambda *a: jnp.concatenate(a, 0), *trees)


def _select(flag, a, b):
    return tmap(lambda u, v: jnp.where(flag, u, v.astype(u.dtype)), a, b)


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
    is :func:`forward_sweep`).  Returns (vals (nb + 1, ...), ys :class:`PerRun`).

    Values reach the children through the carry (parent i - 1), gathered from the earlier
    runs' outputs or the world's before the scan, or (a branch inside a run) through one of K
    values carried along the run (:func:`value_slots`)."""
    parent = _parents(model)
    direct, outer = _chain_links(model)
    K, read, own, writes = value_slots(parent, ~direct & ~outer)
    init = tmap(jnp.asarray, init)
    world = tmap(lambda w: w[None], init)
    with_sib = jax.tree_util.tree_leaves(sib_init) != []
    sib, vals, ys = sib_init, [], []
    for j, run in enumerate(model.runs):
        sl = slice(run.start, run.stop)
        ext = None
        if outer[sl].any():       # the parent's value: an earlier run's output, or the world's
            ext = tmap(lambda a: a[np.where(outer[sl] & (parent[sl] >= 0), parent[sl], run.start)], _cat(vals + [world]))
        plan = tuple(jnp.asarray(a[sl]) for a in (direct, outer, read, own, writes))
        held = (init,) * K if writes[sl].any() else None

        def body(carry, inp, plan=plan, keep=keep):
            prev, held, sib = carry
            _, k, p, (x, e) = inp
            direct, outer, read, own, writes = plan

            def reads():
                pv = None
                for s_, h in enumerate(held or ()):
                    pv = h if pv is None else _select(read[k] == s_, h, pv)
                if e is not None:
                    pv = e if pv is None else _select(outer[k], e, pv)
                if prev is not None:
                    pv = prev if pv is None else _select(direct[k], prev, pv)
                return pv, _read(sib, p) if with_sib else (), x
            pv, ps, x = keep(reads)
            val, to_parent, y = _remat(step, keep)(pv, ps, x)
            val = tmap(lambda a, v: v.astype(a.dtype), init, val)
            if held is not None:
                held = tuple(_select(writes[k] & (own[k] == s_), val, h) for s_, h in enumerate(held))
            carry = (None if prev is None else val, held, _add(sib, p, to_parent) if with_sib else sib)
            return carry, (val, y)
        (_, _, sib), (val, y) = _scan(body, (init if direct[sl].any() else None, held, sib), run, False,
                                      (_of_run(xs, j, run), ext))
        vals.append(val)
        ys.append(y)
    return _cat(vals + [world]), _by_run(ys)


def backward_sweep(step, model: Model, init, xs, keep=same):
    """Leaves-to-root sweep.

    Args:
      step: ``(acc_i, x_i, keep=...) -> (to_parent, y_i)``.
      init: per-body initial accumulators (leading axis nb), or a function ``init(x_i)`` of
        one body's inputs giving its initial accumulator.
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


def accumulator_slots(parent, links=None):
    """The static plan of the accumulators that a leaves-to-root sweep keeps in slots (bodies
    visited nb-1..0; ``parent`` (nb,), -1 for the world).  ``links`` (nb,) bool: the bodies
    that send to their parent through a slot (default: all).  A parent needs a slot from the
    visit of its first (highest-index) such child to its own visit, so slots are reused: a
    chain needs one, talos_reduced two, and their number does not grow with the number of
    bodies.

    Returns (K, own, has, to, first), arrays (nb,): K slots plus the world's (index K); body
    i reads its children's sum from slot own[i] where has[i], and sends to slot to[i] (K + 1:
    to none, where it does not link through a slot), overwriting it where first[i] (the first
    child of its parent to send) and adding to it otherwise."""
    nb = len(parent)
    links = np.ones(nb, bool) if links is None else np.asarray(links, bool)
    kids = [[] for _ in range(nb)]
    for i, p in enumerate(parent):
        if p >= 0 and links[i]:
            kids[p].append(i)
    own, to, first = np.zeros(nb, np.int32), np.full(nb, -1, np.int32), np.zeros(nb, bool)
    has = np.array([bool(k) for k in kids], bool).reshape(nb)
    free, K = [], 0
    for i in reversed(range(nb)):
        if has[i]:                      # read at this visit: free for the parent's sum
            free.append(own[i])
        p = parent[i]
        if not links[i]:
            to[i] = -2
            continue
        if p < 0:
            continue
        if i == max(kids[p]):
            if free:
                own[p] = free.pop()
            else:
                own[p], K = K, K + 1
            to[i], first[i] = own[p], True
        else:
            to[i] = own[p]
    to[to == -1], to[to == -2] = K, K + 1
    return K, own, has, to, first


def _backward(step, model: Model, init, xs, keep, with_parent):
    """The backward sweeps.  A body sends to its parent through the scan's carry where the
    parent is the next body visited (parent i - 1, in the same run); into a sum carried along
    its run for each parent outside the run (an earlier run's body or the world), added to
    that parent's initial accumulator before its run (or to the world's); and otherwise into
    one of K accumulators carried along the sweep (:func:`accumulator_slots`: a branch inside
    a run, talos_reduced's torso), selected by a static plan, so no step indexes a buffer.
    With ``with_parent`` every link goes through the K accumulators (the roots' through the
    world's), where the step sees its parent's running sum."""
    nb = model.nb
    init_of = init if callable(init) else None                 # init(x_i), computed in the step's reads
    if init_of is not None:
        if with_parent:
            raise ValueError("backward_sweep_with_parent needs per-body initial accumulators, not a function")
        body0 = jax.eval_shape(lambda: init_of(_read(_of_run(xs, 0, model.runs[0]), 0)))
        init = tmap(lambda a: jax.ShapeDtypeStruct((nb,) + a.shape, a.dtype), body0)
    parent = _parents(model)
    direct, outer = (np.zeros(nb, bool), np.zeros(nb, bool)) if with_parent else _chain_links(model)
    slot = ~direct & ~outer
    K, own, has, to, first = accumulator_slots(parent, slot)
    after = np.append(direct[1:], False)                        # the body visited before i is its child
    zero = jnp.zeros_like
    zero_body = tmap(lambda a: jnp.zeros(a.shape[1:], a.dtype), init)
    held = (zero_body,) * (K + with_parent)           # K slots, and the world's where the roots send through it
    sent = tmap(lambda a: jnp.zeros((nb + 1,) + a.shape[1:], a.dtype), init)   # from later runs, and the world's
    padded = tmap(lambda a: jnp.concatenate([a, zero(a[:1])], 0), init) if with_parent else None
    ys = [None] * len(model.runs)
    for j in reversed(range(len(model.runs))):
        run = model.runs[j]
        sl = slice(run.start, run.stop)
        if init_of is not None:
            mine = tmap(lambda b: b[sl], sent) if outer[run.stop:].any() else None
        else:
            mine = tmap(lambda a, b: a[sl] + b[sl], init, sent) if outer[run.stop:].any() else _of_run(init, j, run)
        plan = tuple(jnp.asarray(a[sl]) for a in (own, has, to, first, after))
        target = np.where(parent[sl] >= 0, parent[sl], nb)
        dests = np.unique(target[outer[sl]])            # the parents outside the run: one carried sum each
        dest = jnp.asarray(np.where(outer[sl], np.searchsorted(dests, target), -1))
        uses = slot[sl].any() or has[sl].any()

        def body(carry, inp, plan=plan, dest=dest, keep=keep):
            prev, held, out = carry
            _, k, p, (xk, mk) = inp
            own, has, to, first, after = plan

            def reads():               # init[i] + what i's children sent; the same for the parent so far
                acc = init_of(xk) if init_of is not None else mk
                if init_of is not None and mk is not None:
                    acc = tmap(jnp.add, acc, mk)
                if prev is not None:
                    acc = tmap(lambda a, b: a + jnp.where(after[k], b, zero(b)), acc, prev)
                for s_, h in enumerate(held or ()):
                    acc = tmap(lambda a, b: a + jnp.where(has[k] & (own[k] == s_), b, zero(b)), acc, h)
                accp = None
                if with_parent:
                    accp = _read(padded, p)
                    for s_, h in enumerate(held):
                        accp = tmap(lambda a, b: a + jnp.where(~first[k] & (to[k] == s_), b, zero(b)), accp, h)
                return acc, accp, xk
            acc, accp, x = keep(reads)
            to_parent, y = _remat(step, keep)(acc, accp, x)
            to_parent = tmap(lambda a, v: v.astype(a.dtype), zero_body, to_parent)
            if held is not None:
                held = tuple(tmap(lambda h, v: jnp.where(to[k] == s_, jnp.where(first[k], v, h + v), h), h, to_parent)
                             for s_, h in enumerate(held))
            out = tuple(tmap(lambda o, v: o + jnp.where(dest[k] == d, v, zero(v)), o, to_parent) for d, o in enumerate(out))
            return (None if prev is None else to_parent, held, out), (acc, y)
        (_, h, out), ys[j] = _scan(body, (zero_body if after[sl].any() else None, held if uses else None,
                                          (zero_body,) * len(dests)), run, True, (_of_run(xs, j, run), mine))
        held = h if uses else held
        for d, o in zip(dests, out):
            sent = tmap(lambda s, v: s.at[d].add(v), sent, o)
    world = tmap(lambda s, b: s[nb:] + b[None], sent, held[K]) if with_parent else tmap(lambda s: s[nb:], sent)
    return _cat([y[0] for y in ys] + [world]), _by_run([y[1] for y in ys])


def sum_over_children(model: Model, vals):
    """Per body, the sum of ``vals`` (nb, ...) over its children: (nb, ...)."""
    parent = jnp.asarray([p if p >= 0 else model.nb for p in model.topology.parent], jnp.int32)
    out = jnp.zeros((model.nb + 1,) + vals.shape[1:], vals.dtype)
    return out.at[parent].add(vals)[:-1]
