"""The batch-last ABA kernel (:func:`aba_layout_kernel`): the same algorithm as
:func:`jaxdyn.aba` (Featherstone 2010 Fig. 9) for a chunk of states in a layout chosen for
XLA:CPU, or for one state without the batch axis.  Its entry points (``aba_batch``,
``aba_lanes`` for a model per state, ``aba_one_state``) are in
:mod:`jaxdyn.dynamics.batch_aba`.

The layout.  ``vmap(aba)`` turns every 6x6 product into a batched ``dot``.  Here per-body
quantities are *batch-last*, ``(6, 6, C)`` with C robots on the minor axis, and every product
is an explicit sum of broadcast multiplies: one vectorized loop over C.  The algebra and the
per-body steps are not repeated here: they are the component-first functions of
:mod:`jaxdyn.spatial.linalg`, :mod:`jaxdyn.spatial.transforms` and
:mod:`jaxdyn.dynamics.aba_steps`, shared with :func:`jaxdyn.aba`.  This module holds only
what is specific to the layout on XLA:CPU (``docs/architecture.md``, "Layouts"; the
measurements are in ``benchmarks/results/core.json``):

* :func:`materialize`, the ``keep`` barrier after each product: XLA fuses a product into
  the product that consumes it and then *recomputes* each element of the inner product for
  every use.  ``optimization_barrier`` is removed before fusion on CPU, so it is a
  ``lax.cond`` whose predicate XLA cannot fold.
* :data:`CPU_OPTIONS`: the legacy XLA:CPU loop emitters vectorize these fusions, the newer
  fusion emitters do not.  A top-level ``aba_batch`` call uses them; inside your own
  function, compile it with ``jaxdyn.jit``.  Traced for the newer emitters (inside a plain
  ``jax.jit``), each sweep step reads at the scan index inside a barrier
  (:func:`sweep_reader`), and each ``keep`` computes its product inside the barrier's branch
  (a thunk of :func:`materialize`), so no barrier copies its array.
* Chunking and sharding (:mod:`jaxdyn.dynamics.chunks`, used by the entry points): the batch
  runs in chunks of ``chunk`` robots (``lax.map``); the chunks are split over the devices
  with ``shard_map``.  One XLA:CPU program runs on one core, so two cores need two host
  devices.
* A floating base (a FREE joint on body 0, the only root) is handled outside the scan, so the
  scanned bodies carry ``k`` = their own largest dof count (1 for humanoids and quadrupeds)
  instead of the free joint's 6, and their joint transforms are computed for their own joint
  types only.

Results equal Pinocchio's aba per state (tests/test_batch.py).  A singular articulated
inertia (e.g. a massless leaf on a joint) gives NaN, as :func:`jaxdyn.aba`.
"""
from __future__ import annotations

import contextlib
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..model.model import Model, floating_root_layout, tree_arrays
from ..model import joints as J
from ..kinematics import joint_transforms
from ..tree import backward_sweep, forward_sweep, lanes_off_candidates
from ..spatial.linalg import mv
from ..compiled import for_cpu_options
from .aba_steps import acceleration_step, bias_step, inertia_step, same, velocity_step
from .common import body_inertia_matrices, dof_owner, materialize, pivot_addend, scatter_dofs, take_static

# ---------------------------------------------------------------- layout: fusion barriers
# The algebra (jaxdyn.spatial.linalg, jaxdyn.spatial.transforms) and the per-body steps
# (jaxdyn.dynamics.aba_steps) are component-first and shared with jaxdyn.aba; this module holds
# the layout (C minor), the barriers between fused products, chunking and sharding.


def kept_step(step, one):
    """A per-body step of :mod:`jaxdyn.dynamics.aba_steps` whose inputs start with the scan
    index ``i``, run with :func:`materialize` at ``i`` as its ``keep`` (a chunk) or with no
    barrier (``one`` state)."""
    def run(carry, x):
        i, rest = x[0], x[1:]
        return step(carry, rest) if one else step(carry, rest, partial(materialize, i=i))
    return run


