"""The terms of Carpentier & Mansard's (2018) analytical derivatives, written once for one
state and for a batch-last chunk of states (the formulas are in
:mod:`jaxdyn.dynamics.derivatives`).  Their first half (:func:`kinematics`,
:func:`joint_forces`) is Newton-Euler inverse dynamics in closed form, which
:func:`jaxdyn.rnea` runs for one state.

Component-first layout (:mod:`jaxdyn.spatial.linalg`), with the bodies or dofs on the first
trailing axis and an optional batch axis after it:

* per body: vectors (6, nb, ...), matrices (6, 6, nb, ...);
* per dof: vectors (6, nv, ...), matrices (6, 6, nv, ...);
* dof pairs: (nv, nv, ...).

``...`` is empty for one state and (C,) for a chunk of C states of one model.  Each tree is
expressed in its root body's frame at q (see :mod:`jaxdyn.dynamics.crba`).  Sums over the
bodies a dof moves, and over subtrees, are products with the model's constant 0/1 ancestry
matrices (one matrix product per quantity instead of a sweep); the root transforms take
ceil(log2 depth) pointer-jumping steps (:func:`jaxdyn.kinematics.root_transforms`), so no
term sweeps over the bodies.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import spatial as sp
from ..kinematics import ancestors, joint_transforms, root_transforms
from ..model.model import Model, array_module, tree_arrays
from ..spatial.linalg import mv, tr
from ..tree import parent_slots
from .aba_steps import same
from .batch import chunk_joint_transforms
from .tree_inverse import branches, matmul, spd_inverse, tree_spd_inverse
from .common import body_inertia_matrices, dof_ancestry, dof_owner, gravity_acceleration


class Topology(NamedTuple):
    """Constant 0/1 matrices of a model: ``anc`` (nb, nb), anc[i, j] = 1 when body j is i or
    an ancestor of i; ``A`` (nb, nv), A[i, k] = 1 when dof k moves body i; ``pair``,
    ``same`` (nv, nv): dof k's body is dof c's body or above it, resp. the same body;
    ``body``, ``col`` (nv,): each dof's body (nb for padded dofs) and column of S."""
    anc: jax.Array
    A: jax.Array
    pair: jax.Array
    same: jax.Array
    body: jax.Array
    col: jax.Array


def topology(model: Model) -> Topology:
    """:class:`Topology` of ``model``: constants of the compiled program when the topology
    is static (:func:`jaxdyn.model.model.tree_arrays`), else computed from the traced arrays."""
    nb = model.nb
    anc = ancestors(model)
    body, col = dof_owner(model)
    xp = array_module(anc)
    A = xp.concatenate([anc[:-1], xp.zeros((nb, 1), anc.dtype)], 1)[:, body]
    pair, same = dof_ancestry(model, anc, body)
    return Topology(anc[:-1], A, pair, same, body, col)


def _over(M, x, axis):
    """M (m, n) applied along ``axis`` of x (length n) -> that axis has length m."""
    return jnp.moveaxis(jnp.tensordot(M, jnp.moveaxis(x, axis, 0), 1), 0, axis)


def _gather(x, idx, axis, nb):
    """Rows ``idx`` of x along ``axis``; index nb (padded dofs) reads zeros."""
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, 1)
    return jnp.take(jnp.pad(x[(slice(None),) * axis + (slice(0, nb),)], pad), idx, axis)


def _skew_rows(a):
    """[a]x (a (3, ...)) as rows of entries, None where the entry is zero."""
    return [[None, -a[2], a[1]], [a[2], None, -a[0]], [-a[1], a[0], None]]


def _bias_inertia(v, I, h):
    """B = v x* I - I v x - [[n x, f x], [f x, 0]] (6, 6, ...) for the velocity v (6, ...),
    inertia I (6, 6, ...) and momentum h = I v = [n; f] (Carpentier & Mansard 2018; the
    matrix whose subtree sums BC enter the derivatives).  With v x = [[w x, 0], [u x, w x]],
    written entry by entry with the zeros of the cross-product matrices left out: 216 products
    of the 432 of two 6x6 products, and no concatenation inside the fused loop (which ran
    this step 1.7x slower on a talos_reduced chunk)."""
    W, U = _skew_rows(v[:3]), _skew_rows(v[3:])
    N, F = _skew_rows(h[:3]), _skew_rows(h[3:])
    Cv = [W[r] + [None] * 3 for r in range(3)] + [U[r] + W[r] for r in range(3)]       # v x
    mh = [N[r] + F[r] for r in range(3)] + [F[r] + [None] * 3 for r in range(3)]      # [[n x, f x], [f x, 0]]

    def entry(a, b):
        terms = [Cv[k][a] * I[k, b] for k in range(6) if Cv[k][a] is not None]     # (v x)^T I
        terms += [I[a, k] * Cv[k][b] for k in range(6) if Cv[k][b] is not None]    # I (v x)
        if mh[a][b] is not None:
            terms.append(mh[a][b])
        return -sum(terms[1:], terms[0])
    return jnp.stack([jnp.stack([entry(a, b) for b in range(6)]) for a in range(6)])


