"""Pad models of different structure to common sizes and stack them into one batched Model.

A padded body is attached to the world by a fixed joint with zero inertia: it contributes
nothing.  A padded dof (index beyond the model's own nv) belongs to no body, has unit
diagonal inertia (armature 1, ``v_pad`` 1) and zero acceleration under zero force.
Padded q entries are never read and stay as given.

``jax.vmap(jaxdyn.aba)`` over a stack runs the batch-last ABA kernel with a model per lane
(:func:`jaxdyn.dynamics.batch_aba.aba_lanes`), with the plan :func:`stack` records, per body the
parents its members give it (``Model.lane_parents``) and per dof the joint slots that hold it
(``Model.lane_dofs``).
"""
from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import joints as J
from ..errors import ShapeError
from .model import Model, lone_root


def pad(model: Model, nb: int, nq: int, nv: int, nqj: int, k: int, nf: int, types=None) -> Model:
    """Pad one model to (nb, nq, nv, nqj, k, nf) bodies / coordinates / frames."""
    m = model
    if nb < m.nb or nq < m.nq or nv < m.nv or nqj < m.nqj or k < m.k or nf < len(m.frame_names):
        raise ValueError("pad sizes must not be smaller than the model's")
    a = lambda x: np.asarray(x)
    db = nb - m.nb

    def padb(x, fill):
        x = a(x)
        extra = np.broadcast_to(np.asarray(fill, x.dtype), (db,) + x.shape[1:])
        return np.concatenate([x, extra], 0)

    qidx = a(m.qidx).copy(); qidx[qidx == m.nq] = nq
    vidx = a(m.vidx).copy(); vidx[vidx == m.nv] = nv
    qidx = np.concatenate([qidx, np.full((m.nb, nqj - m.nqj), nq, np.int32)], 1)
    vidx = np.concatenate([vidx, np.full((m.nb, k - m.k), nv, np.int32)], 1)
    qidx = padb(qidx, nq).astype(np.int32)
    vidx = padb(vidx, nv).astype(np.int32)
    dq, dv = nq - m.nq, nv - m.nv
    nf0 = len(m.frame_names)
    df = nf - nf0
    fb = np.concatenate([a(m.frame_body), np.full(df, -1, np.int32)]).astype(np.int32)
    fE = np.concatenate([a(m.frame_E), np.broadcast_to(np.eye(3), (df, 3, 3))], 0)
    fr = np.concatenate([a(m.frame_r), np.zeros((df, 3))], 0)
    f = jax.device_put      # numpy -> device without compiling a conversion per shape (jnp.asarray does)
    return m.replace(
        parent=f(padb(m.parent, -1).astype(np.int32)), jtype=f(padb(m.jtype, J.FIXED).astype(np.int32)),
        qidx=f(qidx), vidx=f(vidx), Xtree_E=f(padb(m.Xtree_E, np.eye(3))), Xtree_r=f(padb(m.Xtree_r, 0.0)),
        axis=f(padb(m.axis, np.array([0.0, 0.0, 1.0]))), pitch=f(padb(m.pitch, 0.0)),
        mass=f(padb(m.mass, 0.0)), com=f(padb(m.com, 0.0)), inertia=f(padb(m.inertia, 0.0)),
        armature=f(np.concatenate([a(m.armature), np.ones(dv)])),
        damping=f(np.concatenate([a(m.damping), np.zeros(dv)])),
        v_pad=f(np.concatenate([a(m.v_pad), np.ones(dv)])),
        q_lower=f(np.concatenate([a(m.q_lower), np.zeros(dq)])),
        q_upper=f(np.concatenate([a(m.q_upper), np.zeros(dq)])),
        frame_body=f(fb), frame_E=f(fE), frame_r=f(fr),
        nb=nb, nq=nq, nv=nv, nqj=nqj, k=k,
        types=tuple(sorted(set(m.types) | {J.FIXED} | set(types or ()))) if db else
        tuple(sorted(set(m.types) | set(types or ()))),
        body_names=tuple(m.body_names) + tuple(f"pad{i}" for i in range(db)),
        joint_names=tuple(m.joint_names) + tuple(f"pad{i}" for i in range(db)),
        frame_names=tuple(m.frame_names) + tuple(f"padframe{i}" for i in range(df)),
    )


