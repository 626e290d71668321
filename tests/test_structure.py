"""Code structure: no import cycles between jaxdyn's modules (function-level imports included),
no private name imported across modules, explicit re-exports, lint-clean, and every public name
documented."""
import ast
import os
import re
import subprocess
import sys
import types

import jaxdyn

ROOT = os.path.dirname(jaxdyn.__file__)


def _modules():
    mods = {}
    for dp, _, fs in os.walk(ROOT):
        for f in fs:
            if f.endswith(".py"):
                p = os.path.join(dp, f)
                rel = os.path.relpath(p, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                mods[rel[:-9] if rel.endswith(".__init__") else rel] = p
    return mods


def _graph(mods):
    g = {m: set() for m in mods}
    for m, p in mods.items():
        is_pkg = p.endswith("__init__.py")
        for node in ast.walk(ast.parse(open(p).read())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = m.split(".") if is_pkg else m.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                tgt = ".".join(base + ([node.module] if node.module else []))
                sub = [tgt + "." + a.name for a in node.names if tgt + "." + a.name in mods]
                for c in sub or [tgt]:
                    if c in mods and c != m:
                        g[m].add(c)
    return g


def test_no_import_cycles():
    g = _graph(_modules())
    state = {}

    def visit(v, path):
        state[v] = 1
        for w in g[v]:
            if state.get(w) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(w):] + [w]))
            if w not in state:
                visit(w, path + [w])
        state[v] = 2

    for v in g:
        if v not in state:
            visit(v, [v])


def test_no_private_names_imported_across_modules():
    bad = []
    for m, p in _modules().items():
        for node in ast.walk(ast.parse(open(p).read())):
            if isinstance(node, ast.ImportFrom) and node.level:
                bad += [f"{m}: {a.name}" for a in node.names if a.name.startswith("_") and a.name != "__version__"]
    assert not bad, bad


def _public(module):
    return {n: v for n, v in vars(module).items() if not n.startswith("_")}


def test_public_names_have_docstrings():
    missing = [f"{pkg.__name__}.{n}" for pkg in (jaxdyn, jaxdyn.dynamics, jaxdyn.model, jaxdyn.integrators, jaxdyn.kinematics,
                                                 jaxdyn.constraints, jaxdyn.apps, jaxdyn.spatial)
               for n, v in _public(pkg).items()
               if callable(v) and not isinstance(v, types.ModuleType) and not (v.__doc__ or "").strip()]
    assert not missing, missing


def test_package_imports_are_explicit_reexports():
    """Every relative import in an ``__init__`` is written ``from .x import f as f`` (PEP 484's
    explicit re-export), so type checkers and linters see the public names without ``__all__``."""
    bad = []
    for m, p in _modules().items():
        if p.endswith("__init__.py"):
            for node in ast.walk(ast.parse(open(p).read())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    bad += [f"{m}: {a.name}" for a in node.names if a.asname != a.name]
    assert not bad, bad


def test_lint_clean():
    """pyflakes' rules (through ruff) on the package, the tests, the benchmarks and the examples."""
    repo = os.path.dirname(ROOT)
    dirs = [d for d in ("jaxdyn", "tests", "benchmarks", "examples") if os.path.isdir(os.path.join(repo, d))]
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *dirs], cwd=repo,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_internal_document_references():
    """The repo stands alone: papers are cited by author and year, not by internal file names."""
    pat = re.compile(r"\bseed 00\d|\.\./shared|seeds/")
    hits = [p for p in _modules().values() if pat.search(open(p).read())]
    assert not hits, hits


def test_every_warning_is_a_jaxdyn_warning():
    """Each ``warnings.warn`` in the package names ``category=JaxdynWarning``, so that one filter
    (or the jaxdyn command's one-line format) covers them all."""
    plain = []
    for m, p in _modules().items():
        for node in ast.walk(ast.parse(open(p).read())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings":
                cat = {k.arg: k.value for k in node.keywords}.get("category")
                if not (isinstance(cat, ast.Name) and cat.id == "JaxdynWarning"):
                    plain.append(f"{m}:{node.lineno}")
    assert not plain, plain


def test_joint_type_enum_sizes_match_built_models():
    """JointType's nq / nv are the sizes a one-joint model actually gets, and names round-trip."""
    import numpy as np
    from jaxdyn.model import joints as J
    assert [int(t) for t in J.JointType] == list(range(8))
    for t in J.JointType:
        m = jaxdyn.build_model(parent=[-1], jtype=[t.label], Xtree_E=np.eye(3)[None], Xtree_r=np.zeros((1, 3)),
                               axis=np.array([[0.0, 0.0, 1.0]]), mass=[1.0], com=np.zeros((1, 3)),
                               inertia=np.eye(3)[None] * 0.1)
        assert (m.nq, m.nv) == (t.nq, t.nv), t
        assert J.joint_code(t.label) == t and J.NQ[int(t)] == t.nq
        assert np.asarray(jaxdyn.neutral(m)).shape == (t.nq,)


def test_every_public_module_level_function_and_class_has_a_docstring():
    missing = []
    for m, p in _modules().items():
        for node in ast.parse(open(p).read()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_") \
                    and not ast.get_docstring(node):
                missing.append(f"{m}.{node.name}")
    assert not missing, missing


def test_shape_annotations_are_checked_in_the_test_run():
    """The jaxtyping import hook (pyproject's ``--jaxtyping-packages``) instruments jaxdyn: an
    argument that breaks an annotation raises jaxtyping's TypeCheckError before any jaxdyn code
    runs (here qd and tau of different lengths, both annotated ``nv``; and a rank-2 q)."""
    import jax.numpy as jnp
    import pytest
    from jaxtyping import TypeCheckError
    m = jaxdyn.robots.puma560()
    q = jnp.zeros(m.nq)
    with pytest.raises(TypeCheckError, match="nv"):
        jaxdyn.rnea(m, q, jnp.zeros(m.nv), jnp.zeros(m.nv + 1))
    with pytest.raises(TypeCheckError):
        jaxdyn.crba(m, jnp.zeros((2, m.nq)))
    with pytest.raises(TypeCheckError, match="nv"):
        jaxdyn.aba_derivatives(m, q, jnp.zeros(m.nv + 2), jnp.zeros(m.nv))


def test_import_jaxdyn_leaves_optax_unloaded():
    """optax, which imports all of its optimizers, is imported by the apps' functions that run
    it (L-BFGS, Adam), not by ``import jaxdyn``."""
    r = subprocess.run([sys.executable, "-c", "import sys, jaxdyn; print('optax' in sys.modules)"],
                       capture_output=True, text=True, timeout=300, cwd=os.path.dirname(ROOT))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "False", "import jaxdyn imported optax"


def test_installed_version_is_the_package_version():
    """pip's metadata (what ``pip show`` and dependency resolvers read) and ``jaxdyn.__version__``
    name one version: pyproject.toml reads it from the package."""
    from importlib.metadata import version
    assert version("jaxdyn") == jaxdyn.__version__
