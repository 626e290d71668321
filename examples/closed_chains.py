"""Closed chains from the built-in configs: a quadruped standing on four feet (Lilly and Orin's
O(mN) method) and three PUMA arms holding a box (Rodriguez and Kreutz's operator method), each
simulated by ``jaxdyn simulate`` with its animation (``animation.html``) and plots.

    python examples/closed_chains.py
"""
import os
import sys
from importlib import resources

from jaxdyn.cli import main

from _common import SMALL, out_dir


def run(config, T):
    text = (resources.files("jaxdyn.configs") / f"{config}.toml").read_text()
    path = os.path.join(out_dir("closed_chains"), f"{config}.toml")
    with open(path, "w") as fh:
        fh.write(text.replace("T = 2.0", f"T = {T}"))
    return main(["simulate", path, "--out", os.path.join(out_dir("closed_chains"), config)])


if __name__ == "__main__":
    for cfg in ("quadruped_stand", "three_arms_box"):
        rc = run(cfg, 0.1 if SMALL else 2.0)
        if rc:
            sys.exit(rc)