def stack(models: Sequence[Model]) -> Model:
    """One batched Model (leading axis = robot) for ``jax.vmap(..., in_axes=(0, ...))``.

    All models are padded to the largest nb, nq, nv, joint sizes and frame count; the
    static joint-type set is the union.  Names are dropped (they differ per robot): look up
    frame indices on the individual models and pass them, or use ``frame_index`` arguments.
    States for robot j are its own q, v zero-padded to the common nq, nv.
    """
    models = list(models)
    if not models:
        raise ValueError("stack needs at least one model")
    dims = dict(nb=max(m.nb for m in models), nq=max(m.nq for m in models), nv=max(m.nv for m in models),
                nqj=max(m.nqj for m in models), k=max(m.k for m in models),
                nf=max(len(m.frame_names) for m in models))
    types = set().union(*[set(m.types) for m in models])
    if any(m.nb < dims["nb"] for m in models):
        types.add(J.FIXED)
    padded = [pad(m, **dims, types=types) for m in models]
    from .model import DATA_FIELDS
    leaves = {}
    for fld in DATA_FIELDS:
        leaves[fld] = jnp.stack([getattr(p, fld) for p in padded])
    return padded[0].replace(**leaves, types=tuple(sorted(types)), body_names=(), joint_names=(),
                             frame_names=(), name="stack[" + ",".join(m.name for m in models) + "]",
                             scan_layout=_stacked_layout(models, dims["nb"]),
                             lane_parents=_lane_parents(models, dims["nb"]), lane_dofs=_lane_dofs(padded))


def _stacked_layout(models, nb):
    """The batch-last kernels' plan for a stack (``Model.scan_layout``): body 0 taken out of the
    scan when it is every member's only root (a floating base, or a fixed-base arm's first
    joint), so the scanned bodies need only the members' largest dof count after body 0
    (1 for arms, quadrupeds and humanoids) instead of 6.  Padded bodies (roots with a fixed
    joint, no mass, no children, no f_ext) then hang from body 0 instead of the world, which
    changes nothing.  The plan's first entry is True when every root is FREE, else the tuple
    of the members' root joint types; None when some member has another root."""
    roots, ks, types = set(), [1], {J.FIXED} if any(m.nb < nb for m in models) else set()
    for m in models:
        parent, jtype = np.asarray(m.parent), np.asarray(m.jtype)
        if not lone_root(parent, m.nb):
            return None
        roots.add(int(jtype[0]))
        types |= {int(t) for t in jtype[1:]}
        ks += [J.NV[int(t)] for t in jtype[1:]]
    return (True if roots == {J.FREE} else tuple(sorted(roots))), max(ks), tuple(sorted(types))


def _lane_parents(models, nb):
    """``Model.lane_parents`` of a stack: for each of the nb bodies, the sorted distinct parents
    (-1: the world) that the members give it, not counting members for which it is padding
    (a padded body adds nothing to its parent and nothing reads its values, so it may hang
    from any of them).  A model per lane then reads and adds its parent's sweep slot among
    these few (static) candidates instead of gathering and scattering at a traced slot per
    lane (:func:`jaxdyn.dynamics.batch.aba_layout_kernel`)."""
    out = []
    for i in range(nb):
        out.append(tuple(sorted({int(np.asarray(m.parent)[i]) for m in models if i < m.nb})))
    return tuple(out)


def _lane_dofs(padded):
    """``Model.lane_dofs`` of a stack of the ``padded`` members: for each of the nv dofs, the
    sorted distinct joint slots (body, slot) of ``vidx`` that hold it in some member (none for
    a dof that is padding in every member).  A model per lane then writes each dof from these
    few (static) slots instead of scattering its slots to traced dofs per lane
    (:func:`jaxdyn.dynamics.batch.aba_layout_kernel`)."""
    nv = padded[0].nv
    out = [set() for _ in range(nv)]
    for m in padded:
        for (b, s), j in np.ndenumerate(np.asarray(m.vidx)):
            if j < nv:
                out[j].add((int(b), int(s)))
    return tuple(tuple(sorted(c)) for c in out)


def pad_state(model: Model, x, n: int):
    """Zero-pad a state vector x (model.nq or model.nv,), or a batch of them (..., k), to
    length n along its last axis.  Concrete input is padded on the host (no XLA program per
    input length); under a trace, with ``jnp``."""
    xp = jnp if isinstance(x, jax.core.Tracer) else np
    x = xp.asarray(x)
    if x.ndim == 0 or x.shape[-1] > n:
        raise ShapeError(f"pad_state: x must be (..., k) with k <= n = {n} for model {model.name!r}, got {x.shape}")
    return jnp.asarray(xp.concatenate([x, xp.zeros(x.shape[:-1] + (n - x.shape[-1],), x.dtype)], -1))
