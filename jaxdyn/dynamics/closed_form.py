"""Forward dynamics of one state in closed form: qdd = M^-1 (tau - h), with M and h built
from one kinematics pass of ancestry products (:mod:`jaxdyn.dynamics.derivative_sweeps`)
instead of sweeps over the bodies, and one Cholesky solve per tree.

One state on CPU is latency-bound (a fixed cost per emitted kernel, see
``docs/architecture.md``): ABA's three sweeps cost nb dependent steps each, this form a
fixed number of operations (``benchmarks/results/core.json``, B = 1).  It is what
:func:`jaxdyn.aba` runs for one f64 state of a model whose topology is known while tracing,
and its M (:func:`mass_matrix`) is what :func:`jaxdyn.crba` returns for one state.

Accuracy.  M is assembled from composite inertias about each subtree's centre of mass
(:func:`composite_mass_matrix`), never about a far-away root origin: there, the inertia of a
light subtree far from the root is a difference of terms of order m |p|^2, and the solve
amplifies that round-off by cond(M) (tiago_no_hand, cond 5e6: 1.3e-11 relative to
Pinocchio's qdd, against 1.5e-15 with the composites about the centre of mass).  With them
the solve is as close to Pinocchio's ``aba`` as Pinocchio's own ``crba`` followed by a
Cholesky solve.  In f32 the sweeps stay (:func:`applies`): the solve's forward error grows
with cond(M) (talos, cond 8e4: 1.6e-5 against the sweeps' 8e-8).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..kinematics import ancestors
from ..model.model import Model, tree_arrays
from ..spatial.linalg import cross3, mm, mv, tr
from . import derivative_sweeps as ds
from .common import dof_owner, with_zero_body


def applies(model: Model, dtype) -> bool:
    """Whether one state of ``model`` in ``dtype`` runs :func:`aba_closed_form`: f64, a
    topology known while tracing (:func:`tree_dof_masks`; not a
    ``jaxdyn.stack``), at least one dof."""
    return model.nv > 0 and jnp.dtype(dtype) == jnp.float64 and tree_dof_masks(model) is not None


def tree_dof_masks(model: Model):
    """(T, nv) 0/1 numpy array: row t marks the dofs of the t-th tree that has dofs (a root
    body, parent -1, and the bodies below it; M is block diagonal over the trees): the
    ancestry rows of the dofs' bodies (:func:`jaxdyn.kinematics.ancestors`) at the root
    columns.  Padded dofs (``stack``; body nb, the zero row) are in no tree.  None when the
    topology is traced (:func:`jaxdyn.model.model.tree_arrays`)."""
    parent, _ = tree_arrays(model)
    if not isinstance(parent, np.ndarray):
        return None
    body, _ = dof_owner(model)
    masks = ancestors(model)[body][:, parent < 0].T
    return masks[masks.any(1)]


def composite_mass_matrix(model: Model, topo: ds.Topology, kin: ds.Kinematics):
    """M (nv, nv) of one state (with armature) from :func:`ds.kinematics` terms, with every
    composite inertia taken about its subtree's centre of mass C_c (root-frame axes):

        m_c = sum_i m_i,  C_c = sum_i m_i p_i / m_c,
        I_c = sum_i (R_i Ic_i R_i^T + m_i [p_i - C_c]x^T [p_i - C_c]x)   (i in subtree(c)),

    p_i the centre of mass of body i and R_i its orientation (root frame), Ic_i its
    rotational inertia about p_i.  Then W_c = [I_c w_c + C_c x m_c u_c; m_c u_c], the
    composite momentum under unit rate of dof c (u_c = v_c + w_c x C_c, the velocity of the
    point C_c), and M_ck = J_k . W_c for dof k at or above dof c
    (:func:`ds.mass_matrix`).  The pair differences p_i - C_c keep each term at the size of
    the subtree (see the module docstring)."""
    nb = model.nb
    E, r = kin.Xr.E, kin.Xr.r                                          # root -> body: (3, 3, nb), (3, nb)
    m = model.mass
    p = r + (E * model.com.T[:, None]).sum(0)                          # r + E^T c: COM in the root frame
    Il = jnp.moveaxis(0.5 * (model.inertia + jnp.swapaxes(model.inertia, -1, -2)), 0, 2)
    Ic = mm(tr(E), mm(Il, E))                                          # E^T Ic E (3, 3, nb), unrolled
    anc = jnp.asarray(topo.anc)                                        # anc[i, c]: c is i or above it
    sums = jnp.concatenate([m[None], p * m[None], Ic.reshape(9, nb)]) @ anc  # subtree sums, one product
    mc, Isum = sums[0], sums[4:].reshape(3, 3, nb)
    C = jnp.where(mc[None] > 0, sums[1:4] / jnp.where(mc > 0, mc, 1.0)[None], 0.0)
    d = p[:, None, :] - C[:, :, None]                                  # (3, c, i): p_i - C_c
    w = (m[:, None] * anc).T                                           # (c, i): m_i in subtree(c)
    P = (jnp.stack([d[a] * d[b] for a, b in _SYM]) * w[None]).sum(-1)  # sum_i m_i d d^T: (6, c), _SYM order
    Icom = Isum + (P[0] + P[1] + P[2])[None, None] * jnp.eye(3, dtype=P.dtype)[:, :, None] - _full_sym(P)
    per_body = jnp.concatenate([Icom.reshape(9, nb), C, mc[None]]).T               # (nb, 13)
    G = with_zero_body(per_body)[jnp.asarray(topo.body)].T                          # per dof (13, nv)
    Id, Cd, md = G[:9].reshape(3, 3, -1), G[9:12], G[12]
    w, v = kin.J[:3], kin.J[3:]
    mu = md[None] * (v + cross3(w, Cd))
    W = jnp.concatenate([mv(Id, w) + cross3(Cd, mu), mu])
    return ds.mass_matrix(model, topo, W, kin.J)


_SYM = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
"""The components of a symmetric 3x3 matrix that :func:`composite_mass_matrix` computes."""


def _full_sym(P):
    """(6, ...) components in :data:`_SYM` order -> the symmetric (3, 3, ...) matrix."""
    return jnp.stack([jnp.stack([P[0], P[3], P[4]]), jnp.stack([P[3], P[1], P[5]]), jnp.stack([P[4], P[5], P[2]])])


def mass_matrix(model: Model, q):
    """:func:`composite_mass_matrix` of one state q (nq,): what :func:`jaxdyn.crba` returns
    for one state (any dtype, any topology).  The composites about the centres of mass keep
    the small entries of M (light links far from the root) to round-off of their own size:
    tiago_no_hand's diagonal 1.5e-15 relative to Pinocchio's, against 6.6e-13 with the
    composites about the root origin."""
    topo, kin = _kinematics(model, q)
    return composite_mass_matrix(model, topo, kin)


def mass_and_bias(model: Model, q, qd, fx=None, gravity=None):
    """M (nv, nv) (:func:`composite_mass_matrix`, with armature) and h (nv,), the joint forces
    at qdd = 0 (without armature), of one state q (nq,), qd (nv,); ``fx`` (6, nb): external
    forces [n; f] in the body frames, or None."""
    topo, kin = _kinematics(model, q, qd, gravity)
    _, _, h = ds.joint_forces(model, topo, kin, None, fx=fx)
    return composite_mass_matrix(model, topo, kin), h


def _kinematics(model: Model, q, qd=None, gravity=None):
    """(:func:`ds.topology`, :func:`ds.kinematics`) of one state; qd None: at rest."""
    E, r, S = ds.state_transforms(model, q)
    topo = ds.topology(model)
    qd = jnp.zeros(model.nv, E.dtype) if qd is None else qd
    return topo, ds.kinematics(model, topo, E, r, S, qd, gravity)


def tree_solve(M, b, masks):
    """x = M^-1 b for M (nv, nv) block diagonal over trees given by ``masks`` (T, nv) 0/1
    (:func:`tree_dof_masks`): one Cholesky factorization per tree, so
    a block that is not positive definite gives NaN on its own dofs only (ABA's rule, see
    :mod:`jaxdyn.dynamics.aba`); dofs in no tree (``stack`` padding) get x = b.  ``masks``
    None (the topology is traced, a ``jaxdyn.stack`` member): one factorization of M."""
    cho_solve = jax.scipy.linalg.cho_solve
    if masks is None or (masks.shape[0] == 1 and masks.all()):
        return cho_solve((jnp.linalg.cholesky(M), True), b)
    inside = masks[:, :, None] * masks[:, None, :] > 0
    Mt = jnp.where(inside, M[None], 0.0) + np.eye(M.shape[0])[None] * (1.0 - masks)[:, None, :]   # (T, nv, nv)
    x = cho_solve((jnp.linalg.cholesky(Mt), True), jnp.where(masks > 0, b[None], 0.0)[..., None])[..., 0]
    return jnp.where(masks > 0, x, 0.0).sum(0) + (1.0 - masks.sum(0)) * b


def aba_closed_form(model: Model, q, qd, tau, fx=None, gravity=None):
    """:func:`jaxdyn.aba` of one state as qdd = M^-1 (tau - h) (:func:`mass_and_bias`,
    :func:`tree_solve`): q (nq,), qd, tau (nv,), fx (nb, 6) [n; f] in the body frames or
    None, gravity None or (3,) -> qdd (nv,).  A tree whose M block is not positive definite
    (a massless leaf on a joint) gets NaN on its dofs, as the sweeps give."""
    M, h = mass_and_bias(model, q, qd, None if fx is None else fx.T, gravity)
    return tree_solve(M, tau - h, tree_dof_masks(model))