class Kinematics(NamedTuple):
    """qdd-independent terms (layouts in the module docstring).  Per dof: J (its motion
    subspace column), vb, vp (velocities of its body and of that body's parent), u = vp x J;
    per body: v, g (the base acceleration -gravity, nonzero on root bodies), abias (the
    acceleration at qdd = 0), I (6x6), h = I v, and the subtree sums IC, BC of I and of
    B = v x* I - I v x + (. x* h); Xr, every body's transform from its tree's root frame
    (E (3, 3, nb, ...), r (3, nb, ...))."""
    J: jax.Array
    vb: jax.Array
    vp: jax.Array
    u: jax.Array
    v: jax.Array
    g: jax.Array
    abias: jax.Array
    I: jax.Array
    h: jax.Array
    IC: jax.Array
    BC: jax.Array
    Xr: sp.Transform


def root_frame_terms(model: Model, topo: Topology, E, r, S, keep=same):
    """Every body's transform from its tree's root frame Xr (E (3, 3, nb, ...), r (3, nb, ...)),
    every dof's motion subspace column J (6, nv, ...) and every body's 6x6 inertia I
    (6, 6, nb, ...), the last two in that root frame, from the joint transforms E, r, S
    (batch axis last, as :func:`kinematics`)."""
    nb = model.nb
    batch = (1,) * (E.ndim - 3)
    cf = lambda x, n: jnp.moveaxis(x, 0, n)                             # bodies after n components
    Xr = root_transforms(model, sp.Transform(E, r), keep)
    Er, rr = keep((Xr.E[:-1], Xr.r[:-1]))
    Xr = sp.Transform(cf(Er, 2), cf(rr, 1))                             # (3, 3, nb, ...), (3, nb, ...)
    Xd = sp.Transform(_gather(Xr.E, topo.body, 2, nb), _gather(Xr.r, topo.body, 1, nb))
    Sd = cf(_gather(S, topo.body, 0, nb)[jnp.arange(model.nv), :, topo.col], 1)
    J = keep(sp.apply_motion_inv(Xd, Sd))                               # (6, nv, ...)
    I6 = jnp.moveaxis(body_inertia_matrices(model).astype(E.dtype), 0, 2).reshape((6, 6, nb) + batch)
    I = keep(sp.congruence(Xr, I6 + jnp.zeros_like(Xr.r[:1, None]), keep))   # X^T I X: root frame
    return Xr, J, I


def crba_terms(model: Model, E, r, S, keep=same, topo=None):
    """M (nv, nv, ...) by the composite-rigid-body algorithm in root frames: IC = subtree sums
    of I (a product with the ancestry matrix), M_ck = J_c^T IC_d J_k (:func:`mass_matrix`)."""
    topo = topology(model) if topo is None else topo
    _, J, I = root_frame_terms(model, topo, E, r, S, keep)
    IC = keep(_over(topo.anc.T, I, 2))
    ICd = keep(_gather(IC, topo.body, 2, model.nb))
    return mass_matrix(model, topo, keep(mv(ICd, J)), J, keep)


