"""The only place that walks the kinematic tree.

Both sweeps are ``lax.scan`` over bodies in topological order with a buffer of per-body
values plus one *sink* slot (index nb) that stands for the world / the root's parent, so
no step needs a ``lax.cond`` for the root.  Compile time is independent of the number of
bodies.

* ``forward_sweep(step, model, init, xs)``: for i = 0..nb-1,
  ``val_i, y_i = step(val[parent[i]], x_i)`` with ``val[world] = init``.
* ``backward_sweep(step, model, init, xs)``: for i = nb-1..0, ``acc_i`` starts at ``init[i]``
  plus the contributions of all children; ``to_parent, y_i = step(acc_i, x_i)`` and
  ``acc[parent[i]] += to_parent`` (the world's sum lands in the sink slot).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

tmap = jax.tree_util.tree_map


def parent_slots(model):
    """Parent indices with the world (-1) mapped to the sink slot nb.  (nb,) int32."""
    return jnp.where(model.parent < 0, model.nb, model.parent).astype(jnp.int32)


def forward_sweep(step, model, init, xs):
    """Root-to-leaves sweep.

    Args:
      step: ``(parent_val, x_i) -> (val_i, y_i)``; pytrees of per-body values.
      init: the world's value (pytree of arrays).
      xs: per-body inputs (pytree of arrays with leading axis nb).
    Returns:
      (vals, ys): vals has leading axis nb + 1 (slot nb = world = init); ys leading axis nb.
    """
    nb = model.nb
    buf = tmap(lambda a: jnp.broadcast_to(a, (nb + 1,) + jnp.shape(a)).astype(jnp.result_type(a)), init)

    def body(buf, inp):
        i, p, x = inp
        pv = tmap(lambda b: lax.dynamic_index_in_dim(b, p, keepdims=False), buf)
        val, y = step(pv, x)
        buf = tmap(lambda b, v: lax.dynamic_update_index_in_dim(b, v.astype(b.dtype), i, 0), buf, val)
        return buf, y

    buf, ys = lax.scan(body, buf, (jnp.arange(nb, dtype=jnp.int32), parent_slots(model), xs))
    return buf, ys


def backward_sweep(step, model, init, xs):
    """Leaves-to-root sweep.

    Args:
      step: ``(acc_i, x_i) -> (to_parent, y_i)``.
      init: per-body initial accumulators (leading axis nb).
      xs: per-body inputs (leading axis nb).
    Returns:
      (acc, ys): final accumulators with leading axis nb + 1 (slot nb = world sum), outputs ys.
    """
    nb = model.nb
    buf = tmap(lambda a: jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)], 0), init)

    def body(buf, inp):
        i, p, x = inp
        acc = tmap(lambda b: lax.dynamic_index_in_dim(b, i, keepdims=False), buf)
        to_parent, y = step(acc, x)
        buf = tmap(lambda b, v: lax.dynamic_update_index_in_dim(
            b, lax.dynamic_index_in_dim(b, p, keepdims=False) + v.astype(b.dtype), p, 0), buf, to_parent)
        return buf, y

    buf, ys = lax.scan(body, buf, (jnp.arange(nb, dtype=jnp.int32), parent_slots(model), xs), reverse=True)
    return buf, ys