def _pass2(one):
    """Articulated inertia and bias force together (one sweep; the two parts of pass 2)."""
    def run(acc, x):
        IA, pA = acc
        i, E, r, S, add, c, tau = x
        keep = same if one else partial(materialize, i=i)
        IAp, (U, _, Dinv, UDinv, Ia) = inertia_step(IA, (E, r, S, add), keep)
        pAp, u = bias_step(pA, (E, r, S, UDinv, Ia, c, tau), keep)
        return (IAp, pAp), (U, Dinv, u)
    return run


def sweep_reader(one):
    """The sweeps' ``read`` (:func:`jaxdyn.tree.forward_sweep`) for a chunk traced for
    XLA:CPU's default fusion emitters: what a step reads at the scan index (its xs, its
    parent's or its own buffer slot) is read inside a fusion barrier (a thunk of
    :func:`materialize`, which copies the slices once), because those emitters turn a fusion
    that reads a dynamic slice into scalar code that reloads the index for every element.
    None (plain reads) for one state and for programs traced for :data:`CPU_OPTIONS`, whose
    legacy emitters vectorize such fusions."""
    return None if one or for_cpu_options() else materialize


class _Tree(NamedTuple):
    """What tree.py needs of a model: the scanned bodies' count and parents, and for a stack
    each scanned body's possible parents (``Model.lane_parents``, shifted like ``parent``;
    :func:`jaxdyn.tree.candidate_slots`)."""
    nb: int
    parent: jax.Array
    candidates: tuple | None = None


def scan_plan(model: Model):
    """Static plan: (root out of the scan?, dof slots k and joint types of the scanned bodies).
    A FREE joint on body 0 that is the only root is taken out of the scan (True); a stack's
    plan may name its members' root joint types instead (:func:`root_types`).  From the
    concrete topology of one model when there is one, else (a traced model, e.g. a jit
    argument or inside ``jaxdyn.aba``'s vmap rule, or a stack) from ``model.scan_layout``, set
    by ``build_model`` and ``jaxdyn.stack``."""
    try:
        plan = floating_root_layout(model.parent, model.jtype, model.nb) if jnp.ndim(model.parent) == 1 \
            else model.scan_layout
    except jax.errors.TracerArrayConversionError:
        plan = model.scan_layout
    return plan if plan is not None else (False, model.k, model.types)


def root_types(free):
    """Joint types of body 0 when the plan (:func:`scan_plan`) takes it out of the scan: ``free``
    is True (a floating root: FREE) or, for a stack (``jaxdyn.stack``), the members' root
    joint types."""
    return (J.FREE,) if free is True else tuple(free)


def _joint_transforms(model: Model, q, bodies, types, k):
    """:func:`jaxdyn.kinematics.joint_transforms` of ``bodies`` for a chunk q (C, nq),
    batch-last: E (n, 3, 3, C), r (n, 3, C), S (n, 6, k, C); for one state q (nq,) the same
    without the C axis."""
    jt = partial(joint_transforms, model, bodies=bodies, types=types, k=k)
    X, S = jt(q) if q.ndim == 1 else jax.vmap(jt, out_axes=-1)(q)
    return X.E, X.r, S


def chunk_joint_transforms(model: Model, q):
    """Joint transforms of a chunk q (C, nq), batch-last: E (nb, 3, 3, C), r (nb, 3, C),
    S (nb, 6, model.k, C), as :func:`jaxdyn.kinematics.joint_transforms` for every state.  A
    floating root (:func:`scan_plan`) is computed alone, so the other bodies compute only
    their own joint types (not a free joint each)."""
    free, k, types = scan_plan(model)
    if not free:
        return _joint_transforms(model, q, slice(None), model.types, model.k)
    E0, r0, S0 = _joint_transforms(model, q, slice(0, 1), root_types(free), model.k)
    E1, r1, S1 = _joint_transforms(model, q, slice(1, model.nb), types, k)
    S1 = jnp.pad(S1, ((0, 0), (0, 0), (0, model.k - k), (0, 0)))
    return (jnp.concatenate([E0, E1]), jnp.concatenate([r0, r1]),
            jnp.concatenate([jnp.pad(S0, ((0, 0), (0, 0), (0, model.k - 6), (0, 0))), S1]))


