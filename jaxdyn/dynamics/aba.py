"""Articulated-body algorithm (Featherstone 2010 Fig. 9; Featherstone RBDA Table 7.1).

``aba`` = pass 1 (velocities, bias terms), pass 2 (articulated inertias IA, pA; U, D, u),
pass 3 (accelerations).  Pass 2 is split so that its tau-independent part (``aba_factor``)
can be reused for many right-hand sides (``minv``).

Singular articulated inertia: D_i = S_i^T IA_i S_i is factored by Cholesky; if it is not
positive definite (e.g. a massless leaf body on a joint) its inverse is NaN (Cholesky of a
non-PD matrix returns NaN in JAX, and a zero 1x1 pivot is mapped to NaN explicitly).  The NaN
reaches every ancestor's articulated inertia, hence the accelerations of the whole tree that
contains body i (all bodies under the same root joint): qdd is NaN on exactly those dofs.
Dofs of other trees stay exact (e.g. the legs of a fixed-base romeo.urdf, whose massless
finger tips make the arms NaN: 43 of 55 dofs); with a floating base there is one tree and
every dof is NaN.  Padded dof slots get a unit pivot and zero acceleration.  The closed
form of one state (:mod:`jaxdyn.dynamics.closed_form`) keeps the rule: one Cholesky
factorization per tree, NaN on the dofs of a tree whose M block is not positive definite.
"""
from __future__ import annotations

from functools import lru_cache, partial

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
from jax.custom_derivatives import SymbolicZero

from .._typing import BodyWrenches, Configuration, Gravity, Tangent
from .. import spatial as sp
from ..kinematics import joint_transforms, world_transforms
from ..model.model import Model, check_state
from ..tree import backward_sweep, forward_sweep
from .batch_aba import aba_batch, aba_lanes, aba_one_state
from . import closed_form
from .rnea import rnea_core
from .aba_steps import acceleration_step, bias_step, inertia_step, velocity_step
from .common import (batched_like, body_inertia_matrices, dof_mask, external_forces, gravity_acceleration,
                     per_body, pivot_addend, scatter_dofs, vmap_axes)
from ..compiled import cpu_jit, exact_products, exact_rule, for_cpu_options, tracing_for


class ABAFactor(NamedTuple):
    """tau-independent part of ABA: per-body Xup (Transform), Xup6 (6x6), S, U = IA S, D (with
    armature; unit on padded slots) and its inverse, IA, and the two products every solve
    reuses: U D^-1 and Ia = IA - U D^-1 U^T (what :func:`aba_steps.inertia_step` returns)."""
    Xup: sp.Transform
    X6: jax.Array     # (nb, 6, 6)
    S: jax.Array      # (nb, 6, k)
    U: jax.Array      # (nb, 6, k)
    D: jax.Array      # (nb, k, k)
    Dinv: jax.Array   # (nb, k, k)
    IA: jax.Array     # (nb, 6, 6) articulated inertias
    UDinv: jax.Array  # (nb, 6, k) U D^-1
    Ia: jax.Array     # (nb, 6, 6) IA - U D^-1 U^T (what the parent receives, in body coordinates)


def aba_factor(model: Model, q) -> ABAFactor:
    """Articulated inertias and joint-space pivots at configuration q (pass 2's
    tau-independent part, :func:`jaxdyn.dynamics.aba_steps.inertia_step`)."""
    Xup, S = joint_transforms(model, q)
    X6 = jax.vmap(sp.to_matrix)(Xup)
    IA, (U, D, Dinv, UDinv, Ia) = backward_sweep(inertia_step, model, body_inertia_matrices(model),
                                                 (Xup.E, Xup.r, S, pivot_addend(model)))
    return ABAFactor(Xup, X6, S, U, D, Dinv, IA[:-1], UDinv, Ia)


def aba_solve(model: Model, fac: ABAFactor, c, pA, tau, a0):
    """Passes 2b and 3 of ABA for given bias terms c, pA (nb, 6), tau (nv,), base accel a0."""
    taub = per_body(model, tau)
    E, r = fac.Xup
    _, u = backward_sweep(bias_step, model, pA, (E, r, fac.S, fac.UDinv, fac.Ia, c, taub))
    _, qddb = forward_sweep(acceleration_step, model, a0, (E, r, fac.S, fac.U, fac.Dinv, u, c))
    return scatter_dofs(model, qddb * dof_mask(model)) + model.v_pad * tau