def kinematics(model: Model, topo: Topology, E, r, S, qd, gravity=None, keep=same) -> Kinematics:
    """:class:`Kinematics` from the joint transforms E (nb, 3, 3, ...), r (nb, 3, ...), S
    (nb, 6, k, ...) (:func:`jaxdyn.kinematics.joint_transforms`, batch axis last) and qd
    (nv, ...).  Velocities and accelerations are sums over the dofs that move a body,
    v_i = sum_k A_ik J_k qd_k and a_i = g_i + sum_k A_ik (J_k qdd_k + (v_k x J_k) qd_k) with
    v_k the velocity of dof k's body (J_k is fixed in that body, so dJ_k/dt = v_k x J_k).
    ``keep`` is applied to intermediate products (as in :mod:`jaxdyn.dynamics.aba_steps`)."""
    nb = model.nb
    batch = (1,) * (E.ndim - 3)
    a0 = gravity_acceleration(model, gravity).reshape((6, 1) + batch)
    cf = lambda x, n: jnp.moveaxis(x, 0, n)                             # bodies after n components
    Xr, J, I = root_frame_terms(model, topo, E, r, S, keep)
    v = keep(_over(topo.A, J * qd[None], 1))                            # (6, nb, ...)
    vb, vp = keep((_gather(v, topo.body, 1, nb), _gather(_gather(v, parent_slots(model), 1, nb), topo.body, 1, nb)))
    root = (model.parent < 0).reshape((nb,) + batch)
    g = jnp.where(root, sp.apply_motion(sp.Transform(cf(E, 2), cf(r, 1)), a0), 0.0)
    abias = keep(_from_roots(model, topo, g) + _over(topo.A, keep(sp.cross_motion(vb, J) * qd[None]), 1))
    h = keep(mv(I, v))
    B = keep(_bias_inertia(v, I, h))
    IC, BC = keep(tuple(_over(topo.anc.T, x, 2) for x in (I, B)))
    return Kinematics(J, vb, vp, keep(sp.cross_motion(vp, J)), v, g, abias, I, h, IC, BC, Xr)


def _from_roots(model: Model, topo: Topology, g):
    """sum_c anc[i, c] g_c (6, nb, ...) for g (6, nb, ...) nonzero on root bodies only: g of
    each body's root, a gather when the topology is static (a product with the ancestry
    matrix otherwise)."""
    parent, _ = tree_arrays(model)
    if not isinstance(topo.anc, np.ndarray) or not isinstance(parent, np.ndarray) or model.nb == 0:
        return _over(topo.anc, g, 1)
    return jnp.take(g, np.argmax(topo.anc * (parent < 0)[None], 1), axis=1)


def joint_forces(model: Model, topo: Topology, kin: Kinematics, qdd, keep=same, fx=None):
    """Body accelerations a (6, nb, ...) at qdd (nv, ...), the subtree force sums F (6, nb, ...)
    and the joint forces J^T F (nv, ...) (tau without armature): f = I a + v x* I v - f_ext,
    with ``fx`` the external forces [n; f] (6, nb, ...) in each body's frame (None: none).
    ``qdd`` None: at qdd = 0 (the bias forces h; XLA does not drop a product with zeros)."""
    a = kin.abias if qdd is None else keep(kin.abias + _over(topo.A, kin.J * qdd[None], 1))
    f = mv(kin.I, a) + sp.cross_force(kin.v, kin.h)
    f = keep(f if fx is None else f - sp.apply_force_T(kin.Xr, fx))   # X^T: body -> root frame
    F = keep(_over(topo.anc.T, f, 1))
    Fd = _gather(F, topo.body, 1, model.nb)
    return a, F, sum(kin.J[i] * Fd[i] for i in range(6))


def _pair(x, y):
    """(c, k) -> sum_i x[i, c] y[i, k] for x, y (n, nv, ...) -> (nv, nv, ...).  This is
    ``linalg.mm(tr(x), y)`` without materializing tr(x), which was slower, as was a reduction
    over the leading axis (figures: ``benchmarks/results/design_measurements.md``)."""
    if x.ndim == 2:
        return x.T @ y
    out = x[0][:, None] * y[0][None]                   # unrolled over the leading axis
    for i in range(1, x.shape[0]):
        out = out + x[i][:, None] * y[i][None]
    return out


def _mask(m, x):
    """A (n, n) mask broadcast against x (n, n, ...)."""
    return m.reshape(m.shape + (1,) * (x.ndim - 2))


def mass_matrix(model: Model, topo: Topology, W, J, keep=same):
    """M (nv, nv, ...) from W_c = IC_c J_c (6, nv, ...): M_ck = W_c . J_k for c at or below k."""
    Mb = keep(_pair(W, J))
    low = Mb * _mask(topo.pair - topo.same, Mb)
    return low + tr(low) + Mb * _mask(topo.same, Mb) + _mask(jnp.diag(model.armature), Mb)


def dof_inertias(model: Model, topo: Topology, kin: Kinematics, keep=same):
    """Per dof: IC of its body (6, 6, nv, ...) and W = IC J (6, nv, ...)."""
    ICd = keep(_gather(kin.IC, topo.body, 2, model.nb))
    return ICd, keep(mv(ICd, kin.J))


