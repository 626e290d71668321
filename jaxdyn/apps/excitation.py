"""Excitation trajectories for identification: finite Fourier series per joint (Swevers,
Ganseman, Tukel, De Schutter and Van Brussel 1997), periodic, smooth, with closed-form
velocities and accelerations, scaled inside the joint limits.  :mod:`jaxdyn.apps.sysid`
optimizes their coefficients for the condition number of the regressor."""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ArgumentError


class Fourier(NamedTuple):
    """Finite Fourier series per joint (Swevers et al. 1997):
    ``q_j(t) = q0_j + sum_l a_jl / (w_f l) sin(w_f l t) - b_jl / (w_f l) cos(w_f l t)``,
    periodic with period 2 pi / w_f.  a, b (nv, L); q0 (nv,); w_f ()."""
    a: jax.Array
    b: jax.Array
    q0: jax.Array
    w_f: jax.Array


def fourier_eval(f: Fourier, t):
    """(q, qd, qdd) (nv,) each at time t (scalar)."""
    L = f.a.shape[1]
    wl = (f.w_f * jnp.arange(1, L + 1, dtype=f.a.dtype))[None, :]
    s, c = jnp.sin(wl * t), jnp.cos(wl * t)
    q = f.q0 + jnp.sum(f.a / wl * s - f.b / wl * c, 1)
    qd = jnp.sum(f.a * c + f.b * s, 1)
    qdd = jnp.sum(-f.a * wl * s + f.b * wl * c, 1)
    return q, qd, qdd


def fourier_excitation(model, key, harmonics=5, period=10.0, amplitude=1.0, center=None):
    """A random Fourier excitation for a model with vector-space joints, scaled so that every
    joint stays within ``center +- amplitude`` and within the model's finite joint limits
    (a bound on the series' range, not a sampled check)."""
    if model.nq != model.nv:
        raise ArgumentError(f"Fourier excitation needs vector-space joints (nq == nv); {model.name!r} has "
                            f"nq = {model.nq}, nv = {model.nv}")
    w_f = 2 * np.pi / float(period)
    lo, hi = np.asarray(model.q_lower, float), np.asarray(model.q_upper, float)
    fin = np.isfinite(lo) & np.isfinite(hi)
    lo_, hi_ = np.where(fin, lo, 0.0), np.where(fin, hi, 0.0)
    mid = np.where(fin, 0.5 * (lo_ + hi_), 0.0) if center is None else np.asarray(center, float)
    half = np.minimum(amplitude, np.where(fin, 0.45 * (hi_ - lo_), np.inf))
    a, b = _fourier_coefficients(key, jnp.asarray(half), harmonics=int(harmonics), w_f=w_f)
    return Fourier(a, b, jnp.asarray(mid, a.dtype), jnp.asarray(w_f, a.dtype))


@partial(jax.jit, static_argnames=("harmonics", "w_f"))
def _fourier_coefficients(key, half, harmonics, w_f):
    """Random sine / cosine amplitudes a, b (nv, harmonics) scaled so that the series' range
    bound sum_l (|a_l| + |b_l|) / (l w_f) equals ``half`` (nv,) per joint (one program, not an
    XLA compile per array operation)."""
    ka, kb = jax.random.split(key)
    a = jax.random.normal(ka, (half.shape[0], harmonics))
    b = jax.random.normal(kb, (half.shape[0], harmonics))
    wl = (w_f * jnp.arange(1, harmonics + 1, dtype=a.dtype))[None, :]
    bound = jnp.sum((jnp.abs(a) + jnp.abs(b)) / wl, 1)        # max |q - q0 - offset|
    scale = half.astype(a.dtype) / bound
    return a * scale[:, None], b * scale[:, None]


@jax.jit
def sample_fourier(f: Fourier, t):
    """(Q, QD, QDD) (N, nv) each at times t (N,)."""
    return jax.vmap(lambda s: fourier_eval(f, s))(jnp.asarray(t))
