"""How jaxdyn runs a batch: the batch-last layout, chunks, and the public batchable entry
points of the core algorithms.  The algorithms never import this module.

Every core algorithm (:func:`jaxdyn.dynamics.aba.aba_passes`, ``rnea_passes``,
``crba_passes``, ...) is written once, component-first (:mod:`jaxdyn.spatial.linalg`): it
computes one state when its arrays have no trailing axes and a whole chunk of states when
every array carries one trailing batch axis.  ``jax.vmap`` of a plain function would put the
batch *first* and turn every 6 x 6 product into a batched ``dot``; the entry points here
carry a ``custom_vmap`` rule (:func:`batchable`) that runs the same code batch-last instead,
with C states on the minor axis, so that each product is a vectorized loop over C
(``jax.jit(jax.vmap(aba))`` ~10x faster than a plain vmap of the same passes on a CPU).

On the CPU the rule splits the batch into n chunks of C states (chunk i holds the states
c n + i, c = 0..C-1), run one after the other by a ``lax.fori_loop`` so that a chunk's arrays
stay in cache: each chunk gathers its lanes and moves them batch-last itself, and writes its
results batch-first into the output (a layout change of the whole batch outside the loop
would stream every array through memory twice).  The rule passes the algorithm a fusion
barrier ``keep``: XLA:CPU fuses a product into every consumer and recomputes it there;
``keep(x)``, a ``lax.cond`` on the chunk counter that XLA cannot fold, makes each named
quantity of a step (U, D^-1, ...) be computed once (the steps keep what many products read;
a product of a few multiplies is cheaper recomputed than kept).  On other backends the batch
is one chunk and ``keep`` is the identity (a GPU runs the lanes in parallel).  The choice is ``lax.platform_dependent``,
made where the program is lowered.  Arguments may be sharded along the batch axis
(``jax.sharding.NamedSharding``): a chunk takes every n-th state, so the shards stay on their
devices.  Over the lanes of a :class:`jaxdyn.Stack` built with ``per_member=True`` the rule
runs the lanes of each member on the member's own tree (:func:`run_members`).
"""
from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._typing import BodyWrenches, Configuration, Gravity, JointMatrix, Tangent
from .dynamics.aba import aba_jvp, aba_passes
from .dynamics.common import check_f_ext, check_gravity, moving_jvp
from .dynamics.crba import crba_passes
from .dynamics.derivative_sweeps import aba_derivatives_terms, rnea_derivatives_terms
from .dynamics.derivatives import METHODS as DERIVATIVE_METHODS, state_jacobians
from .dynamics.minv import minv_aba
from .dynamics.registry import FD_METHODS, MINV_METHODS
from .dynamics.rnea import rnea_passes
from .errors import ArgumentError
from .model.model import PARAM_FIELDS, Model, cast, check_state, state_dtype
from .stack import Stack
from .tree import same

tmap = jax.tree_util.tree_map


def barrier(i):
    """The fusion barrier of chunk ``i`` (a traced counter): x as a ``lax.cond`` result."""
    def keep(x):
        if callable(x):          # computed inside the branch: the cond's result is written once
            shapes = jax.eval_shape(x)
            return lax.cond(i >= 0, x, lambda: tmap(lambda s: jnp.zeros(s.shape, s.dtype), shapes))
        return lax.cond(i >= 0, lambda x: x, lambda x: tmap(jnp.zeros_like, x), x)
    return keep


