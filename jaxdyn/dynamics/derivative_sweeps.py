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
from ..kinematics import joint_transforms, root_transforms, world_transforms
from ..kinematics.bodies import bodies, dof_columns
from ..model.model import Model
from ..spatial.linalg import mv, tr, tree_sum
from ..tree import same
from .tree_inverse import branches, matmul, tree_spd_inverse
from .common import body_inertia_matrices, external_forces, gravity_acceleration
from .crba import gather_pairs, mass_matrix_from, pair_values


class Topology(NamedTuple):
    """Constant 0/1 matrices of a model (numpy): ``anc`` (nb, nb), anc[i, j] = 1 when body j
    is i or an ancestor of i; ``A`` (nb, nv), A[i, k] = 1 when dof k moves body i; ``pair``,
    ``same`` (nv, nv): dof k's body is dof c's body or above it, resp. the same body;
    ``body`` (nv,): each dof's body; ``parent`` (nb,): each body's parent (the world: nb)."""
    anc: np.ndarray
    A: np.ndarray
    pair: np.ndarray
    same: np.ndarray
    body: np.ndarray
    parent: np.ndarray


def topology(model: Model) -> Topology:
    """:class:`Topology` of ``model`` (constants of the compiled program)."""
    t = model.topology
    anc, body = t.ancestors, t.dof_body
    pair = anc[body][:, body]
    same_body = (body[:, None] == body[None, :]).astype(anc.dtype)
    return Topology(anc, anc[:, body], pair, same_body, body, np.where(model.parent < 0, model.nb, model.parent))


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
    of the 432 of two 6x6 products, and no concatenation inside the fused loop."""
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


def root_frame_terms(model: Model, topo: Topology, Xup, S, keep=same):
    """Every body's transform from its tree's root frame Xr (E (3, 3, nb, ...), r (3, nb, ...)),
    every dof's motion subspace column J (6, nv, ...) and every body's 6x6 inertia I
    (6, 6, nb, ...), the last two in that root frame, from the joint transforms Xup and S
    (:func:`jaxdyn.kinematics.joint_transforms`)."""
    cf = lambda x, n: jnp.moveaxis(x, 0, n)                             # bodies after n components
    X = root_transforms(model, Xup)
    J = keep(jnp.moveaxis(dof_columns(model, X, S), 0, 1))             # (6, nv, ...)
    Er, rr = keep((X.E[:-1], X.r[:-1]))
    Xr = sp.Transform(cf(Er, 2), cf(rr, 1))                             # (3, 3, nb, ...), (3, nb, ...)
    I6 = jnp.moveaxis(body_inertia_matrices(model).astype(Er.dtype), 0, 2)
    I6 = jnp.broadcast_to(I6, I6.shape[:3] + jnp.broadcast_shapes(I6.shape[3:], Xr.r.shape[2:]))
    I = keep(sp.congruence(Xr, I6))                                     # X^T I X: root frame
    return Xr, J, I


def kinematics(model: Model, topo: Topology, Xup, S, qd, gravity=None, keep=same) -> Kinematics:
    """:class:`Kinematics` from the joint transforms Xup, S
    (:func:`jaxdyn.kinematics.joint_transforms`, batch axis last) and qd (nv, ...).  Velocities and accelerations are sums over the dofs that move a body,
    v_i = sum_k A_ik J_k qd_k and a_i = g_i + sum_k A_ik (J_k qdd_k + (v_k x J_k) qd_k) with
    v_k the velocity of dof k's body (J_k is fixed in that body, so dJ_k/dt = v_k x J_k).
    ``keep`` is applied to intermediate products (as in :mod:`jaxdyn.dynamics.aba`)."""
    nb = model.nb
    E, r = bodies(Xup)
    batch = (1,) * (E.ndim - 3)
    a0 = gravity_acceleration(model, gravity)
    a0 = a0.reshape((6, 1) + a0.shape[1:] + (1,) * (len(batch) - (a0.ndim - 1)))
    cf = lambda x, n: jnp.moveaxis(x, 0, n)                             # bodies after n components
    Xr, J, I = root_frame_terms(model, topo, Xup, S, keep)
    v = keep(_over(topo.A, J * qd[None], 1))                            # (6, nb, ...)
    vb, vp = keep((_gather(v, topo.body, 1, nb), _gather(_gather(v, topo.parent, 1, nb), topo.body, 1, nb)))
    root = (model.parent < 0).reshape((nb,) + batch)
    g = jnp.where(root, sp.apply_motion(sp.Transform(cf(E, 2), cf(r, 1)), a0), 0.0)
    abias = keep(_from_roots(model, topo, g) + _over(topo.A, keep(sp.cross_motion(vb, J) * qd[None]), 1))
    h = keep(mv(I, v))
    B = keep(_bias_inertia(v, I, h))
    IC, BC = keep(tuple(_over(topo.anc.T, x, 2) for x in (I, B)))
    return Kinematics(J, vb, vp, keep(sp.cross_motion(vp, J)), v, g, abias, I, h, IC, BC, Xr)


def _from_roots(model: Model, topo: Topology, g):
    """sum_c anc[i, c] g_c (6, nb, ...) for g (6, nb, ...) nonzero on root bodies only: g of
    each body's root (a gather with constant indices)."""
    return jnp.take(g, model.topology.roots, axis=1)


