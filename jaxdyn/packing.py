"""A model's array leaves as one buffer per dtype at a top-level jitted call.

A top-level ``jax.jit`` call pays a fixed cost per array argument (its signature is read and
checked against the cache): a :class:`jaxdyn.Model` has 20 array leaves, and passing them
cost about 5 µs of a one-state call's 30-70 µs on the 2-core CPU of
``benchmarks/results/latency.json`` (a function of 3 arrays: 5.3 µs per call; of 3 arrays
and a model: 10.6).  :func:`cpu_jit <jaxdyn.compiled.cpu_jit>` therefore passes a model
given as the first argument of a top-level call as its :class:`Packed` buffers (its leaves
concatenated per dtype, made once per model object and kept while the model lives) to a
jitted function made for its :class:`Layout`, which slices the leaves back out (static
slices, inside the compiled program).  Only models whose leaves are all uncommitted JAX
arrays are packed: JAX arrays cannot change, so the packed copy stays equal to them; numpy
leaves (which can be written in place), committed or sharded leaves, traced models and
models of more than :data:`MAX_PACKED` numbers (e.g. a stack with a model per lane) are
passed as they are.
"""
from __future__ import annotations

import weakref

import jax
import numpy as np


class Layout:
    """Static part of a :class:`Packed`: the model's tree structure and, per leaf, (buffer,
    offset, shape).  Hashed once, and interned (:func:`packed`): equal layouts are one object,
    so looking one up is an identity test."""
    __slots__ = ("treedef", "slots", "_hash", "__weakref__")

    def __init__(self, treedef, slots):
        self.treedef, self.slots = treedef, slots
        self._hash = hash((treedef, slots))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Layout) and self._hash == other._hash
                                 and self.slots == other.slots and self.treedef == other.treedef)

    def unpack(self, buffers):
        """The original pytree from its ``buffers`` (a tuple of 1-D arrays, one per dtype;
        inside a trace: static slices of the jitted function's arguments)."""
        leaves = [buffers[b][o:o + int(np.prod(s, dtype=np.int64))].reshape(s) for b, o, s in self.slots]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


class Packed:
    """A pytree's array leaves as one 1-D buffer per dtype (``buffers``, a tuple) and a
    :class:`Layout`."""
    __slots__ = ("buffers", "layout")

    def __init__(self, buffers, layout):
        self.buffers, self.layout = buffers, layout

    def unpack(self):
        return self.layout.unpack(self.buffers)


MAX_PACKED = 1 << 16
"""Largest model (array elements, all leaves) that is packed.  Unpacking is a slice of the
buffers inside the program, which XLA may copy: for a stack batched per lane (13 M numbers
for 4096 lanes of the four benchmark robots) that copy cost more than the ~5 µs per call that
packing saves: ``vmap(aba)`` over it ran about 25 % slower (one talos_reduced model: 3207)."""

_CACHE: dict[int, tuple] = {}
_LAYOUTS: dict = {}


def _forget(key):
    _CACHE.pop(key, None)


def packed(tree):
    """``tree`` as a :class:`Packed`, cached per object while it lives (a weak reference), or
    None when it cannot be packed safely (module docstring)."""
    key = id(tree)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is tree:
        return hit[1]
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves or not all(isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
                             and not x.committed for x in leaves):
        return None
    if sum(x.size for x in leaves) > MAX_PACKED:
        return None
    try:
        ref = weakref.ref(tree, lambda _: _forget(key))
    except TypeError:                   # not weakly referenceable: pack per call would cost more
        return None
    dtypes = sorted({np.dtype(x.dtype).str for x in leaves})
    host = [np.asarray(x) for x in leaves]
    parts = {d: [] for d in dtypes}
    sizes = {d: 0 for d in dtypes}
    slots = []
    for x in host:
        d = np.dtype(x.dtype).str
        slots.append((dtypes.index(d), sizes[d], tuple(x.shape)))
        parts[d].append(x.ravel())
        sizes[d] += x.size
    buffers = tuple(jax.numpy.asarray(np.concatenate(parts[d]) if parts[d] else np.zeros(0, d)) for d in dtypes)
    layout = Layout(treedef, tuple(slots))
    out = Packed(buffers, _LAYOUTS.setdefault(layout, layout))
    _CACHE[key] = (ref, out)
    return out
