"""The static part of a model (:class:`Topology`): parents, joint types, names and frame bodies,
and what follows from them once per object (q/v addresses, :class:`Run` s of bodies with one
joint type for the tree sweeps of :mod:`jaxdyn.tree`, :class:`JointGroup` s for the joint
transforms, the ancestor matrix).  Hashable: a ``jax.jit`` cache key.  Bodies are numbered in
topological order (``parent[i] < i``, -1 the world)."""
from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import NamedTuple

import numpy as np

from . import joints as J

TOPOLOGY_FIELDS = ("parent", "jtype", "body_names", "joint_names", "frame_names", "frame_body")
"""The fields of a :class:`Topology`."""


class Run(NamedTuple):
    """Consecutive bodies ``start..stop-1`` whose joints have ``nv`` dofs each: their v are the
    contiguous slice ``v[v0:v0 + n nv]``.  ``parent`` (n,) holds each body's parent with the
    world as ``nb`` (a sweep's sink slot)."""
    nv: int
    start: int
    stop: int
    v0: int
    parent: tuple

    @property
    def n(self) -> int:
        return self.stop - self.start


class JointGroup(NamedTuple):
    """The bodies of one joint type ``jtype`` (static, in body order) and, per body, the q
    indices of its joint coordinates (``qidx`` (n, NQ[jtype]))."""
    jtype: int
    bodies: tuple
    qidx: tuple


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """The static part of a model: parents, joint types, names and frame bodies (tuples).
    Hashable (a jit cache key); everything derived from it is computed once per object."""
    parent: tuple
    jtype: tuple
    body_names: tuple
    joint_names: tuple
    frame_names: tuple
    frame_body: tuple

    def _key(self):
        return (self.parent, self.jtype, self.body_names, self.joint_names, self.frame_names, self.frame_body)

    @cached_property
    def _hash(self):
        return hash(self._key())

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, Topology) and self._hash == other._hash
                                 and self._key() == other._key())

    @property
    def nb(self) -> int:
        return len(self.parent)

    @cached_property
    def qaddr(self) -> np.ndarray:
        """(nb + 1,) first q index of each body's joint; the last entry is nq."""
        return np.concatenate([[0], np.cumsum([J.NQ[t] for t in self.jtype])]).astype(np.int32)

    @cached_property
    def vaddr(self) -> np.ndarray:
        """(nb + 1,) first v index of each body's joint; the last entry is nv."""
        return np.concatenate([[0], np.cumsum([J.NV[t] for t in self.jtype])]).astype(np.int32)

    @property
    def nq(self) -> int:
        return int(self.qaddr[-1])

    @property
    def nv(self) -> int:
        return int(self.vaddr[-1])

    @cached_property
    def runs(self) -> tuple:
        """Maximal :class:`Run` s of consecutive bodies whose joints have one dof count (one or
        two for most robots: a floating base, then 1-dof joints of any type)."""
        nv = [J.NV[t] for t in self.jtype]
        out, start = [], 0
        for i in range(1, self.nb + 1):
            if i == self.nb or nv[i] != nv[start]:
                par = tuple(self.nb if p < 0 else p for p in self.parent[start:i])
                out.append(Run(nv[start], start, i, int(self.vaddr[start]), par))
                start = i
        return tuple(out)

    @cached_property
    def joint_groups(self) -> tuple:
        """One :class:`JointGroup` per joint type present, in type order."""
        out = []
        for t in sorted(set(self.jtype)):
            b = [i for i, ti in enumerate(self.jtype) if ti == t]
            out.append(JointGroup(t, tuple(b), tuple(tuple(range(int(self.qaddr[i]), int(self.qaddr[i + 1])))
                                                    for i in b)))
        return tuple(out)

    @cached_property
    def group_position(self) -> np.ndarray:
        """(nb,) the position of each body in the concatenation of the bodies of the joint
        groups with its dof count (in group order)."""
        pos, count = np.zeros(self.nb, int), {}
        for g in self.joint_groups:
            k = J.NV[g.jtype]
            for b in g.bodies:
                pos[b] = count.get(k, 0)
                count[k] = count.get(k, 0) + 1
        return pos

    @cached_property
    def ancestors(self) -> np.ndarray:
        """(nb, nb) 0/1: row i marks body i and its ancestors."""
        A = np.zeros((self.nb, self.nb))
        for i, p in enumerate(self.parent):
            if p >= 0:
                A[i] = A[p]
            A[i, i] = 1.0
        return A

    @cached_property
    def dof_body(self) -> np.ndarray:
        """(nv,) the body that each dof belongs to."""
        return np.repeat(np.arange(self.nb), [J.NV[t] for t in self.jtype]).astype(np.int32)

    @cached_property
    def roots(self) -> np.ndarray:
        """(nb,) the root body (parent -1) of each body's tree."""
        r = np.arange(self.nb)
        for i, p in enumerate(self.parent):
            if p >= 0:
                r[i] = r[p]
        return r