def external_root_forces(model: Model, kin: Kinematics, Xup, f_ext, frame):
    """The external forces f_ext (nb, 6, ...) (rows [force; moment] in ``frame``, as
    :func:`jaxdyn.aba` takes them) in each tree's root frame, [n; f] (6, nb, ...); None for
    None."""
    if f_ext is None:
        return None
    fx = external_forces(model, f_ext, frame, world_transforms(model, Xup) if frame == "world" else None)
    return sp.apply_force_T(kin.Xr, jnp.moveaxis(fx, 0, 1))            # X^T: body -> root frame


def joint_forces(model: Model, topo: Topology, kin: Kinematics, qdd, keep=same, fe=None):
    """Body accelerations a (6, nb, ...) at qdd (nv, ...), the subtree force sums F (6, nb, ...)
    and the joint forces J^T F (nv, ...) (tau without armature): f = I a + v x* I v - f_ext,
    with ``fe`` the external forces (6, nb, ...) in the root frames
    (:func:`external_root_forces`; None: none).  ``qdd`` None: at qdd = 0 (the bias forces h;
    XLA does not drop a product with zeros)."""
    a = kin.abias if qdd is None else keep(kin.abias + _over(topo.A, kin.J * qdd[None], 1))
    f = mv(kin.I, a) + sp.cross_force(kin.v, kin.h)
    f = keep(f if fe is None else f - fe)
    F = keep(_over(topo.anc.T, f, 1))
    Fd = _gather(F, topo.body, 1, model.nb)
    return a, F, tree_sum([kin.J[i] * Fd[i] for i in range(6)])


def dof_inertias(model: Model, topo: Topology, kin: Kinematics, keep=same):
    """Per dof: IC of its body (6, 6, nv, ...) and W = IC J (6, nv, ...)."""
    ICd = keep(_gather(kin.IC, topo.body, 2, model.nb))
    return ICd, keep(mv(ICd, kin.J))


def assemble(model: Model, topo: Topology, kin: Kinematics, a, F, ICW, keep=same, Fw=None):
    """(dtau_dq, dtau_dqd), each (nv, nv, ...) (:mod:`jaxdyn.dynamics.derivatives`), with
    ``ICW`` = :func:`dof_inertias`.  ``Fw`` (6, nb, ...): the part of F that does not turn with
    the bodies (the subtree sums of -f_ext given in world coordinates), or None.  It leaves the
    term J_c^T (J_k x* F_k) (c above k), and where k is at or above c, J_c turns under a fixed
    Fw_c: d (J_c^T Fw_c) / d q_k = (J_k x J_c)^T Fw_c = J_k^T (J_c x* Fw_c)."""
    nb = model.nb
    root = (model.parent < 0).reshape((nb,) + (1,) * (a.ndim - 2))
    ap = keep(_gather(jnp.where(root, kin.g, _gather(a, topo.parent, 1, nb)), topo.body, 1, nb))
    J, u = kin.J, kin.u
    dAq = keep(sp.cross_motion(ap, J) + sp.cross_motion(kin.vp, u))
    dAv = keep(sp.cross_motion(kin.vb, J) + u)
    ICd, W = ICW                                                        # IC_c, IC_c J_c
    BCd, Fd = keep((_gather(kin.BC, topo.body, 2, nb), _gather(F if Fw is None else F - Fw, topo.body, 1, nb)))
    V = keep(mv(tr(BCd), J))                                            # BC_c^T J_c
    Pq = keep(mv(ICd, dAq) + mv(BCd, u) + sp.cross_force(J, Fd))        # d F_k / d q_k (subtree of k)
    Pv = keep(mv(ICd, dAv) + mv(BCd, J))
    WV, dAqu, dAvJ = keep((jnp.concatenate([W, V]), jnp.concatenate([dAq, u]), jnp.concatenate([dAv, J])))
    WVq = WV
    if Fw is not None:                                                  # c's and k's factors of the fixed forces' term
        WVq, dAqu = keep((jnp.concatenate([WV, sp.cross_force(J, _gather(Fw, topo.body, 1, nb))]),
                          jnp.concatenate([dAqu, J])))
    above, anc = np.nonzero(topo.pair.T - topo.same), np.nonzero(topo.pair)   # c's body strictly above k's; k's at or above c's
    no = np.zeros(len(above[0]), bool), np.zeros(len(anc[0]), bool)
    dq, dv = (keep(gather_pairs(model.nv, [(pair_values(J, P, *above), *above, no[0]),
                                           (pair_values(C, D, *anc), *anc, no[1])]))
              for P, C, D in ((Pq, WVq, dAqu), (Pv, WV, dAvJ)))
    return dq, dv


