"""Reproduce Saha (2003) Sec. 4: free-fall and forced runs of the planar 3R arm, Stanford arm
and PUMA (Figs. 4-7).  Writes ./jaxdyn-out/<config>/ for each of the six built-in configs.

    python examples/saha_experiments.py
"""
import sys

from jaxdyn.cli import main

from _common import SMALL      # the test suite's smoke run: two of the six

if __name__ == "__main__":
    for cfg in (("planar3_forced", "puma_freefall") if SMALL else
                ("planar3_freefall", "planar3_forced", "stanford_freefall", "stanford_forced",
                 "puma_freefall", "puma_forced")):
        rc = main(["simulate", cfg])
        if rc:
            sys.exit(rc)
