"""Yamane-Nakamura O(N) forward dynamics by the principle of virtual work (Yamane and Nakamura 2001, Secs. 3-4).

Every link k is a free rigid body with its own 6-dof spatial acceleration (Yamane and Nakamura's (2001)
theta-ddot_k); every joint j (child j, parent p) is a *constraint* between them.  With the
joint's motion subspace S_j (6 x n_j) Yamane and Nakamura's (2001) matrices are, in child frame j:

* K_Jm = (S^T S)^-1 S^T (10), (14); joint torques act on the child as W_j tau_j with
  W = K_Jm^T = S (S^T S)^-1 (so S^T (lambda + W tau) = tau);
* the constraint space: wrenches T n with T^T S = 0; we carry them as 6-vectors
  lambda_j = T_j n_j in the range of the projector P_j = 1 - S (S^T S)^-1 S^T = T T^T
  (so K_m K_Jm^T = 0, (11), holds by construction and no basis T has to be chosen).

The constraint j reads P_j (a_j - X_j a_p - c_j) = 0 (13), c_j the velocity-product term.
Path 1 (leaves to root, Eqs. 36-41 on a tree) adds joints one at a time.  When joint c is
added, link c carries its already-solved subtree (effective inverse inertia Psi_c) and the
parent link p carries the joints added before c (Psi_p); then

    M_c = (P (Psi_c + X Psi_p X^T) P)^+         Yamane's M_{i+1} = (S_{i+1} - S M_i S^T)^-1 (41)
    ^c n_c = M_c (c_c + X a-bar_p - a-bar_c)    the constraint force with the joints so far (40)

with a-bar the accelerations of the partial systems under the known forces.  Eliminating the
constraint adds X^T (P Psi_c P)^+ X to link p's inertia (the Schur complement of Eq. 43
expressed on the 6x6 inertia of the link, which is what keeps the cost bounded per joint).
Path 2 (root to leaves) gives the final constraint forces (47),

    ^N n_c = ^c n_c + M_c X Psi_p F_later,

F_later the final constraint forces acting on p from the joints added after c (p's own joint
and the siblings visited before c), and the joint accelerations (53).  Gravity is the base
acceleration a_0 = -g of the fixed world link (its inverse inertia is 0).

Branches (Sec. 4): the seed splits links with more than three joints because its Phi blocks
couple every pair of joints on a link (O(n_b^2) per link).  Here the coupling of all joints on
a link is carried by the link's 6x6 inertia, updated once per child (sequentially, children in
decreasing index order, as the seed adds joints one at a time), so a link with n_b children
costs O(n_b) and the link splitting is not needed for O(N); benchmarks/bench_scaling.py
measures Yamane and Nakamura's (2001) Fig. 7 case (2..12 branches on a spherical base).

Armature (rotor inertia on a joint) is not a link property and has no place in Yamane and Nakamura's (2001)
link-and-constraint model; a model with non-zero armature gives all-NaN here (use "aba").

No link inertia is inverted: Yamane and Nakamura's (2001) A_k^-1 only ever appears in products that are
rewritten with the subtree's constraint-space inertia (P Psi P)^+ = IA - U D^-1 U^T (see
``_path1_step``), so links with singular inertia (Saha's thin rods, zero axial moment) work;
what must be invertible is D = S^T IA S (as in ABA) and J_p + (P Psi_c P)^+.
The joint accelerations use link c's own equation with its final constraint force projected on
the joint's motion space (where the constraint force does no work) together with (13).
Constraint forces are returned as the full joint wrench lambda + W tau on the child, in the
child frame, rows [force; moment] -- the same quantity as RNEA's joint forces
(:func:`jaxdyn.joint_wrenches`, Pinocchio's ``data.f``).
"""
from __future__ import annotations

from functools import partial


import jax
import jax.numpy as jnp

from .. import spatial as sp
from ..model.model import Model, check_state
from ..tree import backward_sweep_with_parent, forward_sweep_with_siblings, sum_over_children
from ..kinematics import joint_transforms
from ..kinematics.bodies import bodies
from .common import body_inertia_matrices, gravity_acceleration, spd_inverse_components
from .registry import register_method
from .slots import bias_terms, dof_mask, padded, per_body, scatter_dofs


def actuation_maps(model: Model, S):
    """Per body W = S (S^T S)^-1 (6, k) = K_J^T: the joint torque acts on the child as W tau."""
    pad = 1.0 - dof_mask(model)
    return jax.vmap(lambda Si, padi: jnp.linalg.solve(Si.T @ Si + jnp.diag(padi), Si.T).T)(S, pad)


