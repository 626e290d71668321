"""Robots of different structure as one batch: :func:`stack` builds a :class:`Stack`, a Model
on the union of the members' trees with one parameter lane per robot, that every jaxdyn
function runs over under ``jax.vmap`` as over any Model with per-lane parameters."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .errors import ArgumentError, ShapeError
from .model import joints as J
from .model.model import PARAM_FIELDS, Model, Topology


@dataclasses.dataclass(frozen=True)
class Stack(Model):
    """Robots of different structure as one batch: a :class:`jaxdyn.Model` on the *union* of
    the members' trees (:func:`stack`) whose parameters have a leading lane axis, one lane per
    robot.  ``jax.vmap(f)(stack, Q, ...)`` runs any jaxdyn function over the lanes as over
    a model with a parameter per lane (one program, compiled once).

    A lane's bodies that its member does not have are massless, on joints of unit armature
    and zero damping, so they change nothing: with zero velocity and torque on their dofs
    they keep zero acceleration.  States and results are in the union's layout: convert with
    :meth:`q` and :meth:`v` (member -> union, inactive dofs neutral / zero) and
    :meth:`member_q`, :meth:`member_v` (union -> member).

    ``per_member`` (:func:`stack`) chooses how the batched core algorithms (``aba``,
    ``rnea``, ``crba``, ``minv``, ``forward_dynamics(method="aba")`` and the derivatives, also
    inside rollouts) run under ``jax.vmap`` over the lanes: False, every lane runs the union
    tree (one compiled kernel; a lane costs the union's bodies); True, the lanes of each member
    run the member's own tree (a kernel per member; a lane costs its own robot's bodies), with
    ``lane_members`` naming each lane's member.  Both give the same numbers: on a lane's
    inactive dofs ``aba`` returns tau / armature, ``rnea`` armature * qdd, ``crba`` and ``minv``
    diag(armature)^(+-1) and the derivatives zero (``M`` and ``Minv`` as crba and minv).  A
    per-member lane that has mass or an external force on a body outside its member (lanes
    reordered by hand, not by :meth:`lanes`) gives NaN."""
    members: tuple = ()
    member_names: tuple = ()
    body_maps: tuple = ()
    lane_members: tuple = ()
    per_member: bool = False

    def _dofs(self, j, kind, x=None):
        if not 0 <= j < len(self.members):
            raise ArgumentError(f"{self.name}: member {j} is not in this stack (members 0..{len(self.members) - 1})")
        n = self.members[j].nq if kind == "q" else self.members[j].nv
        if x is not None and (jnp.ndim(x) == 0 or jnp.shape(x)[-1] != n):
            raise ShapeError(f"{self.name}: member {j} ({self.member_names[j]!r}) needs {kind} of shape (..., {n}), "
                             f"got {jnp.shape(x)}")
        return _member_dofs(self.topology, self.members[j], self.body_maps[j], kind)

    def q(self, j, q):
        """Member j's configuration(s) q (..., nq_j) in the union's layout (..., nq); the
        joints j does not have at their neutral configuration."""
        src, dst = self._dofs(j, "q", q)
        base = np.asarray(_neutral_q(self.topology))
        q = jnp.asarray(q)
        out = jnp.broadcast_to(jnp.asarray(base, q.dtype), q.shape[:-1] + base.shape)
        return out.at[..., dst].set(q[..., src])

    def v(self, j, v):
        """Member j's velocities, accelerations or torques (..., nv_j) in the union's layout
        (..., nv), zero on the dofs j does not have."""
        src, dst = self._dofs(j, "v", v)
        v = jnp.asarray(v)
        return jnp.zeros(v.shape[:-1] + (self.nv,), v.dtype).at[..., dst].set(v[..., src])

    def member_dofs(self, j, kind="v"):
        """The union's index of each of member j's v (``kind`` "v") or q ("q") coordinates,
        in the member's order (numpy, (nv_j,) or (nq_j,))."""
        src, dst = self._dofs(j, kind)
        return dst[np.argsort(src)]

    def member_q(self, j, q):
        """A union-layout configuration (..., nq) as member j's (..., nq_j)."""
        return jnp.asarray(q)[..., self.member_dofs(j, "q")]

    def member_v(self, j, x):
        """A union-layout velocity / acceleration / torque (..., nv) as member j's (..., nv_j);
        for a matrix (..., nv, nv) apply it to both axes: ``member_v(j, member_v(j, M).mT)``."""
        return jnp.asarray(x)[..., self.member_dofs(j, "v")]

    def lane_model(self, i) -> Model:
        """Lane ``i`` as a :class:`jaxdyn.Model` in its member's layout and names, with the
        lane's own parameters (e.g. randomized masses): the member robot as this lane has it."""
        if not 0 <= i < len(self.lane_members):
            raise ArgumentError(f"{self.name}: lane {i} is not in this stack (lanes 0..{len(self.lane_members) - 1})")
        m = self.member_model(self.lane_members[i], {k: np.asarray(getattr(self, k))[i] for k in PARAM_FIELDS})
        return jax.tree_util.tree_map(jnp.asarray, m)

    def member_model(self, j, params) -> Model:
        """Member j's :class:`jaxdyn.Model` (its topology and names) from parameters in the
        union's layout: ``params`` maps each name of ``PARAM_FIELDS`` to an array of the
        union's shape, with or without a leading lane axis (kept)."""
        top, u = self.members[j], np.asarray(self.body_maps[j], int)
        lead = (slice(None),) * (np.ndim(params["mass"]) - 1)
        out = {k: params[k][lead + (u,)] for k in ("Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia")}
        for kind, keys in (("v", ("armature", "damping", "friction", "effort_limit", "velocity_limit")),
                           ("q", ("q_lower", "q_upper"))):
            out.update({k: params[k][lead + (self.member_dofs(j, kind),)] for k in keys})
        f0 = sum(len(t.frame_names) for t in self.members[:j])
        frames = slice(f0, f0 + len(top.frame_names))
        out.update(frame_E=params["frame_E"][lead + (frames,)], frame_r=params["frame_r"][lead + (frames,)],
                   gravity=params["gravity"])
        return Model(**out, topology=top, name=self.member_names[j])

    def lanes(self, members) -> "Stack":
        """The stack with one lane per entry of ``members`` (member indices, e.g.
        ``np.repeat(np.arange(4), 1024)`` for 1024 lanes of each of 4 robots): each lane holds
        the parameters of the member's first lane in this stack."""
        members = np.asarray(members, int).reshape(-1)
        first = {m: self.lane_members.index(m) for m in set(self.lane_members)}
        bad = [m for m in members if m not in first]
        if bad:
            raise ArgumentError(f"stack.lanes: member {bad[0]} is not in this stack (members 0..{len(self.members) - 1})")
        idx = np.asarray([first[m] for m in members])
        out = jax.tree_util.tree_map(lambda a: a[idx], self)
        return dataclasses.replace(out, lane_members=tuple(int(m) for m in members))


