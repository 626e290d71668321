"""The ``custom_vmap`` rule of jaxdyn's batchable entry points (:mod:`jaxdyn.batching`): the
batch-last layout, chunks, fusion barriers and per-member stacks.  It runs an algorithm's
core (``core(*args, keep=...)``, written once for one state and for a batch-last chunk);
it imports no algorithm.

Every core algorithm (:func:`jaxdyn.dynamics.aba.aba_passes`, ``rnea_passes``,
``crba_passes``, ...) is written once, component-first (:mod:`jaxdyn.spatial.linalg`): it
computes one state when its arrays have no trailing axes and a whole chunk of states when
every array carries one trailing batch axis.  ``jax.vmap`` of a plain function would put the
batch *first* and turn every 6 x 6 product into a batched ``dot``; the entry points carry a
``custom_vmap`` rule (:func:`batchable`) that runs the same code batch-last instead,
with C states on the minor axis, so that each product is a vectorized loop over C
(the gain on a CPU: ``docs/batching.md``).

On the CPU the rule splits the batch into n chunks of C states (chunk i holds the states
c n + i, c = 0..C-1), run one after the other by a ``lax.fori_loop`` so that a chunk's arrays
stay in cache: each chunk gathers its lanes and moves them batch-last itself, and writes its
results batch-first into the output (a layout change of the whole batch outside the loop
would stream every array through memory twice).  The rule passes the algorithm a fusion
barrier ``keep``: XLA:CPU fuses a product into every consumer and recomputes it there;
``keep(x)``, a ``lax.cond`` on the chunk counter that XLA cannot fold, makes each named
quantity of a step (U, D^-1, ...) be computed once (the steps keep what many products read;
a product of a few multiplies is cheaper recomputed than kept).  On other backends the batch
is one chunk and ``keep`` is the identity (a GPU runs the lanes in parallel).  The choice is ``lax.platform_dependent``,
made where the program is lowered.  Arguments may be sharded along the batch axis
(``jax.sharding.NamedSharding``): a chunk takes every n-th state, so the shards stay on their
devices.  Over the lanes of a :class:`jaxdyn.Stack` built with ``per_member=True`` the rule
runs the lanes of each member on the member's own tree (:func:`run_members`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .errors import ArgumentError
from .model.model import PARAM_FIELDS
from .stack import Stack
from .tree import same

tmap = jax.tree_util.tree_map


def barrier(i):
    """The fusion barrier of chunk ``i`` (a traced counter): x as a ``lax.cond`` result."""
    def keep(x):
        if callable(x):          # computed inside the branch: the cond's result is written once
            shapes = jax.eval_shape(x)
            return lax.cond(i >= 0, x, lambda: tmap(lambda s: jnp.zeros(s.shape, s.dtype), shapes))
        return lax.cond(i >= 0, lambda x: x, lambda x: tmap(jnp.zeros_like, x), x)
    return keep


def run_batch(core, B, in_batched, args, chunk):
    """``core(*args, keep=...)`` for a batch of B: the leaves of ``args`` flagged in
    ``in_batched`` have a leading batch axis B, the others are shared.  In a chunk of C lanes
    every batched leaf has a trailing axis C; a shared leaf of the model (``args[0]``) gets a
    trailing axis 1, and the other shared arguments are broadcast to C (so that quantities
    computed from different states have one shape).  Returns core's output pytree with a
    leading axis B on every leaf."""
    leaves, tdef = jax.tree_util.tree_flatten(args)
    flags = jax.tree_util.tree_leaves(in_batched)
    n_model = len(jax.tree_util.tree_leaves(args[0]))

    def call(lanes, C, keep):
        """core on batch-last ``lanes`` (the batched leaves, (..., C)) and the shared leaves."""
        it = iter(lanes)
        a = [next(it) if f else (x[..., None] if k < n_model else jnp.broadcast_to(x[..., None], x.shape + (C,)))
             for k, (x, f) in enumerate(zip(leaves, flags))]
        out = core(*jax.tree_util.tree_unflatten(tdef, a), keep=keep)
        return tmap(lambda y: jnp.broadcast_to(y, y.shape[:-1] + (C,)), out)

    def cpu(*xs):
        C = min(chunk, B)
        n = -(-B // C)
        rows = n * C

        def grid(x):                                # (B, ...) -> (C, n, ...): chunk i is [:, i], lanes c n + i
            if rows > B:
                x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (rows - B,) + x.shape[1:])])
            return x.reshape((C, n) + x.shape[1:])
        batched = [grid(x) for x, f in zip(xs, flags) if f]

        @jax.jit            # traced once: for its output shapes, then reused inside the loop
        def chunk_out(i, batched):
            """Chunk i's outputs, batch-first (C, ...): the layout changes happen per chunk, in cache."""
            lanes = [jnp.moveaxis(lax.dynamic_index_in_dim(x, i, 1, keepdims=False), 0, -1) for x in batched]
            return tmap(lambda y: jnp.moveaxis(y, -1, 0), call(lanes, C, barrier(i)))

        def body(i, acc):
            return tmap(lambda a, y: lax.dynamic_update_index_in_dim(a, y, i, 1), acc, chunk_out(i, batched))
        shapes = jax.eval_shape(chunk_out, 0, batched)       # the loop's index type: a weak int
        acc = tmap(lambda s: jnp.zeros((C, n) + s.shape[1:], s.dtype), shapes)
        out = lax.fori_loop(0, n, body, acc)
        return tmap(lambda y: y.reshape((rows,) + y.shape[2:])[:B], out)

    def whole(*xs):
        out = call([jnp.moveaxis(x, 0, -1) for x, f in zip(xs, flags) if f], B, same)
        return tmap(lambda y: jnp.moveaxis(y, -1, 0), out)

    if B <= chunk:                  # one chunk: nothing to loop over, and no barrier to keep
        return whole(*leaves)
    return lax.platform_dependent(*leaves, cpu=cpu, default=whole)