def run_batch(core, B, in_batched, args, chunk):
    """``core(*args, keep=...)`` for a batch of B: the leaves of ``args`` flagged in
    ``in_batched`` have a leading batch axis B, the others are shared.  In a chunk of C lanes
    every batched leaf has a trailing axis C; a shared leaf of the model (``args[0]``) gets a
    trailing axis 1, and the other shared arguments are broadcast to C (so that quantities
    computed from different states have one shape).  Returns core's output pytree with a
    leading axis B on every leaf."""
    leaves, tdef = jax.tree_util.tree_flatten(args)
    flags = jax.tree_util.tree_leaves(in_batched)
    n_model = len(jax.tree_util.tree_leaves(args[0]))

    def call(lanes, C, keep):
        """core on batch-last ``lanes`` (the batched leaves, (..., C)) and the shared leaves."""
        it = iter(lanes)
        a = [next(it) if f else (x[..., None] if k < n_model else jnp.broadcast_to(x[..., None], x.shape + (C,)))
             for k, (x, f) in enumerate(zip(leaves, flags))]
        out = core(*jax.tree_util.tree_unflatten(tdef, a), keep=keep)
        return tmap(lambda y: jnp.broadcast_to(y, y.shape[:-1] + (C,)), out)

    def cpu(*xs):
        C = min(chunk, B)
        n = -(-B // C)
        rows = n * C

        def grid(x):                                # (B, ...) -> (C, n, ...): chunk i is [:, i], lanes c n + i
            if rows > B:
                x = jnp.concatenate([x, jnp.broadcast_to(x[:1], (rows - B,) + x.shape[1:])])
            return x.reshape((C, n) + x.shape[1:])
        batched = [grid(x) for x, f in zip(xs, flags) if f]

        @jax.jit            # traced once: for its output shapes, then reused inside the loop
        def chunk_out(i, batched):
            """Chunk i's outputs, batch-first (C, ...): the layout changes happen per chunk, in cache."""
            lanes = [jnp.moveaxis(lax.dynamic_index_in_dim(x, i, 1, keepdims=False), 0, -1) for x in batched]
            return tmap(lambda y: jnp.moveaxis(y, -1, 0), call(lanes, C, barrier(i)))

        def body(i, acc):
            return tmap(lambda a, y: lax.dynamic_update_index_in_dim(a, y, i, 1), acc, chunk_out(i, batched))
        shapes = jax.eval_shape(chunk_out, 0, batched)       # the loop's index type: a weak int
        acc = tmap(lambda s: jnp.zeros((C, n) + s.shape[1:], s.dtype), shapes)
        out = lax.fori_loop(0, n, body, acc)
        return tmap(lambda y: y.reshape((rows,) + y.shape[2:])[:B], out)

    def whole(*xs):
        out = call([jnp.moveaxis(x, 0, -1) for x, f in zip(xs, flags) if f], B, same)
        return tmap(lambda y: jnp.moveaxis(y, -1, 0), out)

    if B <= chunk:                  # one chunk: nothing to loop over, and no barrier to keep
        return whole(*leaves)
    return lax.platform_dependent(*leaves, cpu=cpu, default=whole)


def run_members(core, layout, B, in_batched, args, chunk):
    """:func:`run_batch` over the B lanes of a per-member :class:`jaxdyn.Stack` (``args[0]``,
    every leaf batched): the lanes of each member run ``core`` on the member's own tree, in
    the member's layout, and their results are written into the union's layout.
    ``layout = (kinds, rest)``: the kind of each argument after the model ("q", "v", "b" for
    (nb, ...) body rows, None for data that is not per dof or body), and ``rest(stack,
    *args)``, the union-layout result on the lanes' inactive dofs (each output (B, nv) or
    (B, nv, nv)).  A lane with mass or a force on a body outside its member gives NaN."""
    st, (kinds, rest) = args[0], layout
    if len(st.lane_members) != B:
        raise ArgumentError(f"{st.name}: vmapped over {B} lanes, but lane_members names {len(st.lane_members)}; "
                            "build the lanes with Stack.lanes")
    lane_of = np.asarray(st.lane_members)
    out, bad = rest(st, *args[1:]), jnp.zeros(B, bool)
    for j in np.unique(lane_of):
        idx, u = np.flatnonzero(lane_of == j), np.asarray(st.body_maps[j])
        dofs = {k: st.member_dofs(j, k) for k in ("q", "v")}
        outside = np.setdiff1d(np.arange(st.nb), u)
        model = st.member_model(j, {k: getattr(st, k)[idx] for k in PARAM_FIELDS})
        xs = [x[idx] if f else x for x, f in zip(args[1:], in_batched[1:])]
        moved = jnp.any(st.mass[idx][:, outside] != 0, 1)
        for x, k in zip(xs, kinds):
            if k == "b" and x is not None:
                moved = moved | jnp.any(jnp.broadcast_to(x[..., outside, :], (len(idx), len(outside), 6)) != 0, (1, 2))
        bad = bad.at[idx].set(moved)
        if model.nv == 0:               # a member without joints: every dof of its lanes is inactive
            continue
        mine = [x[..., dofs[k]] if k in ("q", "v") and x is not None else
                x[..., u, :] if k == "b" and x is not None else x for x, k in zip(xs, kinds)]
        res = run_batch(core, len(idx), (tmap(lambda _: True, model), *in_batched[1:]), (model, *mine), chunk)
        v = dofs["v"]
        out = tmap(lambda y, r: y.at[(idx[:, None], v) if y.ndim == 2 else (idx[:, None, None], v[:, None], v)].set(r),
                   out, res)
    return tmap(lambda y: jnp.where(bad.reshape((B,) + (1,) * (y.ndim - 1)), jnp.nan, y), out)


def batchable(core, chunk, layout):
    """``core`` (``core(*args, keep=same)``) as a function of one state whose ``jax.vmap``
    runs :func:`run_batch` in chunks of ``chunk`` states on the CPU, or :func:`run_members`
    (with ``layout``) over the lanes of a per-member :class:`jaxdyn.Stack`.  One state runs
    as a batch of one lane (every argument with a trailing axis 1): the products are then the
    elementwise ones that XLA fuses into a few kernels per body (on one core: panda's ``aba``
    44 µs per call against 58 with a ``dot`` per product)."""
    @jax.custom_batching.custom_vmap
    def f(*args):
        out = core(*tmap(lambda x: x[..., None], args))
        return tmap(lambda y: y[..., 0], out)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        if isinstance(args[0], Stack) and args[0].per_member and all(jax.tree_util.tree_leaves(in_batched[0])):
            out = run_members(core, layout, axis_size, in_batched, args, chunk)
        else:
            out = run_batch(core, axis_size, in_batched, args, chunk)
        return out, tmap(lambda _: True, out)
    return f


def _diag(st, p):
    """diag(armature ** p) of every lane of a stack, (B, nv, nv)."""
    return jnp.where(jnp.eye(st.nv, dtype=bool)[None], st.armature[:, None, :] ** p, 0)


def _lanes(st, x):
    """A dof vector (nv,) or (B, nv) as (B, nv), one row per lane of a stack."""
    return jnp.broadcast_to(x, st.armature.shape)


# ------------------------------------------------------------------------- entry points

def _prepare(model, **states):
    """Shape checks, then the model and states in the states' common floating dtype."""
    check_state(model, **states)
    dt = state_dtype(*states.values())
    return cast(model, dt), [jnp.asarray(x, dt) for x in states.values()]


@lru_cache(maxsize=None)
def _aba(f_ext_frame):
    core = lambda m, q, qd, tau, f, g, keep=same: aba_passes(m, q, qd, tau, f, g, f_ext_frame, keep)
    fn = jax.custom_jvp(batchable(core, 128, (("q", "v", "v", "b", None), lambda st, q, qd, tau, f, g: _lanes(st, tau) / st.armature)))
    fn.defjvp(partial(aba_jvp, f_ext_frame), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("f_ext_frame",))
def aba(model: Model, q: Configuration, qd: Tangent, tau: Tangent, f_ext: BodyWrenches | None = None,
        gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Forward dynamics qdd = M^-1 (tau - h + J^T f_ext) (nv,) by the articulated-body
    algorithm (:mod:`jaxdyn.dynamics.aba`).

    Args:
      q (nq,), qd (nv,), tau (nv,): configuration, velocity, joint torques.
      f_ext: optional (nb, 6) external spatial forces on the bodies, rows [force; moment]
        (Pinocchio order), in each body's frame (``f_ext_frame="local"``, Pinocchio's
        convention) or in world coordinates about the world origin (``"world"``).
      gravity: optional (3,) world gravity overriding ``model.gravity``.
    Joint damping is not applied (as in Pinocchio's ``aba``); :func:`forward_dynamics`
    applies it.  Derivatives use the implicit rule of
    :func:`jaxdyn.dynamics.aba.aba_jvp`; ``jax.vmap`` runs batch-last chunks
    (:mod:`jaxdyn.batching`).
    """
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if model.nv == 0:
        return jnp.zeros_like(tau)
    return _aba(f_ext_frame)(model, q, qd, tau, f_ext, gravity)


@lru_cache(maxsize=None)
def _rnea(f_ext_frame):
    core = lambda m, q, qd, qdd, f, g, keep=same: rnea_passes(m, q, qd, qdd, f, g, f_ext_frame, keep)[0]
    fn = jax.custom_jvp(batchable(core, 128, (("q", "v", "v", "b", None), lambda st, q, qd, qdd, f, g: st.armature * _lanes(st, qdd))))
    fn.defjvp(_autodiff_rule(core, tie=False), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("f_ext_frame",))
def rnea(model: Model, q: Configuration, qd: Tangent, qdd: Tangent, f_ext: BodyWrenches | None = None,
         gravity: Gravity | None = None, f_ext_frame="local") -> Tangent:
    """Inverse dynamics tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext (nv,), including
    ``armature * qdd``, by the recursive Newton-Euler algorithm (:mod:`jaxdyn.dynamics.rnea`).
    Arguments as :func:`aba`."""
    model, (q, qd, qdd) = _prepare(model, q=q, qd=qd, qdd=qdd)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if model.nv == 0:
        return jnp.zeros_like(qdd)
    return _rnea(f_ext_frame)(model, q, qd, qdd, f_ext, gravity)


@lru_cache(maxsize=None)
def _crba():
    core = lambda m, q, keep=same: crba_passes(m, q, keep)
    fn = jax.custom_jvp(batchable(core, 32, (("q",), lambda st, q: _diag(st, 1))))
    fn.defjvp(_autodiff_rule(core, tie=False), symbolic_zeros=True)
    return fn


@jax.jit
def crba(model: Model, q: Configuration) -> JointMatrix:
    """Joint-space inertia matrix M(q) (nv, nv), symmetric, armature on the diagonal, by the
    composite-rigid-body algorithm (:mod:`jaxdyn.dynamics.crba`)."""
    model, (q,) = _prepare(model, q=q)
    if model.nv == 0:
        return jnp.zeros((0, 0), q.dtype)
    return _crba()(model, q)


def _tied(out, primals):
    """``out`` made to depend on every float leaf of ``primals`` (a select of two equal values,
    which XLA folds away): under ``jax.vmap`` a derivative rule's outputs are then batched like
    the ``custom_vmap`` rule's, which batches every output."""
    floats = [a for a in jax.tree_util.tree_leaves(primals) if jnp.issubdtype(jnp.result_type(a), jnp.floating)]
    p = jnp.isnan(sum(jnp.sum(a).astype(jax.tree_util.tree_leaves(out)[0].dtype) for a in floats))
    return tmap(lambda a: jnp.where(p, a, a), out)


def _autodiff_rule(core, tie=True):
    """A ``custom_jvp(..., symbolic_zeros=True)`` rule differentiating ``core`` (one state)
    itself, with respect to the arguments that move (:func:`jaxdyn.dynamics.common.moving_jvp`);
    ``tie``: outputs batched like the ``custom_vmap`` rule's (:func:`_tied`)."""
    def rule(primals, tangents):
        out, tan = moving_jvp(core, primals, tangents)
        if tan is None:
            tan = tmap(jnp.zeros_like, out)
        return (_tied(out, primals) if tie else out), tan
    return rule


@lru_cache(maxsize=None)
def _minv():
    core = lambda m, q, keep=same: minv_aba(m, q, keep)
    fn = jax.custom_jvp(batchable(core, 32, (("q",), lambda st, q: _diag(st, -1))))
    fn.defjvp(_autodiff_rule(core), symbolic_zeros=True)
    return fn


@partial(jax.jit, static_argnames=("method",))
def minv(model: Model, q: Configuration, method="aba") -> JointMatrix:
    """M(q)^-1 (nv, nv), symmetric.  ``method``: "aba" (the articulated-body factorization
    applied to every unit vector, :mod:`jaxdyn.dynamics.minv`), "cholesky" (CRBA and one
    Cholesky factorization per tree) or "operator" (Rodriguez and Kreutz's innovations
    inverse, :func:`jaxdyn.operators.minv_operator`).  A tree with a singular pivot (a massless
    leaf on a joint) gives NaN on its own rows and columns with every method."""
    model, (q,) = _prepare(model, q=q)
    if method not in MINV_METHODS:
        raise ArgumentError(f"unknown minv method {method!r}; available: {tuple(sorted(MINV_METHODS))}")
    if model.nv == 0:
        return jnp.zeros((0, 0), q.dtype)
    if method == "aba":
        return _minv()(model, q)
    return MINV_METHODS[method](model, q)


@partial(jax.jit, static_argnames=("method", "f_ext_frame"))
def forward_dynamics(model: Model, q: Configuration, qd: Tangent, tau: Tangent, method="aba",
                     f_ext: BodyWrenches | None = None, gravity: Gravity | None = None,
                     f_ext_frame="local") -> Tangent:
    """Joint accelerations qdd (nv,) under torques tau with the model's joint damping,
    tau_eff = tau - damping * qd (Coulomb ``model.friction`` is not applied: a discontinuous
    force that needs a complementarity or event solver, as in Pinocchio's ``aba``).  ``method``: "aba" (:func:`aba`), "crba" (CRBA and a Cholesky
    solve per tree) or one of Saha's and Rodriguez-Kreutz's and Yamane-Nakamura's methods
    (:func:`methods`); every method returns the same numbers to round-off."""
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    check_gravity(model, gravity)
    check_f_ext(model, f_ext, f_ext_frame)
    if method not in FD_METHODS:
        raise ArgumentError(f"unknown forward-dynamics method {method!r}; available: {methods()}")
    tau = tau - model.damping * qd
    if model.nv == 0:
        return jnp.zeros_like(tau)
    if method == "aba":
        return _aba(f_ext_frame)(model, q, qd, tau, f_ext, gravity)
    return FD_METHODS[method](model, q, qd, tau, f_ext, gravity, f_ext_frame)


def methods():
    """Names accepted by ``forward_dynamics(method=...)``."""
    return tuple(sorted(FD_METHODS))


def minv_methods():
    """Names accepted by ``minv(method=...)``."""
    return tuple(sorted(MINV_METHODS))


@lru_cache(maxsize=None)
def _derivatives(fn):
    terms = aba_derivatives_terms if fn == "aba" else rnea_derivatives_terms
    core = lambda m, q, qd, x, keep=same: terms(m, q, qd, x, keep=keep)
    p = -1 if fn == "aba" else 1                   # M^-1 or M on the inactive dofs
    def rest(st, q, qd, x):
        d = _diag(st, p)
        return jnp.zeros_like(d), jnp.zeros_like(d), d
    f = jax.custom_jvp(batchable(core, 32, (("q", "v", "v"), rest)))
    f.defjvp(_autodiff_rule(core), symbolic_zeros=True)
    return f


def _check_method(method):
    if method not in DERIVATIVE_METHODS:
        raise ArgumentError(f"method must be one of {DERIVATIVE_METHODS}, got {method!r}")


@partial(jax.jit, static_argnames=("method",))
def rnea_derivatives(model: Model, q: Configuration, qd: Tangent, qdd: Tangent,
                     method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dtau_dq, dtau_dqd, M), each (nv, nv), of tau = RNEA(q, qd, qdd) (Pinocchio's
    ``computeRNEADerivatives``: dtau_dq in the tangent space at q; gravity included, joint
    damping not).  ``method``: "analytic" (Carpentier and Mansard 2018,
    :mod:`jaxdyn.dynamics.derivatives`) or "autodiff" (reverse mode through :func:`rnea`)."""
    model, (q, qd, qdd) = _prepare(model, q=q, qd=qd, qdd=qdd)
    _check_method(method)
    if model.nv == 0:
        return (jnp.zeros((0, 0), q.dtype),) * 3
    if method == "analytic":
        return _derivatives("rnea")(model, q, qd, qdd)
    dq, dv = state_jacobians(lambda qq, vv: rnea(model, qq, vv, qdd), model, q, qd)
    return dq, dv, crba(model, q)


@partial(jax.jit, static_argnames=("method",))
def aba_derivatives(model: Model, q: Configuration, qd: Tangent, tau: Tangent,
                    method="analytic") -> tuple[JointMatrix, JointMatrix, JointMatrix]:
    """(dqdd_dq, dqdd_dqd, Minv), each (nv, nv), of qdd = ABA(q, qd, tau) (Pinocchio's
    ``computeABADerivatives``; dqdd_dtau = Minv; no joint damping).  ``method``: "analytic"
    (-M^-1 (d tau / d q, d tau / d qd) at qdd = ABA(q, qd, tau), Carpentier and Mansard 2018)
    or "autodiff" (reverse mode through :func:`aba`)."""
    model, (q, qd, tau) = _prepare(model, q=q, qd=qd, tau=tau)
    _check_method(method)
    if model.nv == 0:
        return (jnp.zeros((0, 0), q.dtype),) * 3
    if method == "analytic":
        return _derivatives("aba")(model, q, qd, tau)
    dq, dv = state_jacobians(lambda qq, vv: aba(model, qq, vv, tau), model, q, qd)
    return dq, dv, minv(model, q)


@jax.jit
def bias_forces(model: Model, q: Configuration, qd: Tangent, gravity: Gravity | None = None) -> Tangent:
    """h(q, qd) = C(q, qd) qd + g(q) (Pinocchio's ``nonLinearEffects``), (nv,)."""
    return rnea(model, q, qd, jnp.zeros_like(qd), gravity=gravity)


@jax.jit
def gravity_torques(model: Model, q: Configuration, gravity: Gravity | None = None) -> Tangent:
    """g(q), the generalized gravity (Pinocchio's ``computeGeneralizedGravity``), (nv,)."""
    z = jnp.zeros(model.nv, jnp.result_type(q))
    return rnea(model, q, z, z, gravity=gravity)