jax.tree_util.register_dataclass(Stack, data_fields=list(PARAM_FIELDS),
                                 meta_fields=["topology", "name", "members", "member_names", "body_maps",
                                              "lane_members", "per_member"])


def _member_dofs(union, own, body_map, kind):
    """(member indices, union indices) of a member's q (``kind`` "q") or v coordinates."""
    addr = union.qaddr if kind == "q" else union.vaddr
    own_addr = own.qaddr if kind == "q" else own.vaddr
    src, dst = [], []
    for i, u in enumerate(body_map):
        n = int(own_addr[i + 1] - own_addr[i])
        src += range(int(own_addr[i]), int(own_addr[i]) + n)
        dst += range(int(addr[u]), int(addr[u]) + n)
    return np.asarray(src, int), np.asarray(dst, int)


def _neutral_q(topology):
    q = []
    for t in topology.jtype:
        z = [0.0] * J.NQ[t]
        if t in (J.SPHERICAL,):
            z[3] = 1.0
        elif t == J.FREE:
            z[6] = 1.0
        elif t in (J.REVOLUTE_UB,):
            z[0] = 1.0
        elif t == J.PLANAR:
            z[2] = 1.0
        q += z
    return np.asarray(q)


def _union(tops):
    """The union of the trees ``tops`` (Topology): bodies of different members share a union
    body when they sit at matching places (same joint type, matched parents), larger subtrees
    matched first.  Returns (union parent list, joint types, per member the union body of each
    of its bodies)."""
    def size(node):
        return 1 + sum(size(c) for c in node[2])

    def merge(A, B):
        """A's nodes (in order, merged with their matches) and B's unmatched nodes after them."""
        out, used, matched = list(A), [False] * len(A), set()
        for k in sorted(range(len(B)), key=lambda k: -size(B[k])):
            b = B[k]
            best = max((i for i, a in enumerate(A) if not used[i] and a[0] == b[0]), key=lambda i: size(A[i]),
                       default=None)
            if best is not None:
                used[best] = True
                matched.add(k)
                out[best] = (A[best][0], A[best][1] + b[1], merge(A[best][2], b[2]))
        return out + [b for k, b in enumerate(B) if k not in matched]

    roots = []
    for j, t in enumerate(tops):
        kids = {i: [] for i in range(-1, t.nb)}
        for i, p in enumerate(t.parent):
            kids[p].append(i)

        def build(i, j=j, t=t, kids=kids):
            return (t.jtype[i], [(j, i)], [build(c) for c in kids[i]])
        roots = merge(roots, [build(r) for r in kids[-1]])
    parent, jtype, maps = [], [], [dict() for _ in tops]
    stack = [(r, -1) for r in reversed(roots)]
    while stack:                                   # depth-first preorder: parents before children
        (t, owners, children), p = stack.pop()
        u = len(parent)
        parent.append(p), jtype.append(t)
        for j, i in owners:
            maps[j][i] = u
        stack += [(c, u) for c in reversed(children)]
    return parent, jtype, [tuple(m[i] for i in range(len(m))) for m in maps]


