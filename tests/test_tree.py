"""jaxdyn.tree's sweeps against closed forms computed from the parent array, on random trees and
forests whose bodies change joint type along the sweep (several runs), and on forests of
chains (legs on a base: every body's parent is the body before it, an earlier run's body or
the world), whose links go through the scans' carries and the runs' outputs: a step that
sends its accumulator to its parent sums each body's subtree (its initial values given as
an array or as a function of each body's input); the variant that also sees the
parent's running accumulator sees the parent's own value plus the subtrees of the siblings
visited before (higher index); a forward step that adds its input to its parent's value sums
each body's path to the root; the accumulators of a chain share one slot."""
import jax.numpy as jnp
import numpy as np
import pytest

import jaxdyn
from jaxdyn.tree import (_chain_links, accumulator_slots, backward_sweep, backward_sweep_with_parent, forward_sweep,
                         value_slots)


def forest(nb, seed):
    m = jaxdyn.robots.random_tree(nb, 0.6, seed)
    roots = np.random.default_rng(seed).random(nb) < 0.2
    roots[0] = True
    return m.replace(parent=np.where(roots, -1, m.parent))


def branched(nb, seed):
    """A forest of one joint type: one run, branching inside it (a humanoid's torso)."""
    m = jaxdyn.robots.random_tree(nb, 0.6, seed, joint_types=("revolute",))
    roots = np.random.default_rng(seed).random(nb) < 0.1
    roots[0] = True
    return m.replace(parent=np.where(roots, -1, m.parent))


def chains(nb, seed):
    """A forest of chains: a body's parent is the body before it in its run, or (at random, and
    for a run's first body) a body of an earlier run or the world."""
    m = jaxdyn.robots.random_tree(nb, 0.6, seed)
    rng, parent = np.random.default_rng(seed), np.arange(-1, nb - 1)
    for r in m.runs:
        for i in range(r.start, r.stop):
            if i == r.start or rng.random() < 0.3:
                parent[i] = rng.integers(-1, r.start) if r.start else -1
    return m.replace(parent=parent)


def path_sums(parent, w):
    out = w.copy()
    for i in range(len(parent)):
        if parent[i] >= 0:
            out[i] += out[parent[i]]
    return out


def subtree_sums(parent, w):
    out = w.copy()
    for i in reversed(range(len(parent))):
        if parent[i] >= 0:
            out[parent[i]] += out[i]
    return out


@pytest.mark.parametrize("nb, seed, build", [(1, 0, forest), (12, 1, forest), (40, 2, forest), (30, 3, chains),
                                            (40, 4, branched)])
def test_sweeps_sum_subtrees_paths_and_earlier_siblings(nb, seed, build):
    m = build(nb, seed)
    parent = np.asarray(m.parent)
    assert len(m.runs) > 1 or nb == 1 or build is branched
    if build is chains:
        assert _chain_links(m)[0].any()
    w = np.random.default_rng(seed).normal(size=(nb, 3, 2))          # a trailing batch axis of 2
    sub = subtree_sums(parent, w)

    acc, ys = backward_sweep(lambda a, x, keep: (a, a), m, jnp.asarray(w), jnp.zeros(nb))
    np.testing.assert_allclose(acc[:nb], sub, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ys.bodies(), sub, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(acc[nb], sub[parent < 0].sum(0), rtol=1e-12, atol=1e-12)
    # the initial accumulators as a function of each body's input, formed where the step reads it
    acc, ys = backward_sweep(lambda a, x, keep: (a, a), m, lambda x: 2 * x, jnp.asarray(w))
    np.testing.assert_allclose(acc[:nb], 2 * sub, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ys.bodies(), 2 * sub, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(acc[nb], 2 * sub[parent < 0].sum(0), rtol=1e-12, atol=1e-12)

    vals, ys = forward_sweep(lambda v, x, keep: (v + x, v), m, jnp.ones((3, 2)), jnp.asarray(w))
    np.testing.assert_allclose(vals[:nb], path_sums(parent, w) + 1.0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(vals[nb], np.ones((3, 2)))
    np.testing.assert_allclose(ys.bodies() + w, vals[:nb], rtol=1e-12, atol=1e-12)

    _, seen = backward_sweep_with_parent(lambda a, ap, x, keep: (a, ap), m, jnp.asarray(w), jnp.zeros(nb))
    for i, p in enumerate(parent):
        earlier = [c for c in range(i + 1, nb) if parent[c] == p]
        want = (w[p] if p >= 0 else 0.0) + sum((sub[c] for c in earlier), np.zeros((3, 2)))
        np.testing.assert_allclose(seen.bodies()[i], want, rtol=1e-12, atol=1e-12, err_msg=f"body {i}")


def test_a_chain_keeps_one_accumulator():
    K, own, has, to, first = accumulator_slots(np.arange(-1, 9))
    assert K == 1 and np.all(to[1:] == 0) and to[0] == K and np.all(first[1:]) and not has[-1]
    K, *_ = accumulator_slots(np.asarray(forest(40, 2).parent))
    assert K < 40


@pytest.mark.parametrize("nb, seed", [(12, 1), (40, 2), (60, 5)])
def test_value_slots_hold_each_parent_until_its_last_child(nb, seed):
    """Played in numpy, the forward plan gives every body that reads a slot its parent's value
    (each body writes its index), and uses fewer slots than bodies."""
    m = branched(nb, seed)
    parent = np.asarray(m.parent)
    direct, outer = _chain_links(m)
    links = ~direct & ~outer
    K, read, own, writes = value_slots(parent, links)
    assert links.any() and 0 < K < links.sum()
    held = np.full(K, -1)
    for i in range(nb):
        if links[i]:
            assert held[read[i]] == parent[i], f"body {i} reads slot {read[i]} holding {held[read[i]]}"
        if writes[i]:
            held[own[i]] = i
    assert value_slots(np.arange(-1, 5), np.zeros(6, bool))[0] == 0      # a chain: no slot