def body_constants(model: Model, dt, batch=(1,)):
    """State-independent per-body data, computed once per call: 6x6 inertias (nb, 6, 6, *batch)
    and the pivot's diagonal addend (armature; 1 on unused slots) (nb, k, *batch); ``batch`` =
    (1,) for chunks, () for one state."""
    I6 = body_inertia_matrices(model).astype(dt).reshape((model.nb, 6, 6) + batch)
    padarm = pivot_addend(model).astype(dt).reshape((model.nb, model.k) + batch)
    return I6, padarm


def _slots(model: Model, qd, tau, free, k, one, lanes, per_state):
    """qd and tau in per-body joint slots for :func:`aba_layout_kernel`: for each, (the root's
    slots (model.k, ...) or None, the scanned bodies' slots (nb - o, k, ...)), batch-last, for
    the plan ``free, k`` (:func:`scan_plan`; o = 1 when the root is outside the scan).  One
    model: rows of the batch-last qd and tau, read by
    :func:`jaxdyn.dynamics.common.take_static` for a static topology (one slice for a
    humanoid's dofs after its free joint), else by a gather with the traced vidx; a model per
    lane: gathered per state."""
    o = int(bool(free))
    _, vidx = tree_arrays(model) if not lanes else (None, None)
    if vidx is not None:      # one model (static or traced topology): rows of the batch-last x
        bs = () if one else (qd.shape[0],)
        take = take_static if isinstance(vidx, np.ndarray) else partial(jnp.take, axis=0)

        def at(x, idx):
            xt = x if one else x.T
            return take(jnp.concatenate([xt, jnp.zeros((1,) + bs, xt.dtype)]), idx)
        return tuple((at(x, vidx[0]) if free else None, at(x, vidx[o:, :k])) for x in (qd, tau))

    def slots(m, x):        # one state: only the slots the plan reads (a stack: 0.25 µs/state less than all)
        xp = jnp.concatenate([x, jnp.zeros((1,), x.dtype)])
        return xp[m.vidx[0]] if free else None, xp[m.vidx[o:, :k]]
    return per_state(slots, qd), per_state(slots, tau)


class _Roots(NamedTuple):
    """The root body of a plan that takes it out of the scan (:func:`scan_plan`), per joint type
    it can have (``types``: one for a single model, the members' root types for a stack):
    ``transforms`` holds each type's joint transform (E0, r0, S0 (6, model.k, ...));
    :meth:`select` runs a step once per type, with S0's first NV[t] columns, and picks each
    lane's result by its root joint type ``jtype``.  Each type's own S0 keeps a free joint's
    S0 a constant permutation and a revolute one a single column, so XLA drops the products
    with their zeros; one S0 selected per lane made them 6x6 products of data.  The stack of
    panda, anymal_c, talos_reduced and g1 (panda's revolute root beside floating roots):
    7.28 -> 7.07 and 7.45 -> 7.25 µs per state (alternating processes); what panda adds to a
    talos_reduced stack beyond anymal_c fell from 0.97 to 0.55-0.65 µs.  Several types occur
    only in a stack's lanes (one model has one root type), which ``vmap(aba)`` alone reaches
    and whose derivatives take :func:`jaxdyn.aba`'s ``custom_jvp`` rule, so no gradient
    passes through the results a lane discards."""
    types: tuple
    jtype: jax.Array
    transforms: tuple

    def select(self, step):
        """``step(t, E0, r0, S0)`` for each root type t, each lane's of them (a pytree)."""
        outs = [(t, step(t, E0, r0, S0[:, :J.NV[t]])) for t, (E0, r0, S0) in zip(self.types, self.transforms)]
        out = outs[0][1]
        for t, o in outs[1:]:
            out = jax.tree_util.tree_map(lambda a, b: jnp.where(self.jtype == t, a, b), o, out)
        return out