@cpu_jit(static_argnames=('f_ext_frame',))
def aba(model: Model, q: Configuration, qd: Tangent, tau: Tangent, f_ext: BodyWrenches | None = None,
        gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Forward dynamics qdd = M^-1 (tau - h + J^T f_ext) by the articulated-body algorithm.

    Args as :func:`jaxdyn.rnea`.  Returns qdd (nv,).  Joint damping is not applied here (as in
    Pinocchio's ``aba``); :func:`jaxdyn.forward_dynamics` applies it.

    Derivatives (``jax.jvp``, ``jax.grad``, ``jax.jacfwd``, ...) use an implicit rule instead
    of differentiating the three passes: since RNEA(q, qd, ABA(q, qd, tau)) = tau,

        d qdd = M^-1 (d tau - d RNEA(q, qd, qdd)|_{qdd fixed})

    (the form of Carpentier & Mansard 2018, Sec. IV), where the RNEA differential is taken
    with respect to q, qd, f_ext, gravity and the model's parameters, and M^-1 is applied by
    the same ABA factorization (no velocity, no gravity).  Both are O(n) per direction, so a
    jvp or a vjp costs about one RNEA jvp/vjp plus one ABA solve.
    :func:`aba_unwrapped` is the same function without the rule (autodiff through the scans).

    One f64 state of a model whose topology is known while tracing runs in closed form,
    qdd = M^-1 (tau - h) with M and h from ancestry products and one Cholesky solve per tree
    (:func:`jaxdyn.dynamics.closed_form.aba_closed_form`: a fixed number of operations
    instead of three sweeps of nb steps, the short single call; as close to Pinocchio's
    ``aba`` as Pinocchio's own ``crba`` and a Cholesky solve).  Otherwise (f32, whose solve
    would lose cond(M) eps, or a ``jaxdyn.stack`` member) one state runs the batch-last
    kernel's three sweeps without the batch axis (:func:`jaxdyn.dynamics.batch_aba.aba_one_state`:
    a floating root outside the scan, pass 2 in one sweep).  Both give NaN on exactly the
    dofs of a tree with a singular pivot (module docstring).
    ``jax.vmap(aba)`` over states of one model runs :func:`jaxdyn.aba_batch`'s batch-last
    kernels on one device (a ``custom_vmap`` rule: your program decides the devices, e.g. by
    ``shard_map``).  An eager ``jax.vmap(aba)`` compiles with ``jaxdyn.CPU_OPTIONS``; for its
    full speed on CPU inside your own function, compile that with ``jaxdyn.jit``.
    """
    check_state(model, q=q, qd=qd, tau=tau)
    return _aba_implicit(model, q, qd, tau, f_ext, gravity, f_ext_frame)


def aba_unwrapped(model: Model, q, qd, tau, f_ext=None, gravity=None, f_ext_frame="local"):
    """:func:`aba` without its derivative rule, by the per-state passes (:func:`aba_factor`,
    :func:`velocity_terms`, :func:`aba_solve`): autodiff differentiates them (the reference
    the rule is tested against).  Its products, as jaxdyn's entry points', at
    :data:`jaxdyn.compiled.MATMUL_PRECISION`."""
    check_state(model, q=q, qd=qd, tau=tau)
    with exact_products():
        return _aba_passes(model, q, qd, tau, f_ext, gravity, f_ext_frame)[0]


def _aba_passes(model, q, qd, tau, f_ext, gravity, f_ext_frame):
    """(qdd, the ABA factorization) of one state."""
    fac = aba_factor(model, q)
    c, pA = velocity_terms(model, fac.Xup, fac.S, qd, f_ext, f_ext_frame)
    return aba_solve(model, fac, c, pA, tau, gravity_acceleration(model, gravity)), fac


@partial(jax.custom_jvp, nondiff_argnums=(6,))
def _aba_implicit(model, q, qd, tau, f_ext, gravity, f_ext_frame):
    return _batchable(f_ext_frame, for_cpu_options())(model, q, qd, tau, f_ext, gravity)


@lru_cache(maxsize=None)
def _batchable(f_ext_frame, cpu_options):
    """ABA of one state (:func:`jaxdyn.dynamics.closed_form.aba_closed_form` where
    :func:`jaxdyn.dynamics.closed_form.applies`, else :func:`jaxdyn.dynamics.batch_aba.aba_one_state`:
    the batch-last kernels' sweeps without the batch axis) whose ``vmap`` over states
    of one model runs :func:`jaxdyn.aba_batch` instead of batching every 6x6 product (a
    ``custom_vmap`` rule), and over a batched model (``jaxdyn.stack``) runs
    :func:`jaxdyn.dynamics.batch_aba.aba_lanes` (a model per lane).  Batched gravity and
    world-frame f_ext keep the plain vmap.  Differentiation never reaches this function (the
    custom_jvp rule of :func:`aba`).  ``cpu_options``: :func:`jaxdyn.compiled.for_cpu_options`
    where the call is traced, which the rule traces for (JAX runs it later, outside that call)."""

    @jax.custom_batching.custom_vmap
    def one(model, q, qd, tau, f_ext, gravity):
        fx = None
        if f_ext is not None:
            X0 = world_transforms(model, joint_transforms(model, q)[0]) if f_ext_frame == "world" else None
            fx = external_forces(model, f_ext, f_ext_frame, X0)
        if closed_form.applies(model, jnp.result_type(q, qd, tau)):
            return closed_form.aba_closed_form(model, q, qd, tau, fx, gravity)
        return aba_one_state(model, q, qd, tau, fx, gravity)

    @one.def_vmap
    @exact_rule
    def rule(axis_size, in_batched, model, q, qd, tau, f_ext, gravity):
        leaves = jax.tree_util.tree_leaves
        if any(leaves(in_batched[5])) or (f_ext is not None and f_ext_frame != "local"):
            fn = lambda *a: _aba_passes(*a, f_ext_frame)[0]
            return jax.vmap(fn, in_axes=tuple(vmap_axes(in_batched)))(model, q, qd, tau, f_ext, gravity), True
        full = lambda x, b: batched_like(x, b, axis_size)
        q, qd, tau = (full(x, b) for x, b in zip((q, qd, tau), in_batched[1:4]))
        with tracing_for(cpu_options):
            if any(leaves(in_batched[0])):      # models too (a stack): one model per lane
                model = jax.tree_util.tree_map(full, model, in_batched[0])
                fx = None
                if f_ext is not None:
                    fx = full(f_ext, in_batched[4])
                    fx = jnp.concatenate([fx[..., 3:], fx[..., :3]], -1)   # [force; moment] -> [n; f]
                return aba_lanes(model, q, qd, tau, fx, gravity), True
            fx = None if f_ext is None else full(f_ext, in_batched[4])
            return aba_batch(model, q, qd, tau, f_ext=fx, gravity=gravity, devices=1), True

    return one


def _aba_implicit_jvp(f_ext_frame, primals, tangents):
    """d qdd = M^-1 (d tau - d RNEA|_{qdd fixed}) (see :func:`aba`).  Arguments whose tangent
    is a symbolic zero (typically the model) are left out of the RNEA differential."""
    model, q, qd, tau, f_ext, gravity = primals
    qdd, fac = _aba_passes(model, q, qd, tau, f_ext, gravity, f_ext_frame)
    const = [all(isinstance(t, SymbolicZero) for t in jax.tree_util.tree_leaves(
        d, is_leaf=lambda x: isinstance(x, SymbolicZero))) for d in tangents]
    moving = [i for i in (0, 1, 2, 4, 5) if not const[i]]

    def inverse_dynamics(*xs):
        a = list(primals)
        for i, x in zip(moving, xs):
            a[i] = x
        m, q, qd, _, f, g = a
        tau_b, _ = rnea_core(m, q, qd, qdd, f, g, f_ext_frame)
        return scatter_dofs(m, tau_b) + m.armature * (1.0 - m.v_pad) * qdd

    rhs = jnp.zeros_like(qdd) if const[3] else tangents[3]
    if moving:
        inst = lambda t: jax.tree_util.tree_map(_instantiate, t, is_leaf=lambda x: isinstance(x, SymbolicZero))
        _, drnea = jax.jvp(inverse_dynamics, tuple(primals[i] for i in moving),
                           tuple(inst(tangents[i]) for i in moving))
        rhs = rhs - drnea
    return qdd, minv_apply(model, q, fac, rhs)


def minv_apply(model: Model, q, fac: ABAFactor, b):
    """M(q)^-1 b (nv,) by ABA's passes 2b-3 on the factorization ``fac`` (no velocity, no
    gravity), as a ``lax.custom_linear_solve`` with M symmetric: its transpose is the same
    solve (not the transpose of the scans), and its derivative with respect to q goes through
    the O(n) product M x = RNEA(q, 0, x) without gravity."""
    dt = b.dtype
    zb, z6 = jnp.zeros((model.nb, 6), dt), jnp.zeros(6, dt)

    def matvec(x):
        tau_b, _ = rnea_core(model, q, jnp.zeros_like(x), x, gravity=jnp.zeros(3, dt))
        return scatter_dofs(model, tau_b) + model.armature * (1.0 - model.v_pad) * x + model.v_pad * x

    return lax.custom_linear_solve(matvec, b, lambda _, y: aba_solve(model, fac, zb, zb, y, z6), symmetric=True)


def _instantiate(t):
    """A SymbolicZero tangent as an array of zeros (float0 for integer primals)."""
    if not isinstance(t, SymbolicZero):
        return t
    if t.aval.dtype == jax.dtypes.float0:
        return np.zeros(t.aval.shape, jax.dtypes.float0)
    return jnp.zeros(t.aval.shape, t.aval.dtype)


_aba_implicit.defjvp(exact_rule(_aba_implicit_jvp), symbolic_zeros=True)


def velocity_terms(model: Model, Xup, S, qd, f_ext=None, f_ext_frame="local"):
    """Pass 1 of ABA: per-body velocity-product acceleration c_i = v_i x S_i qd_i and bias force
    pA_i = v_i x* I_i v_i - f_ext_i, both (nb, 6) in body coordinates (angular-first).

    These are Rodriguez-Kreutz's a(k) (2.19) and b(k) - f_ext (2.23) and Yamane-Nakamura's
    velocity terms; every O(n) method shares them.
    """
    dt = Xup.r.dtype
    fx = jnp.zeros((model.nb, 6), dt)
    if f_ext is not None:
        X0 = world_transforms(model, Xup) if f_ext_frame == "world" else None
        fx = external_forces(model, f_ext, f_ext_frame, X0)
    I6 = body_inertia_matrices(model)
    _, (c, pA) = forward_sweep(velocity_step, model, jnp.zeros(6, dt),
                               (Xup.E, Xup.r, S, per_body(model, qd), I6, fx))
    return c, pA