def inverse_mass_matrix(topo: Topology, M, keep=same):
    """M^-1 (nv, nv, ...) by nested Schur complements over the tree's branches
    (:func:`jaxdyn.dynamics.tree_inverse.tree_spd_inverse`)."""
    return tree_spd_inverse(M, branches(topo.pair, topo.same), keep)


def _state_terms(model: Model, q, qd, f_ext, gravity, frame, keep):
    """The terms every derivative shares: (topology, :class:`Kinematics`, external forces in
    the root frames or None, their fixed part's subtree sums Fw or None, (IC_c, IC_c J_c))."""
    topo = topology(model)
    Xup, S = joint_transforms(model, q, keep)
    kin = kinematics(model, topo, Xup, S, qd, gravity, keep)
    fe = external_root_forces(model, kin, Xup, f_ext, frame)
    Fw = None if fe is None or frame == "local" else keep(_over(topo.anc.T, -fe, 1))
    return topo, kin, fe, Fw, dof_inertias(model, topo, kin, keep)


def rnea_derivatives_terms(model: Model, q, qd, qdd, f_ext=None, gravity=None, frame="local", keep=same):
    """(dtau_dq, dtau_dqd, M) (nv, nv, ...) of one state or a batch-last chunk; f_ext (nb, 6,
    ...) rows [force; moment] in ``frame`` ("local": each body's, "world") or None."""
    topo, kin, fe, Fw, ICW = _state_terms(model, q, qd, f_ext, gravity, frame, keep)
    a, F, _ = joint_forces(model, topo, kin, qdd, keep, fe)
    return assemble(model, topo, kin, a, F, ICW, keep, Fw) + (keep(mass_matrix_from(model, kin.J, ICW[1], dof_axis=1)),)


def aba_derivatives_terms(model: Model, q, qd, tau, f_ext=None, gravity=None, frame="local", keep=same):
    """(dqdd_dq, dqdd_dqd, Minv) (nv, nv, ...) of one state or a batch-last chunk: qdd =
    M^-1 (tau - h), with h the joint forces at qdd = 0 and M from the same terms (M^-1:
    :func:`inverse_mass_matrix`); then -M^-1 (d tau / d q, d tau / d qd).  f_ext as
    :func:`rnea_derivatives_terms`."""
    topo, kin, fe, Fw, ICW = _state_terms(model, q, qd, f_ext, gravity, frame, keep)
    _, _, h = joint_forces(model, topo, kin, None, keep, fe)
    M = keep(mass_matrix_from(model, kin.J, ICW[1], dof_axis=1))
    Mi = inverse_mass_matrix(topo, M, keep)
    b = tau - h                    # each product kept: fused, the three nested M^-1 / M products
    qdd = keep(mv(Mi, b))          # were recomputed for every element of J qdd
    qdd = keep(qdd + mv(Mi, keep(b - mv(M, qdd))))
    a, F, _ = joint_forces(model, topo, kin, qdd, keep, fe)
    dq, dv = assemble(model, topo, kin, a, F, ICW, keep, Fw)
    return -matmul(Mi, dq), -matmul(Mi, dv), Mi
