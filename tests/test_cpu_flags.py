"""jaxdyn.CPU_XLA_FLAGS: a process started with them compiles every program with the legacy
emitters, so jaxdyn also traces a plain ``jax.jit``'s programs for them (for_cpu_options);
the numbers are those of the other formulation.  Checked in a subprocess (XLA reads the
flags when the backend starts); the suite's own flags select only the emitters, so its
plain-jit programs keep the fusion-emitter formulation."""
import os
import subprocess
import sys
import textwrap

import jax

import jaxdyn
from jaxdyn.compiled import _process_flags_give_cpu_options, for_cpu_options

SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import jaxdyn
    from jaxdyn.compiled import for_cpu_options
    from jaxdyn.dynamics import aba_unwrapped
    seen = []
    jax.jit(lambda x: seen.append(for_cpu_options()) or x)(1.0)
    R = jaxdyn.robots.random_tree
    ms = [R(9, 0.5, 3, floating_base=True), R(6, 0.3, 4, floating_base=True)]
    st = jaxdyn.stack(ms)
    r = np.random.default_rng(0)
    Q = np.stack([np.asarray(jaxdyn.pad_state(m, jaxdyn.random_configuration(m, jax.random.PRNGKey(i)), st.nq))
                  for i, m in enumerate(ms)])
    V, T = (r.normal(size=(2, st.nv)) for _ in range(2))
    out = np.asarray(jax.jit(jax.vmap(jaxdyn.aba))(st, Q, V, T))
    err = max(float(np.max(np.abs(out[i, :m.nv] - aba_unwrapped(m, Q[i, :m.nq], V[i, :m.nv], T[i, :m.nv]))))
              for i, m in enumerate(ms))
    print(seen[0], err)
""")


def test_flag_string_selects_the_legacy_emitters_with_region_analysis():
    assert _process_flags_give_cpu_options(jaxdyn.CPU_XLA_FLAGS)
    assert not _process_flags_give_cpu_options("--xla_cpu_use_fusion_emitters=false")
    assert not _process_flags_give_cpu_options("")
    seen = []
    jax.jit(lambda x: seen.append(for_cpu_options()) or x)(1.0)      # the suite's flags: emitters only
    assert seen == [False]


def test_plain_jit_traces_for_the_process_flags():
    env = dict(os.environ, XLA_FLAGS=jaxdyn.CPU_XLA_FLAGS)
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    flag, err = out.stdout.split()[-2:]
    assert flag == "True" and float(err) < 1e-9, out.stdout
