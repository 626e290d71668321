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
    """The object a dotted ``jaxdyn.a.b`` name denotes: a submodule where one has that name
    (``jaxdyn.integrators.rk4`` the module, though the package re-exports a function rk4),
    else an attribute."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for k, p in enumerate(parts[1:], 1):
        try:
            obj = importlib.import_module(".".join(parts[:k + 1]))
        except ImportError:
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


def package_sources():
    """(path from the repository root, text) of every Python file of the package."""
    out = []
    for folder, _, files in os.walk(os.path.join(ROOT, "jaxdyn")):
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(folder, f)) as fh:
                    out.append((os.path.relpath(os.path.join(folder, f), ROOT), fh.read()))
    return out


def test_docstring_references_resolve():
    """Every Sphinx-style cross-reference to jaxdyn in the package's source (``:mod:`` ,
    ``:func:`` , ``:class:`` , ...: pdoc renders them as links) names an object that exists."""
    refs = {(where, name) for where, src in package_sources()
            for name in re.findall(r":[a-z]+:`(jaxdyn(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", src)}
    assert len(refs) > 20
    missing = []
    for where, name in sorted(refs):
        try:
            resolve(name)
        except (AttributeError, ImportError):
            missing.append(f"{where}: {name}")
    assert not missing, missing


def test_source_paths_exist():
    """Every repository file that the package's source names (``benchmarks/...``, ``docs/...``,
    ``examples/...``, ``configs/...``: where a docstring sends its reader) exists."""
    named = [(where, p) for where, src in package_sources()
             for p in re.findall(r"(?<![\w/.])((?:benchmarks|docs|examples|configs)/[\w./-]*\w)", src)]
    assert len(named) >= 5
    missing = [f"{where}: {p}" for where, p in named if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, missing


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
