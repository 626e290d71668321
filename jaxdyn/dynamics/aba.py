"""Articulated-body algorithm (Featherstone 2008, Table 7.1; Featherstone 2010, Fig. 9).

``aba`` = pass 1 (velocities v, velocity-product accelerations c, bias forces pA), pass 2
(articulated inertias IA and joint-space pivots U, D: :func:`aba_factor`, independent of tau),
pass 2b (bias forces pa and u) and pass 3 (accelerations): :func:`aba_solve`.  The split lets
one factorization serve many right-hand sides (M^-1, the derivative rule).  :func:`aba_factored`
(what ``aba`` runs) does passes 2 and 2b in one sweep and returns the factorization with qdd.

Every step is written once, component-first (:mod:`jaxdyn.spatial.linalg`), for one state and
for a batch-last chunk of states (:mod:`jaxdyn.vmap_rule`, which passes a fusion barrier as
``keep``).  Steps handle one body of a known joint type (:mod:`jaxdyn.tree`), so S, U, D have
exactly that joint's nv columns.

Singular articulated inertia: D_i = S_i^T IA_i S_i + armature is inverted by an unrolled
Cholesky factorization that gives NaN where D_i is not positive definite (e.g. a massless leaf
body on a joint).  The NaN reaches every ancestor's articulated inertia, hence the
accelerations of the whole tree that contains body i (all bodies under the same root joint):
qdd is NaN on exactly those dofs, and exact on the dofs of other trees.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import lax
from jax.custom_derivatives import SymbolicZero

from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..model.model import Model
from ..model.parameters import body_inertias
from ..spatial.linalg import eye_like, mm, mv, tr
from ..tree import PerRun, backward_sweep, forward_sweep, per_run, same
from .common import (external_forces, gravity_acceleration, inertia_init, moving_jvp,
                     spd_inverse_components)
from .rnea import rnea_passes


def velocity_step(v_p, x, keep=same):
    """Pass 1: v = Xup v_parent + S qd;  c = v x (S qd);  pA = v x* (I v) - f_ext.
    x = (E, r, S, qd (nv,), I (:class:`jaxdyn.spatial.Inertia`), f_ext (6,)).  Returns (v, (c, pA))."""
    E, r, S, qd, I, fx = x
    vJ = mv(S, qd)
    v = keep(sp.apply_motion(sp.Transform(E, r), v_p) + vJ)
    return v, (sp.cross_motion(v, vJ), sp.cross_force(v, keep(mv(sp.inertia.to_matrix(I), v))) - fx)


def inertia_step(IA, x, keep=same):
    """Pass 2: U = IA S;  D = S^T U + armature;  Ia = IA - U D^-1 U^T;  the parent receives
    Xup^T Ia Xup.  x = (E, r, S, armature (nv,), ...).  Returns (Xup^T Ia Xup, (U, D^-1, U D^-1, Ia))."""
    E, r, S, arm = x[:4]
    U = keep(mm(IA, S))
    D = mm(tr(S), U) + arm[:, None] * eye_like(S.shape[1], U)
    Dinv = keep(spd_inverse_components(D))
    UDinv = mm(U, Dinv)
    Ia = IA - mm(UDinv, tr(U))
    return sp.translate_congruence(r, keep(sp.rotate_congruence(E, Ia))), (U, Dinv, UDinv, Ia)


def bias_step(pA, x, keep=same):
    """Pass 2b: u = tau - S^T pA;  pa = pA + Ia c + U D^-1 u;  the parent receives Xup^T pa.
    x = (E, r, S, U D^-1, Ia, c, tau (nv,)).  Returns (Xup^T pa, u)."""
    E, r, S, UDinv, Ia, c, tau = x
    u = keep(tau - mv(tr(S), pA))
    pa = keep(pA + mv(Ia, c) + mv(UDinv, u))
    return sp.apply_force_T(sp.Transform(E, r), pa), u


def acceleration_step(a_p, x, keep=same):
    """Pass 3: a' = Xup a_parent + c;  qdd = D^-1 (u - U^T a');  a = a' + S qdd.
    x = (E, r, S, U, D^-1, u, c).  Returns (a, qdd)."""
    E, r, S, U, Dinv, u, c = x
    a1 = keep(sp.apply_motion(sp.Transform(E, r), a_p) + c)
    qdd = keep(mv(Dinv, u - mv(tr(U), a1)))
    return a1 + mv(S, qdd), qdd


class ABAFactor(NamedTuple):
    """The tau-independent part of ABA at q: Xup (E (nb, 3, 3), r (nb, 3)), S, and per body
    U = IA S, D^-1, U D^-1 and Ia = IA - U D^-1 U^T (:class:`jaxdyn.tree.PerRun`), and the
    articulated inertias IA (nb, 6, 6)."""
    Xup: sp.Transform
    S: PerRun
    U: PerRun
    Dinv: PerRun
    UDinv: PerRun
    Ia: PerRun
    IA: jnp.ndarray


def aba_factor(model: Model, Xup, S, keep=same) -> ABAFactor:
    """Articulated inertias and joint-space pivots (pass 2) from the joint transforms."""
    I = body_inertias(model)
    bs = jnp.broadcast_shapes(I.m.shape[1:], *(r.shape[2:] for r in Xup.r))
    IA, (U, Dinv, UDinv, Ia) = backward_sweep(inertia_step, model, inertia_init(I, bs),
                                              (Xup.E, Xup.r, S, per_run(model, model.armature), I), keep)
    return ABAFactor(Xup, S, U, Dinv, UDinv, Ia, IA[:-1])


def velocity_terms(model: Model, Xup, S, qd, fx=None, keep=same):
    """Pass 1: per body c = v x S qd and pA = v x* I v - f_ext (:class:`jaxdyn.tree.PerRun` s of
    (n, 6, ...)), body coordinates.  These are Rodriguez and Kreutz's a(k) (2.19) and b(k) - f_ext (2.23);
    every O(n) method shares them.  ``fx``: [n; f] (nb, 6, ...) in the body frames, or None."""
    bs = jnp.broadcast_shapes(qd.shape[1:], *(r.shape[2:] for r in Xup.r))
    v0 = jnp.zeros((6,) + bs, qd.dtype)
    fx = jnp.zeros((model.nb, 6) + bs, qd.dtype) if fx is None else fx
    _, ys = forward_sweep(velocity_step, model, v0,
                          (Xup.E, Xup.r, S, per_run(model, qd), body_inertias(model), fx), keep)
    return ys


def aba_solve(model: Model, fac: ABAFactor, c, pA, tau, a0, keep=same):
    """Passes 2b and 3 on a factorization: bias terms c (nb, 6, ...) or
    :class:`jaxdyn.tree.PerRun`, pA (nb, 6, ...), tau (nv, ...), base acceleration a0 (6, ...)
    -> qdd (nv, ...)."""
    E, r = fac.Xup
    _, u = backward_sweep(bias_step, model, pA,
                          (E, r, fac.S, fac.UDinv, fac.Ia, c, per_run(model, tau)), keep)
    _, qdd = forward_sweep(acceleration_step, model, a0,
                           (E, r, fac.S, fac.U, fac.Dinv, u, c), keep)
    return qdd.dofs() if model.nv else jnp.zeros_like(tau)


def articulated_step(acc, x, keep=same):
    """Pass 2 and 2b of one body together (what :func:`aba_factored` runs): ``acc`` = (IA, pA),
    x = (E, r, S, armature, c, tau, ...).  Returns ((Xup^T Ia Xup, Xup^T pa), (U, D^-1, U D^-1,
    Ia, u))."""
    IA, pA = acc
    E, r, S, arm, c, tau = x[:6]
    IAp, (U, Dinv, UDinv, Ia) = inertia_step(IA, (E, r, S, arm), keep)
    pAp, u = bias_step(pA, (E, r, S, UDinv, Ia, c, tau), keep)
    return (IAp, pAp), (U, Dinv, UDinv, Ia, u)


def aba_factored(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local", keep=same):
    """(qdd, fac): qdd (nv, ...) of one state or a batch-last chunk (every argument with the
    same number of trailing batch axes) and the :class:`ABAFactor` it was solved with, for
    rules that reuse the factorization; f_ext (nb, 6, ...) Pinocchio order [force; moment],
    in ``f_ext_frame`` ("local": each body's frame, "world").  Passes 2 and 2b run in one
    sweep (:func:`articulated_step`); a caller that uses only qdd lets XLA drop the rest."""
    Xup, S = joint_transforms(model, q, keep)
    fx = None
    if f_ext is not None:
        X0 = world_transforms(model, Xup) if f_ext_frame == "world" else None
        fx = external_forces(model, f_ext, f_ext_frame, X0)
    c, pA = velocity_terms(model, Xup, S, qd, fx, keep)
    a0 = gravity_acceleration(model, gravity)
    a0 = jnp.broadcast_to(a0, (6,) + jnp.broadcast_shapes(a0.shape[1:], q.shape[1:], *(r.shape[2:] for r in Xup.r)))
    I = body_inertias(model)
    own = inertia_init(I, a0.shape[1:])                          # IA_i starts at I_i, pA_i at pass 1's
    (IA, _), (U, Dinv, UDinv, Ia, u) = backward_sweep(
        articulated_step, model, lambda x: (own(x), x[6]),
        (Xup.E, Xup.r, S, per_run(model, model.armature), c, per_run(model, tau), pA, I), keep)
    _, qdd = forward_sweep(acceleration_step, model, a0,
                           (Xup.E, Xup.r, S, U, Dinv, u, c), keep)
    return qdd.dofs(), ABAFactor(Xup, S, U, Dinv, UDinv, Ia, IA[:-1])


def aba_passes(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local", keep=same):
    """qdd (nv, ...) of :func:`aba_factored`."""
    return aba_factored(model, q, qd, tau, f_ext, gravity, f_ext_frame, keep)[0]


def minv_apply(model: Model, q, fac: ABAFactor, b):
    """M(q)^-1 b (nv,) by passes 2b and 3 on the factorization ``fac`` (no velocity, no
    gravity), as a ``lax.custom_linear_solve`` with M symmetric: its transpose is the same
    solve (not the transpose of the scans), and its derivative with respect to q goes through
    the O(n) product M x = RNEA(q, 0, x) without gravity."""
    zb, z6 = jnp.zeros((model.nb, 6), b.dtype), jnp.zeros(6, b.dtype)

    def matvec(x):
        return rnea_passes(model, q, jnp.zeros_like(x), x, gravity=jnp.zeros(3, b.dtype))[0]

    return lax.custom_linear_solve(matvec, b, lambda _, y: aba_solve(model, fac, zb, zb, y, z6), symmetric=True)


def aba_jvp(f_ext_frame, primals, tangents):
    """The derivative of qdd = ABA(model, q, qd, tau, f_ext, gravity) without differentiating
    the passes (Carpentier and Mansard 2018, Sec. IV): since RNEA(q, qd, ABA(q, qd, tau)) = tau,

        d qdd = M^-1 (d tau - d RNEA(q, qd, qdd)|_{qdd fixed}),

    the RNEA differential taken with respect to q, qd, f_ext, gravity and the model's
    parameters (those whose tangent is not a symbolic zero), and M^-1 applied by the same ABA
    factorization (:func:`minv_apply`).  Both are O(n) per direction."""
    model, q, qd, tau, f_ext, gravity = primals
    qdd, fac = aba_factored(model, q, qd, tau, f_ext, gravity, f_ext_frame)
    inverse_dynamics = lambda m, q, qd, f, g: rnea_passes(m, q, qd, qdd, f, g, f_ext_frame)[0]
    _, drnea = moving_jvp(inverse_dynamics, (model, q, qd, f_ext, gravity), tangents[:3] + tangents[4:])
    rhs = jnp.zeros_like(qdd) if isinstance(tangents[3], SymbolicZero) else tangents[3]
    if drnea is not None:
        rhs = rhs - drnea
    return qdd, minv_apply(model, q, fac, rhs)