def run_members(core, layout, B, in_batched, args, chunk):
    """:func:`run_batch` over the B lanes of a per-member :class:`jaxdyn.Stack` (``args[0]``,
    every leaf batched): the lanes of each member run ``core`` on the member's own tree, in
    the member's layout, and their results are written into the union's layout.
    ``layout = (kinds, rest)``: the kind of each argument after the model ("q", "v", "b" for
    (nb, ...) body rows, None for data that is not per dof or body), and ``rest(stack,
    *args)``, the union-layout result on the lanes' inactive dofs (each output (B, nv) or
    (B, nv, nv)).  A lane with mass or a force on a body outside its member gives NaN."""
    st, (kinds, rest) = args[0], layout
    if len(st.lane_members) != B:
        raise ArgumentError(f"{st.name}: vmapped over {B} lanes, but lane_members names {len(st.lane_members)}; "
                            "build the lanes with Stack.lanes")
    lane_of = np.asarray(st.lane_members)
    out, bad = rest(st, *args[1:]), jnp.zeros(B, bool)
    for j in np.unique(lane_of):
        idx, u = np.flatnonzero(lane_of == j), np.asarray(st.body_maps[j])
        dofs = {k: st.member_dofs(j, k) for k in ("q", "v")}
        outside = np.setdiff1d(np.arange(st.nb), u)
        model = st.member_model(j, {k: getattr(st, k)[idx] for k in PARAM_FIELDS})
        xs = [x[idx] if f else x for x, f in zip(args[1:], in_batched[1:])]
        moved = jnp.any(st.mass[idx][:, outside] != 0, 1)
        for x, k in zip(xs, kinds):
            if k == "b" and x is not None:
                moved = moved | jnp.any(jnp.broadcast_to(x[..., outside, :], (len(idx), len(outside), 6)) != 0, (1, 2))
        bad = bad.at[idx].set(moved)
        if model.nv == 0:               # a member without joints: every dof of its lanes is inactive
            continue
        mine = [x[..., dofs[k]] if k in ("q", "v") and x is not None else
                x[..., u, :] if k == "b" and x is not None else x for x, k in zip(xs, kinds)]
        res = run_batch(core, len(idx), (tmap(lambda _: True, model), *in_batched[1:]), (model, *mine), chunk)
        v = dofs["v"]
        out = tmap(lambda y, r: y.at[(idx[:, None], v) if y.ndim == 2 else (idx[:, None, None], v[:, None], v)].set(r),
                   out, res)
    return tmap(lambda y: jnp.where(bad.reshape((B,) + (1,) * (y.ndim - 1)), jnp.nan, y), out)


def batchable(core, chunk, layout):
    """``core`` (``core(*args, keep=same)``) as a function of one state whose ``jax.vmap``
    runs :func:`run_batch` in chunks of ``chunk`` states on the CPU, or :func:`run_members`
    (with ``layout``) over the lanes of a per-member :class:`jaxdyn.Stack`.  One state runs
    as a batch of one lane (every argument with a trailing axis 1): the products are then the
    elementwise ones that XLA fuses into a few kernels per body, not a ``dot`` each."""
    @jax.custom_batching.custom_vmap
    def f(*args):
        out = core(*tmap(lambda x: x[..., None], args))
        return tmap(lambda y: y[..., 0], out)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        if isinstance(args[0], Stack) and args[0].per_member and all(jax.tree_util.tree_leaves(in_batched[0])):
            out = run_members(core, layout, axis_size, in_batched, args, chunk)
        else:
            out = run_batch(core, axis_size, in_batched, args, chunk)
        return out, tmap(lambda _: True, out)
    return f
