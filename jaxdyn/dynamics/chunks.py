"""How a batch runs on XLA:CPU, whatever its kernel: chunks of states (or models) one after
the other (``lax.map``, memory bounded by a chunk), split over the host devices
(``shard_map``; one XLA:CPU program runs on one core, so two cores need two host devices),
and compiled with :data:`jaxdyn.compiled.CPU_OPTIONS` when called at top level
(:func:`jaxdyn.compiled.cpu_jit`).  Every batch entry point
(:func:`jaxdyn.aba_batch`, :func:`jaxdyn.derivatives_batch`, the ``vmap`` rules of ``aba``,
``rnea`` and ``crba``) runs through :func:`map_chunks`."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..compiled import on_cpu, traced
from ..errors import ArgumentError
from ..tree import inside_shard_map

MULTI_DEVICE_MIN_WORK = 20000
"""B * nb from which :func:`jaxdyn.aba_batch` and :func:`jaxdyn.derivatives_batch` split the batch over all CPU devices by default: below it
the fixed cost of a multi-device call (placing the inputs on both devices) outweighs the
second core (crossovers measured with ``benchmarks/bench_core.py``; figures:
``benchmarks/results/design_measurements.md``)."""


ACCELERATOR_CHUNK = {"sweeps": 1 << 16, "matrices": 1 << 12}
"""States per chunk of the batch kernels by default on a GPU (or any backend but the CPU): a
chunk's states run in parallel there and its chunks one after the other, so a chunk should hold
the whole batch up to a memory bound.  "sweeps": kernels whose state per body is vectors and
6x6 blocks (``aba_batch``, ``vmap`` of ``aba`` and ``rnea``, a stack's lanes); "matrices":
kernels with (nv, nv) or (6, nv) arrays per body (``crba``, ``minv``, the derivatives), a
smaller chunk for their larger state (its memory not measured on the GPU).  With the CPU's
chunks (32-128 states) on an H100, f64, ``vmap(aba)`` ran 2.6-9.1 µs per state at
B = 65536 and ``derivatives_batch`` 3.4-13 at B = 4096 (panda to g1); with one chunk
0.04-0.14 and 0.15-0.63 (``benchmarks/results/gpu.json``)."""


def default_chunk(chunk, cpu_chunk, kind="sweeps"):
    """``chunk`` if given, else a batch kernel's default chunk: ``cpu_chunk`` states when the
    default backend is the CPU (a chunk's arrays stay in the core's L2 cache), else
    :data:`ACCELERATOR_CHUNK` [``kind``].  The backend is JAX's default one, also for a
    computation you place on another device (pass ``chunk`` there)."""
    if chunk is not None:
        return chunk
    return cpu_chunk if on_cpu() else ACCELERATOR_CHUNK[kind]


def map_chunks(fn, xs, chunk, devices=1, init=None):
    """``fn`` over a batch in chunks: ``xs`` a pytree whose leaves have a leading axis B (states,
    or models of a stack), ``fn(i, x)`` maps a chunk's traced index i (int32, for
    :func:`jaxdyn.dynamics.common.materialize`) and the chunk x (leaves (C, ...)) to a pytree of (C, ...) arrays.
    Chunks of C = min(chunk, B / devices) run one after the other (``lax.map``) on each of the
    first ``devices`` devices (``shard_map``).  The batch is filled up to whole chunks on every
    device with copies of its first row (a valid state or model), dropped from the result.
    Returns fn's pytree with leaves (B, ...).

    ``init``: None, or arrays shaped and typed like fn's result for the whole batch (the same
    pytree, leaves (B, ...)) that the chunks are written into (a loop carrying them instead of
    ``lax.map``'s fresh, zero-filled outputs): a caller that donates them gets its results in
    their buffers (:func:`jaxdyn.derivatives_batch`'s ``out``)."""
    leaves = jax.tree_util.tree_leaves(xs)
    B = leaves[0].shape[0]
    C, rows = chunk_rows(B, chunk, devices)
    fill = lambda a: filled(a, rows)
    xs = jax.tree_util.tree_map(fill, xs) if rows > B else xs
    if init is not None and rows > B:
        init = jax.tree_util.tree_map(fill, init)

    def local(xs, init):                            # the rows of one device, chunk by chunk
        n = jax.tree_util.tree_leaves(xs)[0].shape[0] // C
        split = jax.tree_util.tree_map(lambda a: a.reshape((n, C) + a.shape[1:]), xs)
        if init is None:
            out = lax.map(lambda x: fn(*x), (jnp.arange(n, dtype=jnp.int32), split))
        else:
            bufs, tdef = jax.tree_util.tree_flatten(jax.tree_util.tree_map(lambda a: a.reshape((n, C) + a.shape[1:]), init))

            def body(i, bufs):
                x = jax.tree_util.tree_map(lambda a: lax.dynamic_index_in_dim(a, i, keepdims=False), split)
                outs = jax.tree_util.tree_leaves(fn(i, x))
                return [lax.dynamic_update_index_in_dim(b, o.astype(b.dtype), i, 0) for b, o in zip(bufs, outs)]
            out = jax.tree_util.tree_unflatten(tdef, lax.fori_loop(np.int32(0), np.int32(n), body, bufs))
        return jax.tree_util.tree_map(lambda a: a.reshape((n * C,) + a.shape[2:]), out)

    if devices > 1:
        local = jax.shard_map(local, mesh=batch_mesh(devices), in_specs=P("b"), out_specs=P("b"), check_vma=False)
    out = local(xs, init)
    return out if rows == B else jax.tree_util.tree_map(lambda a: a[:B], out)


def chunk_rows(B, chunk, devices=1):
    """(C, rows) of :func:`map_chunks` for a batch of B: the chunk size, and the rows once the
    batch is filled up to whole chunks on every device."""
    C = min(chunk, -(-B // devices))
    return C, -(-B // (C * devices)) * C * devices


def filled(a, rows):
    """``a`` (B, ...) filled up to ``rows`` rows with copies of its first row, as
    :func:`map_chunks` fills a batch."""
    B = a.shape[0]
    return a if rows == B else jnp.concatenate([a, jnp.broadcast_to(a[:1], (rows - B,) + a.shape[1:])])


def batch_mesh(devices):
    """The mesh of a multi-device batch: the first ``devices`` devices along one axis "b"."""
    return Mesh(np.array(jax.devices()[:devices]), ("b",))


class ObjectCache:
    """Values derived from an object (a model), kept for the last ``size`` objects by identity
    with strong references (so an id is not reused while it is cached).  For per-call work
    of the batch entry points that depends only on the model: a user calls them many times
    with one model.  A traced object is never cached (no tracer outlives its trace)."""

    def __init__(self, size=8):
        self.size, self._items = size, {}

    def get(self, obj, extra, make):
        """``make()`` for (obj, extra), computed once while obj stays among the last ``size``
        (every time for a traced obj)."""
        if traced(obj):
            return make()
        key = (id(obj), extra)
        hit = self._items.pop(key, None)
        if hit is None or hit[0] is not obj:
            hit = (obj, make())
        self._items[key] = hit                              # most recent last
        while len(self._items) > self.size:
            self._items.pop(next(iter(self._items)))
        return hit[1]


_REPLICATED = ObjectCache(8)


def replicated(tree, devices):
    """``tree`` (a model) replicated on the first ``devices`` devices, as the multi-device batch
    program reads it, cached per object (:class:`ObjectCache`): a model committed to one
    device is otherwise copied leaf by leaf on every multi-device call (a large part of a
    4096-state ``aba_batch`` on two devices: ``benchmarks/results/design_measurements.md``).
    One device, or traced leaves (inside a caller's jit): ``tree`` unchanged."""
    if devices == 1 or traced(tree):
        return tree
    return _REPLICATED.get(tree, devices, lambda: jax.device_put(tree, NamedSharding(batch_mesh(devices), P())))


def split_rows(xs, chunk, devices):
    """The batch ``xs`` (a pytree of (B, ...) arrays or None) split along B over the first
    ``devices`` devices, as the multi-device program of :func:`map_chunks` reads it, when B
    fills whole chunks on every device (no padding) and the call is at top level; anything
    else is returned unchanged (the program's own placement).  Each leaf is copied once into
    its devices' rows from a host view (``jax.make_array_from_callback``), which costs less
    than ``jax.device_put`` to the split sharding or the jitted call's own resharding of
    arrays on one device (measured side by side: ``benchmarks/results/two_devices.json``)."""
    leaves = jax.tree_util.tree_leaves(xs)
    if devices == 1 or not leaves or traced(xs) or jax.default_backend() != "cpu":
        return xs
    B = leaves[0].shape[0]
    C = min(chunk, -(-B // devices))
    if B % (C * devices):
        return xs
    sharding = NamedSharding(batch_mesh(devices), P("b"))

    def put(a):
        if isinstance(a, jax.Array) and a.sharding.is_equivalent_to(sharding, a.ndim):
            return a                                                   # already split
        host = np.asarray(a)
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree_util.tree_map(put, xs)


def device_count(devices, work, caller):
    """How many devices a batch of ``work`` = B * nb runs on: ``devices`` if given (checked
    against the devices there are), else all of them on the CPU backend when
    ``work`` >= :data:`MULTI_DEVICE_MIN_WORK` and the call is not already inside a caller's
    ``shard_map`` (which has placed the batch), else 1."""
    if devices is None:
        big = jax.default_backend() == "cpu" and work >= MULTI_DEVICE_MIN_WORK
        return jax.device_count() if big and not inside_shard_map() else 1
    if isinstance(devices, bool) or not isinstance(devices, (int, np.integer)) or not 1 <= devices <= jax.device_count():
        raise ArgumentError(f"{caller}: devices={devices!r} but {jax.device_count()} device(s) are available")
    return int(devices)
