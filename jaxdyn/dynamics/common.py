"""Shared pieces of the dynamics algorithms: body inertias, gravity, external forces, small SPD
inverses, and joint slots of a uniform width k (for the methods that keep per-body arrays)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from .. import spatial as sp
from ..errors import ShapeError
from ..model.model import Model
from ..model.parameters import body_inertias


def body_inertia_matrices(model: Model):
    """Dense 6x6 spatial inertias (nb, 6, 6, ...) (trailing axes: a model per lane), about
    each body's origin: [[Ibar, [h]x], [[h]x^T, m 1]] (:func:`jaxdyn.spatial.inertia.to_matrix`
    of :func:`jaxdyn.model.parameters.body_inertias`)."""
    return jax.vmap(sp.inertia.to_matrix)(body_inertias(model))


def inertia_init(I, bs):
    """The ``init`` of a backward sweep whose accumulators start at each body's 6 x 6 inertia
    (ABA's articulated, CRBA's composite inertias): a function of a body's inputs x whose last
    entry is its compact :class:`jaxdyn.spatial.Inertia`, giving (6, 6) + ``bs`` (trailing batch
    shape) where the step reads x (:func:`jaxdyn.tree.backward_sweep`), so that no (nb, 6, 6)
    array of them is stored per lane; for a model without bodies, zeros (0, 6, 6) + ``bs``.
    ``I``: the compact inertias of every body (:func:`jaxdyn.model.parameters.body_inertias`)."""
    if I.m.shape[0] == 0:
        return jnp.zeros((0, 6, 6) + bs, I.m.dtype)
    return lambda x: jnp.broadcast_to(sp.inertia.to_matrix(x[-1]), (6, 6) + bs)


def check_gravity(model: Model, gravity=None):
    """Raise ShapeError unless ``gravity`` is None or has shape (3,)."""
    if gravity is not None and jnp.shape(gravity) != (3,):
        raise ShapeError(f"gravity must have shape (3,) (world frame, m/s^2) for model {model.name!r}, "
                         f"got {jnp.shape(gravity)}")


def gravity_acceleration(model: Model, gravity=None):
    """Fictitious base acceleration a0 = -[0; g] (6, ...) (angular-first), which adds gravity."""
    g = model.gravity if gravity is None else gravity
    return jnp.concatenate([jnp.zeros_like(g), -g])


def external_forces(model: Model, f_ext, frame, X0=None):
    """User f_ext (nb, 6, ...) in Pinocchio order [force; moment] -> body-frame [n; f] (nb, 6, ...).

    ``frame="local"``: each row is expressed in its body frame (Pinocchio's rnea/aba fext).
    ``frame="world"``: each row is a spatial force in world coordinates about the world origin
    (``X0``: the world transforms, :func:`jaxdyn.kinematics.world_transforms`).
    """
    if f_ext is None:
        return None
    f = jnp.concatenate([f_ext[:, 3:], f_ext[:, :3]], 1)
    if frame == "local":
        return f
    if frame == "world":
        return jax.vmap(sp.apply_force)(sp.Transform(X0.E[:-1], X0.r[:-1]), f)
    raise ValueError(f"f_ext_frame must be 'local' or 'world', got {frame!r}")


def check_f_ext(model: Model, f_ext, frame):
    """Raise ShapeError / ValueError unless f_ext is None or (nb, 6) and frame is known."""
    if f_ext is not None and jnp.shape(f_ext) != (model.nb, 6):
        raise ShapeError(f"f_ext must have shape (nb, 6) = ({model.nb}, 6) for model {model.name!r}, "
                         f"got {jnp.shape(f_ext)}")
    if frame not in ("local", "world"):
        raise ValueError(f"f_ext_frame must be 'local' or 'world', got {frame!r}")


def spd_inverse_components(D):
    """Inverse of SPD matrices D (n, n, ...) (component-first: the matrix on the leading axes,
    any batch after them), for the small per-body pivots of the tree sweeps (a joint's, at most
    6 x 6), by a Cholesky factorization written out over its
    columns: L[j:, j] = (D[j:, j] - sum_k<j L[j:, k] L[j, k]) / L[j, j], then X = L^-1 row by
    row by forward substitution and D^-1 = X^T X.  Every step is an elementwise operation on
    a column or a row (the batch as its vector lanes): no LAPACK call inside a sweep, but
    O(n^2) vector operations written into the program, a long chain of kernels for XLA to
    compile at every call site (outside the sweeps, :func:`pd_inverse`).  A pivot that is not
    positive (non-PD D) gives NaN."""
    n = D.shape[0]
    if n == 0:
        return D
    nan = jnp.asarray(jnp.nan, D.dtype)
    if n == 1:
        d = D[0, 0]
        return jnp.where(d > 0, 1.0 / jnp.where(d > 0, d, 1.0), nan)[None, None]
    cols = []                                            # cols[j] = L[j:, j]
    for j in range(n):
        v = D[j:, j]
        for k in range(j):
            v = v - cols[k][j - k:] * cols[k][j - k][None]
        cols.append(v / jnp.sqrt(jnp.where(v[0] > 0, v[0], nan))[None])
    eye = jnp.eye(n, dtype=D.dtype).reshape((n, n) + (1,) * (D.ndim - 2))
    rows = []                                            # rows[i] = X[i, :], X = L^-1 (lower)
    for i in range(n):                                   # L[i, :i+1] . X[:i+1, :] = e_i
        r = eye[i]
        for k in range(i):
            r = r - cols[k][i - k][None] * rows[k]
        rows.append(r / cols[i][0][None])
    out = rows[0][:, None] * rows[0][None, :]            # D^-1 = X^T X
    for k in range(1, n):
        out = out + rows[k][:, None] * rows[k][None, :]
    return out


def pd_inverse(D):
    """Inverse of SPD matrices D (..., n, n) by Cholesky (LAPACK), D^-1 = L^-T L^-1; NaN if D is
    not positive definite.  For the operators of the constrained solvers (a few per call); the
    joint pivots inside the tree sweeps use :func:`spd_inverse_components`."""
    L = jnp.linalg.cholesky(D)
    ok = jnp.all(jnp.diagonal(L, axis1=-2, axis2=-1) > 0, axis=-1)[..., None, None]
    Li = jax.scipy.linalg.solve_triangular(L, jnp.broadcast_to(jnp.eye(D.shape[-1], dtype=D.dtype), D.shape),
                                           lower=True)
    return jnp.where(ok, sp.linalg.matmul(jnp.swapaxes(Li, -1, -2), Li), jnp.nan)


def _symbolic_zero(t):
    return isinstance(t, SymbolicZero)


def moving_jvp(fn, primals, tangents):
    """``(fn(*primals), tangent)`` for a ``custom_jvp(..., symbolic_zeros=True)`` rule:
    ``jax.jvp`` with respect to the arguments whose tangent pytree is not entirely symbolic
    zero (others held fixed, so the program holds no derivative with respect to them, e.g.
    the model's parameters in a trajectory's gradient; symbolic zeros inside a moving
    argument become zero arrays).  The tangent is None when no argument moves."""
    def zero(t):
        return all(map(_symbolic_zero, jax.tree_util.tree_leaves(t, is_leaf=_symbolic_zero)))

    def instantiate(t):
        return jnp.zeros(t.aval.shape, t.aval.dtype) if _symbolic_zero(t) else t

    moving = [i for i, t in enumerate(tangents) if not zero(t)]
    if not moving:
        return fn(*primals), None

    def of_moving(*xs):
        a = list(primals)
        for i, x in zip(moving, xs):
            a[i] = x
        return fn(*a)

    dots = tuple(jax.tree_util.tree_map(instantiate, tangents[i], is_leaf=_symbolic_zero) for i in moving)
    return jax.jvp(of_moving, tuple(primals[i] for i in moving), dots)
