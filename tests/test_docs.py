"""The documentation: README and docs/ link to files that exist and name public objects that
exist, every public name has a docstring, and pdoc builds the API reference."""
import importlib
import os
import re
import subprocess
import sys

import pytest

import jaxdyn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))


def text(page):
    with open(os.path.join(ROOT, page)) as fh:
        return fh.read()


def test_readme_is_short():
    assert len(text("README.md").splitlines()) <= 200


@pytest.mark.parametrize("page", PAGES)
def test_links_exist(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text(page)):
        if "://" in target:
            continue
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), target))
        assert os.path.exists(path), f"{page}: link to missing {target}"


def resolve(dotted):
    """The object a dotted ``jaxdyn.a.b`` name denotes (modules imported on the way)."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for k, p in enumerate(parts[1:], 1):
        if not hasattr(obj, p):
            obj = importlib.import_module(".".join(parts[:k + 1]))
        else:
            obj = getattr(obj, p)
    return obj


@pytest.mark.parametrize("page", PAGES)
def test_named_objects_exist(page):
    names = set(re.findall(r"\bjaxdyn(?:\.[A-Za-z_][A-Za-z0-9_]*)+", text(page)))
    missing = []
    for name in sorted(names):
        try:
            resolve(name)
        except (AttributeError, ImportError):
            missing.append(name)
    assert not missing, f"{page} names objects jaxdyn does not have: {missing}"


def test_public_names_are_documented():
    undocumented = [n for n in jaxdyn.__all__ if not (getattr(jaxdyn, n).__doc__ or "").strip()]
    assert not undocumented, undocumented
    assert sorted(jaxdyn.__all__) == sorted(set(jaxdyn.__all__))
    for n in jaxdyn.__all__:
        assert hasattr(jaxdyn, n), n


def test_pdoc_builds(tmp_path):
    pytest.importorskip("pdoc")
    p = subprocess.run([sys.executable, "-m", "pdoc", "jaxdyn", "jaxdyn.apps", "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (tmp_path / "jaxdyn.html").exists()
    for sub in ("saha", "operators", "kinematics", "integrators", "apps/sysid", "apps/trajopt"):
        assert (tmp_path / "jaxdyn" / f"{sub}.html").exists(), sub