def aba_layout_kernel(model: Model, q, qd, tau, fx, a0, consts, free, k, types, lanes=False, ci=None):
    """ABA on one chunk, q (C, nq), qd, tau (C, nv), fx (C, nb, 6) [n; f] local -> qdd (C, nv),
    or on one state, q (nq,), qd, tau (nv,), fx (nb, 6) -> qdd (nv,) (then without fusion
    barriers).  ``consts``: :func:`body_constants`; ``free, k, types``: :func:`scan_plan`; a0
    (6,) the base acceleration.  Three sweeps (velocities; articulated inertias and bias
    forces together; accelerations) over the bodies after a floating root, which is handled
    outside them.

    ``lanes``: the chunk's C states belong to C models, ``model`` a stack (every leaf with a
    leading axis C, :func:`jaxdyn.stack`), consts (nb, 6, 6, C), (nb, k, C) and a0
    (6, C): parents differ per lane, so the sweeps read and add per lane
    (:func:`jaxdyn.tree.forward_sweep`), among each body's candidate parents when the stack
    lists them (``Model.lane_parents``) and the program is traced for :data:`CPU_OPTIONS`.
    ``ci``: the chunk counter (traced), for a fusion barrier on the root's acceleration."""
    one, dt = q.ndim == 1, q.dtype
    bs = () if one else (q.shape[0],)                                      # the batch axis, or none
    I6, padarm = consts
    last = (lambda a: a) if one else (lambda a: jnp.moveaxis(a, 0, -1))    # (nb, ..., C)
    if one:
        per_state = lambda f, *xs: f(model, *xs)
    elif lanes:
        per_state = lambda f, *xs: jax.vmap(f, out_axes=-1)(model, *xs)
    else:
        per_state = lambda f, *xs: jax.vmap(partial(f, model), out_axes=-1)(*xs)
    lane = (lambda a: jnp.moveaxis(a, 0, -1)) if lanes else (lambda a: a)  # a model leaf, lanes last
    nb, o = model.nb, int(bool(free))                                       # o: first scanned body

    def jt(bodies, ts, kk):
        with contextlib.nullcontext() if one else J.elementwise_products():
            return per_state(lambda m, x: _joint_transforms(m, x, bodies, ts, kk), q)
    E1, r1, S1 = jt(slice(o, nb), types, k)
    qdb, taub = _slots(model, qd, tau, free, k, one, lanes, per_state)
    fx = last(fx)
    parent = lane(model.parent)[o:]
    # a stack's candidate parents per body: read among them with the legacy emitters; the
    # fusion emitters (a caller's plain jit) turn the selects of dynamic slices into scalar code
    shifted = None if not lanes or model.lane_parents is None or not for_cpu_options() else \
        tuple(tuple(c - o for c in row) for row in model.lane_parents[o:])
    tree = _Tree(nb - o, (parent - o).astype(jnp.int32), shifted)
    idx = jnp.arange(nb - o, dtype=jnp.int32)
    if free:   # body 0, the only root: v0 = S0 qd0 (c0 = 0), pA0 = v0 x* I0 v0 - f0
        ts = root_types(free)
        X0 = tuple(tuple(a[0] for a in jt(slice(0, 1), (t,), model.k)) for t in ts)
        roots = _Roots(ts, lane(model.jtype)[0], X0)
        v0 = roots.select(lambda t, E0, r0, S0: mv(S0, qdb[0][:J.NV[t]]) if J.NV[t] else jnp.zeros((6,) + bs, dt))
        pA0 = sp.cross_force(v0, mv(I6[0], v0)) - fx[0]
    else:
        v0 = jnp.zeros((6,) + bs, dt)
    _, (c, pA) = forward_sweep(kept_step(velocity_step, one), tree, v0,
                               (idx, E1, r1, S1, qdb[1], I6[o:], fx[o:]), sweep_reader(one))
    IA0 = jnp.broadcast_to(I6[o:], (nb - o, 6, 6) + bs)
    (accIA, accp), (U, Dinv, u) = backward_sweep(_pass2(one), tree, (IA0, pA),
                                                 (idx, E1, r1, S1, padarm[o:, :k], c, taub[1]), sweep_reader(one))
    a0b = jnp.broadcast_to(a0.reshape((6,) + (1,) * len(bs)) if a0.ndim == 1 else a0, (6,) + bs)
    if free:   # body 0: its pass 2 and 3 steps, the world as parent
        def root_steps(t, E0, r0, S0):
            n, zero = J.NV[t], jnp.zeros_like(v0)
            if not n:
                return sp.apply_motion(sp.Transform(E0, r0), a0b), jnp.zeros((model.k,) + bs, dt)
            _, (U0, _, Dinv0, UDinv0, Ia0) = inertia_step(I6[0] + accIA[-1], (E0, r0, S0, padarm[0][:n]))
            _, u0 = bias_step(pA0 + accp[-1], (E0, r0, S0, UDinv0, Ia0, zero, taub[0][:n]))
            a, qdd = acceleration_step(a0b, (E0, r0, S0, U0, Dinv0, u0, zero))
            return a, jnp.concatenate([qdd, jnp.zeros((model.k - n,) + bs, dt)])
        a0b, qdd0 = roots.select(root_steps)
    if ci is not None:   # XLA would fuse the root's step into the sweep buffer's broadcast, once per body
        a0b = materialize(a0b, ci)
    _, qddb = forward_sweep(kept_step(acceleration_step, one), tree, a0b, (idx, E1, r1, S1, U, Dinv, u, c),
                            sweep_reader(one))

    q0 = qdd0 if free else jnp.zeros((6,) + bs, dt)
    body, slot = dof_owner(model) if not lanes else (None, None)
    if body is not None:      # one model: each dof read from [q0, qddb], batch-last (static or traced indices)
        xp, take = (np, take_static) if isinstance(body, np.ndarray) else (jnp, partial(jnp.take, axis=0))
        at = xp.where(body < o, slot, (o * model.k if free else 0) + (body - o) * k + slot)
        at = xp.where((body < nb) & ((body < o) | (slot < k)), at, o * model.k + (nb - o) * k)
        flat = jnp.concatenate(([q0[:model.k]] if free else []) + [qddb.reshape((-1,) + bs), jnp.zeros((1,) + bs, dt)])
        out = take(flat, at)
        vp = model.v_pad.astype(dt)
        return out + vp * tau if one else out.T + vp[None] * tau
    if model.lane_dofs is None:                       # lanes: a model per state, each scattering its slots
        def scatter(m, qb, q0, t):                    # one lane: (nv,)
            vals = jnp.pad(qb, ((o, 0), (0, model.k - k)))
            return scatter_dofs(m, vals.at[0].set(q0) if free else vals, m.v_pad.astype(dt) * t)
        first = lambda a: jnp.moveaxis(a, -1, 0)
        out, bad = jax.vmap(scatter)(model, first(qddb), first(q0), tau), None
    else:
        out, bad = _from_lane_dofs(model, lane, q0, qddb, tau, free, k)
    off = lanes_off_candidates(tree)
    bad = off if bad is None else (bad if off is None else bad | off)
    return out if bad is None else jnp.where(bad[:, None], jnp.nan, out)


