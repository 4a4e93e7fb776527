"""The import graph (``tools/import_graph.py``, run as a script): no new import
circle, no new arrow from a lower layer to a higher one, and no distribution
importing a core module outside the public API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "import_graph.py"

#: Circles left on purpose (function-level imports included), each with its owner's issue.
KNOWN_CIRCLES: list[list[str]] = []
#: Upward arrows left; the list may only shrink.  The one function-level arrow:
#: rgym_core.runner -> rgym_core.agent_process (``--agent-isolation process``; issue #24).
MAX_UPWARD = {"module_level": 0, "function_level": 1}


def figures() -> dict:
    out = subprocess.run([sys.executable, str(SCRIPT), "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_no_new_import_circle_and_no_new_upward_arrow() -> None:
    data = figures()
    assert data["circles"] == [], f"module-level import circles: {data['circles']}"
    new = [c for c in data["circles_all"] if c not in KNOWN_CIRCLES]
    assert not new, ("new import circles (function-level imports included); move the shared code "
                     f"to the module where it belongs: {new}")
    for kind, limit in MAX_UPWARD.items():
        arrows = data[f"upward_{kind}"]
        assert len(arrows) <= limit, (f"{len(arrows)} {kind.replace('_', '-')} imports point from a "
                                      f"lower layer to a higher one (at most {limit}): {arrows}")


def test_distributions_import_only_the_public_api() -> None:
    data = figures()
    assert data["private_imports"] == [], (
        "these distributions import core modules outside the public API (rgym_core, "
        "rgym_core.testing, rgym_core.grader_kit; PUBLIC_MODULES in tools/import_graph.py); "
        "import the name from rgym_core instead, adding it to rgym_core._EXPORTS if it is "
        f"missing: {data['private_imports']}")


def test_the_script_sees_a_circle_and_a_private_import(tmp_path: Path) -> None:
    """The script on a small tree: a circle hidden behind a def, and a pack that
    imports a private core module, are both reported."""
    core = tmp_path / "rgym_core"
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "a.py").write_text("from rgym_core import b\n")
    (core / "b.py").write_text("def f():\n    from rgym_core.a import x\n")
    pack = tmp_path / "task-packs" / "demo" / "rgym_task_demo"
    pack.mkdir(parents=True)
    (pack / "__init__.py").write_text("from rgym_core.a import thing\nfrom rgym_core import hookimpl\n")
    code = ("import json, sys, pathlib; sys.path.insert(0, sys.argv[1]); import import_graph as g; "
            "print(json.dumps(g.figures(pathlib.Path(sys.argv[2]))))")
    out = subprocess.run([sys.executable, "-c", code, str(SCRIPT.parent), str(tmp_path)],
                         capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(out.stdout)
    assert data["circles"] == []
    assert data["circles_all"] == [["rgym_core.a", "rgym_core.b"]]
    assert data["private_imports"] == ["rgym_task_demo -> rgym_core.a"]


def test_rgym_core_exports_are_lazy_and_complete() -> None:
    """``import rgym_core`` imports none of its modules but the lazy loader; every
    name of ``__all__`` resolves; ``__all__`` lists every export."""
    code = ("import sys, rgym_core; mods = sorted(m for m in sys.modules if m.startswith('rgym_core.')); "
            "print(mods); names = [n for n in rgym_core.__all__ if getattr(rgym_core, n) is None]; "
            "assert sorted(rgym_core.__all__) == sorted([*rgym_core._EXPORTS, '__version__']); print(names)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['rgym_core.lazy']", "[]"]


def test_every_name_imported_from_rgym_core_is_exported() -> None:
    """A name missing from ``rgym_core._EXPORTS`` fails only when the import runs
    (inside a function, maybe in a rare path); read every import in the repository."""
    import ast

    import rgym_core

    folders = ("rgym_core", "task-packs", "plugins", "agents", "tests")
    missing = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "rgym_core" and not node.level:
                    missing += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                                if a.name not in rgym_core._EXPORTS and a.name != "__version__"
                                and not (ROOT / "rgym_core" / a.name).is_dir()
                                and not (ROOT / "rgym_core" / f"{a.name}.py").is_file()]
    assert not missing, f"imported from rgym_core but not exported (add to _EXPORTS): {missing}"


PUBLIC_PREFIXES = ("rgym_core.testing", "rgym_core.grader_kit", "rgym_core.scoring")


def _lazy_packages() -> list[Path]:
    tops = [ROOT / "rgym_core", ROOT / "plugins", ROOT / "agents", ROOT / "task-packs"]
    return sorted(p for top in tops for p in top.rglob("__init__.py")
                  if "/build/" not in str(p) and "lazy_exports(__name__" in p.read_text())


@pytest.mark.parametrize("init", _lazy_packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_type_checking_imports_agree_with_the_lazy_exports(init: Path) -> None:
    """What type checkers and IDEs see (the ``if TYPE_CHECKING:`` imports) is what runs
    (``_EXPORTS``): every name from the same module, none missing, none extra."""
    import ast

    tree = ast.parse(init.read_text())
    exports: dict[str, str] = {}
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets):
                exports = ast.literal_eval(node.value)  # type: ignore[arg-type]
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            for imp in ast.walk(node):
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    typed.update({a.asname or a.name: imp.module for a in imp.names})
    assert exports, f"{init}: no _EXPORTS"
    if not init.is_relative_to(ROOT / "rgym_core"):  # a distribution: the public API only
        private = {n: m for n, m in exports.items()
                   if m.startswith("rgym_core.") and not m.startswith(PUBLIC_PREFIXES)}
        assert not private, f"{init}: lazy exports from private core modules: {private}"
    assert typed == exports, {
        "exported, not under TYPE_CHECKING": sorted(set(exports) - set(typed)),
        "under TYPE_CHECKING, not exported": sorted(set(typed) - set(exports)),
        "from another module": sorted(n for n in set(typed) & set(exports) if typed[n] != exports[n])}
