"""Energy, momentum and center of mass."""
from __future__ import annotations


import jax
import jax.numpy as jnp

from .._typing import Configuration, Tangent
from .. import spatial as sp
from ..kinematics import body_velocities, joint_transforms, world_transforms
from ..model.model import Model, check_state
from ..model.parameters import body_inertias


@jax.jit
def kinetic_energy(model: Model, q: Configuration, qd: Tangent):
    """T = 1/2 sum_i v_i . I_i v_i + 1/2 qd . armature qd."""
    check_state(model, q=q, qd=qd)
    v, _, _, _ = body_velocities(model, q, qd)
    I = body_inertias(model)
    Iv = jax.vmap(sp.inertia.apply)(I, v[:-1])
    return 0.5 * jnp.sum(v[:-1] * Iv) + 0.5 * jnp.sum(model.armature * qd**2)


def _world_coms(model, q):
    Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    R = jnp.swapaxes(X0.E[:-1], -1, -2)
    return jnp.einsum("nij,nj->ni", R, model.com) + X0.r[:-1], X0


@jax.jit
def potential_energy(model: Model, q: Configuration):
    """V = -sum_i m_i g . c_i (world COMs), zero at the world origin (Pinocchio's convention)."""
    check_state(model, q=q)
    c, _ = _world_coms(model, q)
    return -jnp.sum(model.mass * (c @ model.gravity))


def total_mass(model: Model):
    """Total mass of the model (sum over bodies), ().  Stacked models: per robot under vmap."""
    return jnp.sum(model.mass)


@jax.jit
def center_of_mass(model: Model, q):
    """World position of the system's center of mass (3,)."""
    c, _ = _world_coms(model, q)
    return jnp.sum(model.mass[:, None] * c, 0) / jnp.sum(model.mass)


@jax.jit
def spatial_momentum(model: Model, q, qd):
    """Total spatial momentum in world coordinates about the world origin, [linear; angular]."""
    check_state(model, q=q, qd=qd)
    v, _, Xup, _ = body_velocities(model, q, qd)
    X0 = world_transforms(model, Xup)
    I = body_inertias(model)
    hb = jax.vmap(sp.inertia.apply)(I, v[:-1])
    X = sp.Transform(X0.E[:-1], X0.r[:-1])
    h0 = jnp.sum(jax.vmap(sp.apply_force_T)(X, hb), 0)
    return jnp.concatenate([h0[3:], h0[:3]])


@jax.jit
def centroidal_momentum(model: Model, q, qd):
    """Spatial momentum about the center of mass, world axes, [linear; angular] (Pinocchio hg)."""
    h = spatial_momentum(model, q, qd)
    c = center_of_mass(model, q)
    return jnp.concatenate([h[:3], h[3:] - jnp.cross(c, h[:3])])