def _from_lane_dofs(model: Model, lane, q0, qddb, tau, free, k):
    """qdd (C, nv) of a chunk of C models from the ABA's per-slot results, q0 (model.k, C) of
    a root outside the sweeps (``free``) and qddb (nb - o, k, C) of the scanned bodies: each
    dof added up from the joint slots that hold it in some member of the stack
    (``Model.lane_dofs``; static selects), where the lane's vidx names it, plus
    ``v_pad * tau``.
    ``lane`` moves a model leaf's lane axis last.  A scatter-add per lane instead is a serial
    loop on XLA:CPU: this saved 0.3-0.4 µs per state of the four-robot benchmark stack
    (alternating processes).  Also returns (C,) True for a lane whose vidx has a dof outside
    those slots (a stack edited by hand): its result is not this sum."""
    vid, o = lane(model.vidx), int(bool(free))                       # (nb, K, C)
    C = tau.shape[0]
    matched, cols = jnp.zeros(C, jnp.int32), []
    for j, slots in enumerate(model.lane_dofs):
        col = jnp.zeros(C, tau.dtype)
        for b, s in slots:
            if not (o and b == 0) and not (b >= o and s < k):   # not a slot of the plan: never hit
                continue
            hit = vid[b, s] == j
            col = col + jnp.where(hit, q0[s] if o and b == 0 else qddb[b - o, s], 0.0)
            matched = matched + hit.astype(jnp.int32)
        cols.append(col)
    real = jnp.sum(vid < model.nv, axis=(0, 1), dtype=jnp.int32)
    out = jnp.stack(cols, -1) if cols else jnp.zeros((C, 0), tau.dtype)
    return out + lane(model.v_pad).T.astype(tau.dtype) * tau, matched != real
