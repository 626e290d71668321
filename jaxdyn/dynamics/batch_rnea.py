"""Throughput RNEA for many states of one model: the batch-last layout of
:mod:`jaxdyn.dynamics.batch` (component-first algebra, the batch on the minor axis, fusion
barriers, chunks) running the RNEA steps of :mod:`jaxdyn.dynamics.aba_steps`
(Featherstone 2010 Fig. 5).  What ``jax.vmap(jaxdyn.rnea)`` over states of one model runs."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..model.model import Model
from ..tree import backward_sweep, forward_sweep
from .aba_steps import rnea_backward_step, rnea_forward_step
from .batch import body_constants, chunk_joint_transforms, kept_step, sweep_reader
from .chunks import default_chunk, map_chunks
from .common import gravity_acceleration, per_body, scatter_dofs


def rnea_chunk(model: Model, q, qd, qdd, a0, I6):
    """RNEA (:func:`jaxdyn.rnea`, without f_ext) on a chunk: q (C, nq), qd, qdd (C, nv) ->
    tau (C, nv), batch-last (the two sweeps of :mod:`jaxdyn.dynamics.aba_steps`' RNEA steps
    with fusion barriers); I6 (nb, 6, 6, 1) from :func:`body_constants`, a0 (6,)."""
    dt = q.dtype
    last = lambda a: jnp.moveaxis(a, 0, -1)
    E, r, S = chunk_joint_transforms(model, q)
    qdb, qddb = (last(jax.vmap(partial(per_body, model))(x)) for x in (qd, qdd))
    C = q.shape[0]
    idx = jnp.arange(model.nb, dtype=jnp.int32)
    init = (jnp.zeros((6, C), dt), jnp.broadcast_to(a0[:, None], (6, C)))
    read = sweep_reader(False)
    _, f = forward_sweep(kept_step(rnea_forward_step, False), model, init, (idx, E, r, S, qdb, qddb, I6), read)
    _, taub = backward_sweep(kept_step(rnea_backward_step, False), model, f, (idx, E, r, S), read)
    tau = jnp.moveaxis(scatter_dofs(model, taub), -1, 0)
    return tau + model.armature.astype(dt)[None] * qdd


def rnea_batch(model: Model, q, qd, qdd, gravity=None, chunk=None):
    """RNEA of B states of one model, q (B, nq), qd, qdd (B, nv) -> tau (B, nv), in chunks of
    ``chunk`` states (default 128 on the CPU, :func:`jaxdyn.dynamics.chunks.default_chunk`) on
    the batch-last kernel (:func:`rnea_chunk`).  What ``jax.vmap(jaxdyn.rnea)`` over states of
    one model runs."""
    dt = jnp.result_type(q, qd, qdd)
    a0 = gravity_acceleration(model, gravity).astype(dt)
    I6, _ = body_constants(model, dt)
    return map_chunks(lambda _, x: rnea_chunk(model, *x, a0, I6), tuple(jnp.asarray(a, dt) for a in (q, qd, qdd)),
                      default_chunk(chunk, 128))
