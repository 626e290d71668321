"""Operation counts: the seed's Table I tally and the instrumented count of our UDU^T."""
import jax.numpy as jnp
import numpy as np

import jaxdyn
from jaxdyn.opcount import count_ops, op_count, saha_table1


def test_saha_section3_tally_vs_table1():
    """Summing the braces of Sec. 3 reproduces Table I's additions exactly (187n - 325) and its
    multiplications up to one n: the steps add to 192n - 284, Table I prints 191n - 284 (the
    paper's own entries at n = 6, 10: 862 and 1626 M = 191n - 284)."""
    for n in (3, 6, 10, 50):
        M, A = saha_table1(n)
        assert A == 187 * n - 325
        assert M == 191 * n - 284 + n


def test_counter_on_known_programs():
    a = jnp.ones((3, 4)); b = jnp.ones((4, 5))
    assert count_ops(lambda x, y: x @ y, a, b) == {"M": 60, "A": 45, "other": 0}
    assert count_ops(lambda x: jnp.sin(x) * 2.0 + x, a) == {"M": 12, "A": 12, "other": 12}


def test_udut_count_is_linear_in_n():
    """Instrumented count of the implemented recursion (transforms + factorization + steps
    A, B, C) for revolute chains: exactly affine in n (second differences zero), i.e. O(n),
    and a constant multiple of Saha's per-link cost (dense 6x6 spatial algebra vs his
    DH-specialised 3x3 blocks; see jaxdyn/opcount.py and the issue note)."""
    counts = []
    for n in (4, 8, 12, 16):
        m = jaxdyn.robots.random_tree(n, 0.0, 0, joint_types=("revolute",))
        counts.append(op_count("udut", m))
    Ms = np.array([c["M"] for c in counts]); As = np.array([c["A"] for c in counts])
    assert np.all(np.diff(Ms, 2) == 0) and np.all(np.diff(As, 2) == 0)
    per_link_M = (Ms[1] - Ms[0]) / 4
    assert 191 < per_link_M < 10 * 191
    # the O(n^3) reference grows faster than linearly once Cholesky is counted
    crba = [op_count("crba", jaxdyn.robots.random_tree(n, 0.0, 0, joint_types=("revolute",)))["M"] for n in (4, 8, 16)]
    assert crba[2] - crba[1] > 2 * (crba[1] - crba[0])
