"""Every script in examples/ runs (small sizes: ``JAXDYN_EXAMPLE_SMALL=1``) and exits 0, so none
rots; the ones that write a figure or an animation write it."""
import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))
WRITES = {"mjcf_humanoid.py": "mjcf_humanoid/animation.html", "rollout_gradients.py": "rollout_gradients/gradients.png",
          "closed_chains.py": "closed_chains/quadruped_stand/animation.html", "ur5_reach.py": "ur5_reach/animation.html",
          "batch_and_stack.py": "batch_and_stack/result.txt",
          "urdf_friction_identification.py": "urdf_friction_identification/friction.png"}


def test_the_gallery_is_complete():
    assert set(WRITES) <= set(EXAMPLES)
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name, tmp_path):
    if name == "mjcf_humanoid.py":
        pytest.importorskip("mujoco")
    env = dict(os.environ, JAXDYN_EXAMPLE_SMALL="1", MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    if name in WRITES:
        assert (tmp_path / "jaxdyn-out" / "examples" / WRITES[name]).is_file()