def stack(models, per_member=False) -> Stack:
    """Robots of different structure as one batch (:class:`Stack`): one lane per model, on the
    union of their trees.  ``jax.vmap(jaxdyn.aba)(st, Q, V, T)`` with Q = ``jnp.stack([st.q(j,
    q_j) ...])`` (the union's layout).  A batch of many lanes of a few robots:
    ``st.lanes(np.repeat(np.arange(len(models)), 1024))``; per-lane parameters (e.g. masses
    for domain randomization) by ``st.replace(mass=...)``.  Every lane costs the union's
    bodies; with ``per_member=True`` the core algorithms run each member's lanes on the
    member's own tree, so that a lane costs only its own robot's bodies (:class:`Stack`)."""
    models = list(models)
    if not models:
        raise ArgumentError("stack needs at least one model")
    for m in models:
        if isinstance(m, Stack) or not isinstance(m, Model) or jnp.ndim(m.mass) != 1:
            raise ArgumentError("stack takes single (unbatched) jaxdyn Models")
    tops = [m.topology for m in models]
    parent, jtype, maps = _union(tops)
    nb = len(parent)
    nf = sum(len(t.frame_names) for t in tops)
    fnames = tuple(f"{j}/{n}" for j, t in enumerate(tops) for n in t.frame_names)
    fbody = tuple(-1 if b < 0 else maps[j][b] for j, t in enumerate(tops) for b in t.frame_body)
    topo = Topology(tuple(parent), tuple(jtype), tuple(f"body{i}" for i in range(nb)),
                    tuple(f"joint{i}" for i in range(nb)), fnames, fbody)
    nq, nv = topo.nq, topo.nv
    lanes = []
    f0 = 0
    for j, (m, t) in enumerate(zip(models, tops)):
        p = {k: np.asarray(getattr(m, k)) for k in PARAM_FIELDS}
        u = np.asarray(maps[j], int)
        L = dict(Xtree_E=np.tile(np.eye(3), (nb, 1, 1)), Xtree_r=np.zeros((nb, 3)), axis=np.tile([0, 0, 1.0], (nb, 1)),
                 pitch=np.zeros(nb), mass=np.zeros(nb), com=np.zeros((nb, 3)), inertia=np.zeros((nb, 3, 3)),
                 armature=np.ones(nv), damping=np.zeros(nv), friction=np.zeros(nv), q_lower=np.full(nq, -np.inf), q_upper=np.full(nq, np.inf),
                 effort_limit=np.full(nv, np.inf), velocity_limit=np.full(nv, np.inf),
                 frame_E=np.tile(np.eye(3), (nf, 1, 1)), frame_r=np.zeros((nf, 3)), gravity=p["gravity"])
        for k in ("Xtree_E", "Xtree_r", "axis", "pitch", "mass", "com", "inertia"):
            L[k][u] = p[k]
        sv, dv = _member_dofs(topo, t, maps[j], "v")
        sq, dq = _member_dofs(topo, t, maps[j], "q")
        for k in ("armature", "damping", "friction", "effort_limit", "velocity_limit"):
            L[k][dv] = p[k][sv]
        L["q_lower"][dq], L["q_upper"][dq] = p["q_lower"][sq], p["q_upper"][sq]
        n = len(t.frame_names)
        L["frame_E"][f0:f0 + n], L["frame_r"][f0:f0 + n] = p["frame_E"], p["frame_r"]
        f0 += n
        lanes.append(L)
    leaves = {k: jax.device_put(np.stack([L[k] for L in lanes]).astype(np.result_type(*[lanes[0][k]])))
              for k in PARAM_FIELDS}
    return Stack(**leaves, topology=topo, name="stack[" + ",".join(m.name for m in models) + "]", members=tuple(tops),
                 member_names=tuple(m.name for m in models), body_maps=tuple(maps),
                 lane_members=tuple(range(len(models))), per_member=bool(per_member))