def _path1_step(acc, acc_p, x, keep=None):
    """Add joint c (child c, parent p) -- Eqs. (40)-(41) in inverse-free form.

    Mt = (P Psi_c P)^+ = IA - U D^-1 U^T is the subtree's inertia seen through the
    constraint and N = Mt Psi_c = 1 - U D^-1 S^T, so no link inertia is inverted (thin rods
    with a zero axial moment are fine).  With J_p = X^-T I_p X^-1 (link p with the joints
    added so far, in frame c) and R = (J_p + Mt)^-1:
      M_c = Mt R J_p                                         (41)
      ^c n_c = J_p R (Mt c - N g_c) + Mt R X^-T g_p          (40) = M_c (c + X abar_p - abar_c)
    and link p receives X^T Mt X and X^T (N g_c - Mt c)."""
    IA, g = acc
    Ip, gp = acc_p
    X6, Xf, S, pad, c, root, a0 = x
    U = IA @ S
    Dinv = spd_inverse_components(S.T @ U + jnp.diag(pad))
    eye = jnp.eye(6, dtype=IA.dtype)
    Mt = IA - U @ Dinv @ U.T
    N = eye - U @ Dinv @ S.T
    Jp = Xf @ jnp.where(root, eye, Ip) @ Xf.T
    R = spd_inverse_components(Jp + Mt)
    n_root = Mt @ (c + X6 @ a0) - N @ g
    n_part = jnp.where(root, n_root, Jp @ R @ (Mt @ c - N @ g) + Mt @ R @ (Xf @ gp))
    Q = jnp.where(root, 0.0, Mt @ R @ Xf)            # M_c X Psi_p (Psi_p = 0 for the world), (47)
    return (X6.T @ Mt @ X6, X6.T @ (N @ g - Mt @ c)), (n_part, Q, U, Dinv, S.T @ g)


def _path2_step(parent, sib_p, x, keep=None):
    """(47): ^N n_c = ^c n_c + M_c X Psi_p F_later, F_later = the final constraint forces on
    link p from its own joint and the siblings visited before c; then the joint acceleration
    from link c's equation with its final constraint force (S^T lambda = 0) and (13):
    qdd_c = D^-1 (S^T g_c - U^T (X a_p + c)),  a_c = X a_p + c + S qdd_c."""
    lam_p, a_p = parent
    X6, S, n_part, Q, U, Dinv, Stg, c = x
    lam = n_part + Q @ (lam_p + sib_p)
    a1 = X6 @ a_p + c
    qdd = Dinv @ (Stg - U.T @ a1)
    return (lam, a1 + S @ qdd), -X6.T @ lam, (lam, qdd)


@partial(jax.jit, static_argnames=('f_ext_frame',))
def virtual_work(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """Forward dynamics and joint constraint forces by Yamane-Nakamura's O(N) algorithm.

    Args as :func:`jaxdyn.aba`.  Returns (qdd (nv,), wrench (nb, 6)): wrench[j] is the total
    spatial force that joint j's parent exerts on body j (constraint + actuation), in body
    frame j, rows [force; moment].  Joint damping is not applied (the front door does it).
    """
    check_state(model, q=q, qd=qd, tau=tau)
    return _virtual_work(model, q, qd, tau, f_ext, gravity, f_ext_frame)


def _virtual_work(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    joints = joint_transforms(model, q)
    Xup, S = bodies(joints[0]), padded(model, joints[1])
    X6 = jax.vmap(sp.to_matrix)(Xup)
    Xf = jax.vmap(sp.to_force_matrix)(Xup)                     # X^-T
    dt = X6.dtype
    c, pA = bias_terms(model, joints, qd, f_ext, f_ext_frame)
    a0 = gravity_acceleration(model, gravity)
    W = actuation_maps(model, S)
    mask = dof_mask(model)
    pad = 1.0 - mask
    taub = per_body(model, tau) * mask
    Wt = jnp.einsum("kij,kj->ki", W, taub)                     # actuation wrench on the child
    react = jnp.einsum("kji,kj->ki", X6, Wt)                   # X^T W tau: reaction on parent
    g0 = -pA + Wt - sum_over_children(model, react)            # known forces on each link
    I6 = body_inertia_matrices(model)
    root = model.parent < 0
    a0s = jnp.broadcast_to(a0, (model.nb, 6))
    _, ys = backward_sweep_with_parent(_path1_step, model, (I6, g0), (X6, Xf, S, pad, c, root, a0s))
    n_part, Q, U, Dinv, Stg = (y.bodies() for y in ys)
    _, (lam, qdd_b) = forward_sweep_with_siblings(
        _path2_step, model, (jnp.zeros(6, dt), a0), jnp.zeros((model.nb + 1, 6), dt),
        (X6, S, n_part, Q, U, Dinv, Stg, c))
    qdd = scatter_dofs(model, qdd_b.bodies() * mask)
    wrench = lam.bodies() + Wt
    bad = jnp.any(model.armature != 0)                          # see the module docstring
    qdd = jnp.where(bad, jnp.nan, qdd)
    wrench = jnp.where(bad, jnp.nan, wrench)
    return qdd, jnp.concatenate([wrench[:, 3:], wrench[:, :3]], 1)


@register_method("virtual_work")
def _fd_virtual_work(model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    return _virtual_work(model, q, qd, tau, f_ext, gravity, f_ext_frame)[0]
