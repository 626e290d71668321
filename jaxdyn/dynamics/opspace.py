"""Operational-space inverse inertia J M^-1 J^T by the O(N) recursion (6.10) of Rodriguez and Kreutz 1988 Part II.

For a frame on body b with Jacobian J (6 x nv), (6.7) gives J M^-1 J^T = B^T psi^T H^T D^-1 H psi B.
On a tree the sum over links k runs over the common ancestors of the two frames' bodies, so

    Lambda(k) = psi(p, k)^T Lambda(p) psi(p, k) + H^T(k) D^-1(k) H(k),   Lambda(world) = 0  (6.10b)

is swept root to leaves (Rodriguez and Kreutz's N..1 loop) and, for frames a on body i and b on body j with
deepest common ancestor c,

    [J M^-1 J^T]_ab = E_a(c)^T Lambda(c) E_b(c),   E_a(k) = psi(k, i) X_a^T  (force map a -> k)

(6.9b); for a = b this is (6.10c), Lambda_a(0) = phi^T(1, 0) Lambda(1) phi(1, 0).  E_a is swept
leaves to root from body i along psi.  Bodies in different trees (c = world) do not couple.

Units and order follow :func:`jaxdyn.frame_jacobian`: rows and columns [linear; angular] per
frame, in the chosen ``reference``.  Cost O(n m) for m frames plus O(m^2) 6x6 products.
"""
from __future__ import annotations


from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..kinematics import change_reference, frame_X0, frame_index, to_pin_order, world_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from .common import pd_inverse
from .operator import InnovationsFactors, factors_unchecked


def _lambda_step(Lam_p, x, keep=None):
    """(6.10b): Lambda(k) = psi^T(p, k) Lambda(p) psi(p, k) + H^T D^-1 H (frame k, motion x force)."""
    psi, S, Dinv = x
    Lam = psi.T @ Lam_p @ psi + S @ Dinv @ S.T
    return Lam, None


@partial(jax.jit, static_argnames=('reference',))
def _opspace_inv(model, q, fids, reference):
    return opspace_inverse_inertia_of(model, factors_unchecked(model, q), fids, reference)


def opspace_inverse_inertia_of(model: Model, F: InnovationsFactors, fids, reference="local_world_aligned"):
    """:func:`opspace_inverse_inertia` for frame indices ``fids`` (m,) from the operators ``F``
    at q (:func:`jaxdyn.dynamics.operator.factors_of`), for callers that computed ABA's
    factorization already."""
    Lam, _ = forward_sweep(_lambda_step, model, jnp.zeros((6, 6), F.P.dtype), (F.psi, F.S, F.Dinv))
    X0 = world_transforms(model, F.joints[0])
    anc = jnp.asarray(np.concatenate([model.topology.ancestors, np.zeros((1, model.nb))]))   # row nb: the world
    nb = model.nb

    def frame_data(fid):
        Xf, b = frame_X0(model, X0, fid)        # world -> frame, and its body
        body_to_world = sp.to_matrix(sp.inverse(sp.Transform(X0.E[b], X0.r[b])))
        # body motion -> the reported motion, rows [linear; angular] (as frame_jacobian)
        T = to_pin_order(change_reference(body_to_world, Xf, reference))
        init = jnp.zeros((nb, 6, 6), F.P.dtype).at[b].set(T.T)  # force map frame -> body b
        E, _ = backward_sweep(lambda acc, x, keep=None: (x @ acc, None), model, init, F.psi)
        return E[:-1], b

    E, bodies = jax.vmap(frame_data)(fids)       # E (m, nb, 6, 6): force map frame -> body k
    common = anc[bodies][:, None, :] * anc[bodies][None, :, :]          # (m, m, nb)
    c = jnp.max(jnp.where(common > 0, jnp.arange(nb), -1), axis=-1)     # deepest common ancestor
    cc = jnp.maximum(c, 0)
    Ea = E[jnp.arange(len(fids))[:, None], cc]                          # (m, m, 6, 6)
    Eb = E[jnp.arange(len(fids))[None, :], cc]
    blk = jnp.einsum("abki,abkl,ablj->abij", Ea, Lam[cc], Eb)
    blk = jnp.where((c >= 0)[:, :, None, None], blk, 0.0)
    m = len(fids)
    out = blk.transpose(0, 2, 1, 3).reshape(6 * m, 6 * m)
    return 0.5 * (out + out.T)


def opspace_inverse_inertia(model: Model, q, frames, reference="local_world_aligned"):
    """J M^-1 J^T (6m, 6m) for m frames (names or indices), stacked [linear; angular] blocks.

    ``reference`` as in :func:`jaxdyn.frame_jacobian` ("world", "local" or
    "local_world_aligned").  Computed by the O(N) recursion (6.10) without forming M^-1 or J.
    """
    check_state(model, q=q)
    if isinstance(frames, (str, int)):
        frames = [frames]
    fids = jnp.asarray([frame_index(model, f) for f in frames], jnp.int32)
    return _opspace_inv(model, q, fids, reference)


def opspace_inertia(model: Model, q, frames, reference="local_world_aligned"):
    """Lambda = (J M^-1 J^T)^-1, the operational-space inertia (6m, 6m).

    Singular when the frames' 6m coordinates are not independently reachable (fewer than 6m
    dofs, or a kinematic singularity): then the Cholesky pivot fails and the result is NaN.
    """
    Om = opspace_inverse_inertia(model, q, frames, reference)
    return _pd_inverse_jit(Om)


_pd_inverse_jit = jax.jit(pd_inverse)