def assemble(model: Model, topo: Topology, kin: Kinematics, a, F, ICW, keep=same):
    """(dtau_dq, dtau_dqd), each (nv, nv, ...) (:mod:`jaxdyn.dynamics.derivatives`), with
    ``ICW`` = :func:`dof_inertias`."""
    nb = model.nb
    root = (model.parent < 0).reshape((nb,) + (1,) * (a.ndim - 2))
    ap = keep(_gather(jnp.where(root, kin.g, _gather(a, parent_slots(model), 1, nb)), topo.body, 1, nb))
    J, u = kin.J, kin.u
    dAq = keep(sp.cross_motion(ap, J) + sp.cross_motion(kin.vp, u))
    dAv = keep(sp.cross_motion(kin.vb, J) + u)
    ICd, W = ICW                                                        # IC_c, IC_c J_c
    BCd, Fd = keep((_gather(kin.BC, topo.body, 2, nb), _gather(F, topo.body, 1, nb)))
    V = keep(mv(tr(BCd), J))                                            # BC_c^T J_c
    Pq = keep(mv(ICd, dAq) + mv(BCd, u) + sp.cross_force(J, Fd))        # d F_k / d q_k (subtree of k)
    Pv = keep(mv(ICd, dAv) + mv(BCd, J))
    WV, dAqu, dAvJ = keep((jnp.concatenate([W, V]), jnp.concatenate([dAq, u]), jnp.concatenate([dAv, J])))
    dq, dv = keep((_pair(J, Pq), _pair(J, Pv)))
    above = _mask(topo.pair.T - topo.same, dq)                          # c's body strictly above k's
    anc = _mask(topo.pair, dq)
    dq = keep(dq * above + _pair(WV, dAqu) * anc)
    dv = keep(dv * above + _pair(WV, dAvJ) * anc)
    return dq, dv


def inverse_mass_matrix(topo: Topology, M, keep=same):
    """M^-1 (nv, nv, ...): nested Schur complements over the tree's branches
    (:func:`jaxdyn.dynamics.tree_inverse.tree_spd_inverse`) when the topology is static,
    else Gauss-Jordan sweeps on all of M (:func:`spd_inverse`; e.g. a stack's lanes)."""
    if isinstance(topo.pair, np.ndarray):
        return tree_spd_inverse(M, branches(topo.pair, topo.same), keep)
    return keep(spd_inverse(M))


def rnea_derivatives_terms(model: Model, E, r, S, qd, qdd, gravity=None, keep=same, topo=None):
    """(dtau_dq, dtau_dqd, M) (nv, nv, ...) at joint transforms E, r, S (batch-last).
    ``topo``: the model's :func:`topology` if already computed (e.g. once for all chunks)."""
    topo = topology(model) if topo is None else topo
    kin = kinematics(model, topo, E, r, S, qd, gravity, keep)
    a, F, _ = joint_forces(model, topo, kin, qdd, keep)
    ICW = dof_inertias(model, topo, kin, keep)
    return assemble(model, topo, kin, a, F, ICW, keep) + (mass_matrix(model, topo, ICW[1], kin.J, keep),)


def aba_derivatives_terms(model: Model, E, r, S, qd, tau, gravity=None, keep=same, topo=None):
    """(dqdd_dq, dqdd_dqd, Minv) (nv, nv, ...): qdd = M^-1 (tau - h), with h the joint forces
    at qdd = 0 and M from the same terms (M^-1: :func:`inverse_mass_matrix`); then -M^-1 (d tau / d q,
    d tau / d qd)."""
    topo = topology(model) if topo is None else topo
    kin = kinematics(model, topo, E, r, S, qd, gravity, keep)
    _, _, h = joint_forces(model, topo, kin, None, keep)
    ICW = dof_inertias(model, topo, kin, keep)
    M = mass_matrix(model, topo, ICW[1], kin.J, keep)
    Mi = inverse_mass_matrix(topo, M, keep)
    b = tau - h                    # each product kept: fused, the three nested M^-1 / M products
    qdd = keep(mv(Mi, b))          # were recomputed for every element of J qdd
    qdd = keep(qdd + mv(Mi, keep(b - mv(M, qdd))))
    a, F, _ = joint_forces(model, topo, kin, qdd, keep)
    dq, dv = assemble(model, topo, kin, a, F, ICW, keep)
    return -matmul(Mi, dq), -matmul(Mi, dv), Mi


def state_transforms(model: Model, q):
    """Joint transforms of one state q (nq,) or a chunk (C, nq), batch axis last:
    E (nb, 3, 3, ...), r (nb, 3, ...), S (nb, 6, k, ...)."""
    if q.ndim == 1:
        X, S = joint_transforms(model, q)
        return X.E, X.r, S
    return chunk_joint_transforms(model, q)

