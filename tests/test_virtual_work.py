"""Yamane-Nakamura's virtual-work forward dynamics (Yamane & Nakamura 2009): the joint wrenches
it returns equal RNEA's joint wrenches under its own qdd, with f_ext, on the seeds' arms and
random trees; they do no work along the joint motion subspaces (S^T f = tau); they equal
Pinocchio's joint forces data.f on example-robot-data robots.  Its qdd equals ABA in
test_forward_dynamics."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.dynamics import slots
from helpers import batch_states, close, rng_states, small_models


def test_virtual_work_wrenches_equal_rnea():
    for name, m in small_models().items():
        q, qd, tau, fx = batch_states(m, 3, 5)

        def both(q, qd, tau, f):
            qdd, w = jaxdyn.virtual_work(m, q, qd, tau, f_ext=f)
            S = slots.padded(m, jaxdyn.kinematics.joint_transforms(m, q)[1])
            return qdd, w, jaxdyn.joint_wrenches(m, q, qd, qdd, f_ext=f), S
        qdd, w, wr, S = jax.jit(jax.vmap(both))(q, qd, tau, fx)
        close(w, wr, err=name)
        # the constraint part does no work: S^T wrench = tau on every joint
        tb = jax.vmap(lambda t: slots.per_body(m, t))(tau) * slots.dof_mask(m)[None]
        wf = jnp.concatenate([w[..., 3:], w[..., :3]], -1)
        close(jnp.einsum("bkij,bki->bkj", S, wf), tb, err=name + " S^T f = tau")


@pytest.mark.parametrize("name", ["panda", "anymal_c", "talos_reduced"])
def test_virtual_work_wrenches_match_pinocchio(robot_pair, name):
    """The wrenches equal Pinocchio's data.f after its rnea at the computed qdd."""
    pin = pytest.importorskip("pinocchio")
    m, pm = robot_pair(name)
    pd = pm.createData()
    for q, qd, _, tau in rng_states(m, pm, 3, seed=2):
        qdd, w = jaxdyn.virtual_work(m, q, qd, tau)
        pin.rnea(pm, pd, q, qd, np.asarray(qdd))
        fpin = np.stack([pd.f[j + 1].vector for j in range(m.nb)])
        close(w, fpin, err="virtual-work wrenches vs pin data.f")
