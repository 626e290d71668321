"""Shared by the examples: the output folder and the smoke-test switch.

``JAXDYN_EXAMPLE_SMALL=1`` (the test suite's smoke run) shrinks every example's sizes; outputs
go to ``./jaxdyn-out/examples/<example>/``."""
import os

SMALL = os.environ.get("JAXDYN_EXAMPLE_SMALL", "") not in ("", "0")


def out_dir(name):
    d = os.path.join("jaxdyn-out", "examples", name)
    os.makedirs(d, exist_ok=True)
    return d
