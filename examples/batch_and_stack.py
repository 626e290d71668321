"""Many states, many robots: ABA on 4096 random panda states in one call, and a 4096-lane
``jaxdyn.stack`` of four robots of different structure (panda, ur5, PUMA 560, Stanford arm),
each lane its own robot and state, run on the union tree and per member (``per_member=True``,
each robot's lanes on its own tree), checked lane by lane against the robot's own ABA (the
same lanes run as one ``vmap`` per robot in one program).

    python examples/batch_and_stack.py          (panda and ur5 from example-robot-data)
"""
import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxdyn  # noqa: E402
from jaxdyn.io.named import robot_by_name  # noqa: E402

from _common import SMALL, out_dir  # noqa: E402

B = 64 if SMALL else 4096


def states(model, key, n):
    k1, k2, k3 = jax.random.split(key, 3)
    q = jax.vmap(lambda k: jaxdyn.random_configuration(model, k))(jax.random.split(k1, n))
    return q, jax.random.normal(k2, (n, model.nv)), jax.random.normal(k3, (n, model.nv))


def timed(f, *a):
    jax.block_until_ready(f(*a))                 # compile
    t0 = time.perf_counter()
    out = jax.block_until_ready(f(*a))
    return out, time.perf_counter() - t0


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the panda URDF's <mimic> finger joint
        panda, ur5 = robot_by_name("erd:panda"), robot_by_name("erd:ur5")
    aba = jax.jit(jax.vmap(jaxdyn.aba, (None, 0, 0, 0)))
    q, v, tau = states(panda, jax.random.PRNGKey(0), B)
    _, s = timed(aba, panda, q, v, tau)
    print(f"panda: ABA on {B} states in {1e3 * s:.1f} ms ({1e6 * s / B:.2f} us per state)")

    robots = [panda, ur5, jaxdyn.robots.puma560(), jaxdyn.robots.stanford_arm()]
    st = jaxdyn.stack(robots)
    member = np.arange(B) % len(robots)                # lane -> robot
    big = st.lanes(member)
    per = [states(m, jax.random.PRNGKey(j + 1), B) for j, m in enumerate(robots)]
    Q = jnp.stack([st.q(j, per[j][0][k]) for k, j in enumerate(member)])
    V = jnp.stack([st.v(j, per[j][1][k]) for k, j in enumerate(member)])
    T = jnp.stack([st.v(j, per[j][2][k]) for k, j in enumerate(member)])
    qdd, s = timed(jax.jit(jax.vmap(jaxdyn.aba)), big, Q, V, T)
    print(f"stack of {len(robots)} robots, {B} lanes: ABA in {1e3 * s:.1f} ms ({1e6 * s / B:.2f} us per lane)")
    # the same lanes with each robot's lanes on its own tree (one kernel per robot)
    pm = jaxdyn.stack(robots, per_member=True).lanes(member)
    qdd_per, s = timed(jax.jit(jax.vmap(jaxdyn.aba)), pm, Q, V, T)
    print(f"per-member stack: {1e3 * s:.1f} ms ({1e6 * s / B:.2f} us per lane)")
    # the same lanes as one vmap per robot in one program (each lane costs only its robot's bodies)
    lanes = [np.flatnonzero(member == j) for j in range(len(robots))]
    S = [tuple(x[k] for x in per[j]) for j, k in enumerate(lanes)]
    run = jax.jit(lambda ms, S: [jax.vmap(jaxdyn.aba, (None, 0, 0, 0))(m, *s) for m, s in zip(ms, S)])
    own, s = timed(run, robots, S)
    print(f"the same lanes, one vmap per robot in one program: {1e3 * s:.1f} ms ({1e6 * s / B:.2f} us per lane)")
    err = max(max(float(jnp.abs(st.member_v(j, x[k]) - own[j]).max()) for x in (qdd, qdd_per))
              for j, k in enumerate(lanes))
    print(f"max |stack - own ABA| over all lanes, both stacks: {err:.2e}")
    if not err < 1e-9:
        raise SystemExit(f"the stack's lanes differ from their robots' own ABA by {err:.3e}")
    with open(os.path.join(out_dir("batch_and_stack"), "result.txt"), "w") as fh:
        fh.write(f"B = {B}; stack vs own ABA: {err:.3e}\n")


if __name__ == "__main__":
    main()
