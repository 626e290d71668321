"""Per-body arrays with every joint in k = max nv slots (unused slots: zero columns, a unit
pivot), for the O(n) methods of the literature that keep per-body arrays (nb, ...): Saha's
UDU^T, Rodriguez and Kreutz's operators, Yamane and Nakamura's virtual work and the
operational-space recursions.  They run on the sweeps of :mod:`jaxdyn.tree` like the core
algorithms."""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..kinematics.bodies import bodies
from ..model.model import Model
from ..tree import PerRun
from .aba import ABAFactor, aba_factor, velocity_terms
from .common import external_forces
from ..tree import per_run


def per_body(model: Model, x):
    """(nv, ...) -> (nb, k, ...) per-body joint slots (0 on unused slots)."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])[model.vidx]


def scatter_dofs(model: Model, vals):
    """(nb, k, ...) per-body slot values -> (nv, ...) (unused slots dropped)."""
    idx = model.vidx.reshape(-1)
    return vals.reshape((-1,) + vals.shape[2:])[np.flatnonzero(idx < model.nv)]


def dof_mask(model: Model):
    """(nb, k) 1.0 where the joint slot is a real dof, else 0."""
    return jnp.asarray(model.vidx < model.nv, model.mass.dtype)


def padded(model: Model, x: PerRun, pivot=False):
    """Per-run per-joint values (n, a, nv_t) or (n, nv_t) or (n, nv_t, nv_t) (``pivot``: an
    identity on the unused diagonal) as (nb, a, k) / (nb, k) / (nb, k, k)."""
    k = model.vidx.shape[1]
    out = []
    for r, v in zip(model.runs, x):
        pad = k - r.nv
        if pivot:
            v = jnp.pad(v, ((0, 0), (0, pad), (0, pad))) + jnp.diag(jnp.arange(k) >= r.nv).astype(v.dtype)[None]
        elif v.ndim == 2:
            v = jnp.pad(v, ((0, 0), (0, pad)))
        else:
            v = jnp.pad(v, ((0, 0), (0, 0), (0, pad)))
        out.append(v)
    return jnp.concatenate(out, 0)


def dof_blocks(model: Model, blocks):
    """Per-joint (nb, k, k) blocks -> the block-diagonal (nv, nv) matrix (unused slots are
    added into a row and column nv, then dropped)."""
    n, idx = model.nv, model.vidx
    out = jnp.zeros((n + 1, n + 1), blocks.dtype).at[idx[:, :, None], idx[:, None, :]].add(blocks)
    return out[:n, :n]


class SlotFactor(NamedTuple):
    """ABA's factorization (:func:`jaxdyn.dynamics.aba.aba_factor`) in per-body slots: Xup
    (E (nb, 3, 3), r (nb, 3)), X6 (nb, 6, 6), S, U, U D^-1 (nb, 6, k), D, D^-1 (nb, k, k) (a
    unit pivot on unused slots), IA, Ia (nb, 6, 6); ``joints``: the joint transforms as
    :func:`jaxdyn.kinematics.joint_transforms` returns them."""
    Xup: sp.Transform
    X6: jax.Array
    S: jax.Array
    U: jax.Array
    D: jax.Array
    Dinv: jax.Array
    IA: jax.Array
    UDinv: jax.Array
    Ia: jax.Array
    joints: tuple


def slot_factor(model: Model, q) -> SlotFactor:
    """ABA's tau-independent pass at q (nq,) in per-body slots."""
    return slot_factor_of(model, aba_factor(model, *joint_transforms(model, q)))


def slot_factor_of(model: Model, fac: ABAFactor) -> SlotFactor:
    """:func:`slot_factor` from ABA's factorization ``fac`` (:func:`jaxdyn.dynamics.aba.aba_factor`,
    which carries the joint transforms Xup and S it was computed from), for callers that
    computed it already."""
    Xup, S = fac.Xup, fac.S
    Xb = bodies(Xup)
    X6 = jax.vmap(sp.to_matrix)(Xb)
    Dinv = padded(model, fac.Dinv, pivot=True)
    D = PerRun(jnp.einsum("nak,naj->nkj", s, u) + jax.vmap(jnp.diag)(a)
               for s, u, a in zip(S, fac.U, per_run(model, model.armature)))
    D = padded(model, D, pivot=True) if model.nb else Dinv
    return SlotFactor(Xb, X6, padded(model, S), padded(model, fac.U), D, Dinv, fac.IA, padded(model, fac.UDinv),
                      fac.Ia.bodies() if model.nb else fac.IA, (Xup, S))


def bias_terms(model: Model, joints, qd, f_ext=None, f_ext_frame="local"):
    """ABA's pass 1 (:func:`jaxdyn.dynamics.aba.velocity_terms`): per body c = v x S qd and
    pA = v x* I v - f_ext, (nb, 6) each, from the joint transforms ``joints`` and f_ext
    (nb, 6) in Pinocchio order [force; moment] or None."""
    Xup, S = joints
    fx = None
    if f_ext is not None:
        fx = external_forces(model, f_ext, f_ext_frame, world_transforms(model, Xup) if f_ext_frame == "world" else None)
    c, pA = velocity_terms(model, Xup, S, qd, fx)
    return c.bodies(), pA.bodies()

