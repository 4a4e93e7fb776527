"""Read the imports of rgym_core and of every distribution in this repository.

Usage: ``python tools/import_graph.py [--json] [--verbose]``

Only the standard library (``ast``) is used; nothing is imported.  For every
module the script records its imports of other modules of the repository in
two kinds:

* module-level: run when the module is imported (including ``try`` blocks and
  class bodies, excluding ``if TYPE_CHECKING:`` blocks, which never run);
* function-level: inside a ``def``, run only when the function is called.

It prints

* the kernel's line count: the lines of ``rgym_core`` minus the modules listed
  in :data:`FEATURES` (the built-in features the kernel should not carry);
* the import circles: strongly connected components of more than one module,
  first of the module-level graph (a circle there means the modules cannot be
  imported in either order alone), then of the whole graph, function-level
  imports included (a circle there is hidden behind a ``def``: the modules
  still depend on each other);
* the upward arrows: imports (either kind) from a module of a lower layer to a
  module of a higher one, the layers being :data:`LAYERS`.

An import of ``a.b.c`` is an arrow to ``a.b.c`` only, not to the packages
``a`` and ``a.b`` that Python imports on the way; ``from a.b import c`` is an
arrow to ``a.b.c`` when that is a module, else to ``a.b``.  ``from rgym_core import
__version__`` is no arrow: the version is defined in the package itself, which
Python has run before any of its modules.

``--json`` prints the figures as one JSON object (the test reads it);
``--verbose`` also lists every circle and upward arrow.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST_FOLDERS = ("task-packs", "plugins", "agents")
# The public API: the only core modules a distribution may import (a module
# listed here covers its submodules).  tests/test_public_api.py enforces it.
PUBLIC_MODULES = ("rgym_core", "rgym_core.testing", "rgym_core.grader_kit", "rgym_core.scoring")

# Layers, lowest first: a module may import from its own layer and those below.
# A module's layer is the first entry whose prefix matches its dotted name
# (an entry ``x`` matches ``x`` and ``x.*``); the last layer, "distributions",
# holds every module outside rgym_core.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # Value types with no behaviour beyond validation and (de)serialization.
    ("types", ("rgym_core.records", "rgym_core.direction", "rgym_core.errors",
               "rgym_core.serialization", "rgym_core.specs", "rgym_core.lazy",
               "rgym_core.globs")),
    # The extension surface and the interfaces it names (with the archive format and
    # the output truncation every sandbox backend shares).
    ("interfaces", ("rgym_core.hookspecs", "rgym_core.sandbox", "rgym_core.sandboxes.output",
                    "rgym_core.workspace_export", "rgym_core.agents", "rgym_core.tools",
                    "rgym_core.models", "rgym_core.provides", "rgym_core.http",
                    "rgym_core.progress")),
    # What every episode needs: registry, runner, run directory, the grading protocol
    # (its runner side and the grader kit copied into every evaluation folder).
    ("kernel", ("rgym_core.registry", "rgym_core.packs", "rgym_core.datasets",
                "rgym_core.dataset_cache", "rgym_core.rundir", "rgym_core.trajectory",
                "rgym_core.runner", "rgym_core.episode", "rgym_core.episode_plan",
                "rgym_core.episode_loop", "rgym_core.episode_finish", "rgym_core.grading",
                "rgym_core.grader_protocol", "rgym_core.grader_confinement",
                "rgym_core.grader_secret",
                "rgym_core.grader_kit", "rgym_core.isolation", "rgym_core.snapshot",
                "rgym_core.leakage", "rgym_core.checks", "rgym_core.runcheck",
                "rgym_core.scripted")),
    # Built-in features.
    ("features", ("rgym_core.sweep", "rgym_core.scoring", "rgym_core.aci",
                  "rgym_core.mock_model", "rgym_core.sandboxes", "rgym_core.agent_process",
                  "rgym_core.demo", "rgym_core.scaffold", "rgym_core.grade_runs",
                  "rgym_core.resume", "rgym_core.runs", "rgym_core.replay",
                  "rgym_core.mlgym_traj")),
    # The command line (each feature's commands included), and the kit pack authors
    # test with.
    ("cli", ("rgym_core.cli", "rgym_core.commands", "rgym_core.runs_cli",
             "rgym_core.grade_cli", "rgym_core.sweep.cli", "rgym_core.scoring.cli",
             "rgym_core.testing")),
    # The built-in plugin, which registers every feature and command through the hooks
    # (the registry loads it by name, as it loads an entry point).
    ("builtin", ("rgym_core.builtin",)),
    # The public face: rgym_core/__init__ re-exports from every layer below.
    ("api", ("rgym_core",)),
]
DISTRIBUTION_LAYER = "distributions"

# Modules of rgym_core that are features, not kernel (issue #24, item 1).
FEATURES = ("rgym_core.sweep", "rgym_core.scoring", "rgym_core.aci", "rgym_core.mock_model",
            "rgym_core.sandboxes", "rgym_core.agent_process", "rgym_core.testing", "rgym_core.scaffold", "rgym_core.commands",
            "rgym_core.runs", "rgym_core.runs_cli", "rgym_core.grade_cli", "rgym_core.grade_runs",
            "rgym_core.resume",
            "rgym_core.demo", "rgym_core.checks", "rgym_core.replay",
            "rgym_core.workspace_export")


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> int:
    """The index of ``name``'s layer in :data:`LAYERS` (``len(LAYERS)`` outside the core)."""
    if not _matches(name, "rgym_core"):
        return len(LAYERS)
    best, best_len = len(LAYERS) - 1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if _matches(name, prefix) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def layer_name(index: int) -> str:
    return LAYERS[index][0] if index < len(LAYERS) else DISTRIBUTION_LAYER


def package_roots(root: Path = ROOT) -> list[Path]:
    """The top-level package folders: rgym_core and each distribution's packages."""
    roots = [root / "rgym_core"]
    for folder in DIST_FOLDERS:
        for dist in sorted((root / folder).glob("*")):
            inits = [*dist.glob("*/__init__.py"), *dist.glob("src/*/__init__.py")]
            roots += sorted(p.parent for p in inits
                            if p.parent.name != "tests" and not p.parent.name.endswith(".egg-info"))
    return roots


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the repository's packages, by dotted name (tests and the
    task files of packs excluded)."""
    found: dict[str, Path] = {}
    for pkg in package_roots(root):
        for path in sorted(pkg.rglob("*.py")):
            rel = path.relative_to(pkg.parent).with_suffix("")
            parts = list(rel.parts)
            if "tests" in parts or "__pycache__" in parts:
                continue
            if len(parts) > 2 and parts[1] == "tasks" and not parts[0].startswith("rgym_core"):
                continue  # a pack's task files: copied into sandboxes, never imported here
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Yield every import statement below ``node`` with whether it is inside a def."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.orelse:
                yield from _walk_one(sub, in_function)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _walk(child, True)
        else:
            yield from _walk(child, in_function)


def _walk_one(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.AST, bool]]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, in_function
    else:
        yield from _walk(node, in_function)


def imports_of(name: str, path: Path, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """(module-level, function-level) imports of repository modules by module ``name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_pkg = path.name == "__init__.py"
    top, inner = set(), set()
    for node, in_function in _walk(tree, False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if alias.name == "__version__" and "." not in base:
                    continue
                targets.append(sub if sub in known else base)
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                (inner if in_function else top).add(target)
    return top, inner


def is_public(name: str) -> bool:
    """True for ``rgym_core`` itself and the public subpackages' modules."""
    return name == "rgym_core" or any(_matches(name, m) for m in PUBLIC_MODULES[1:])


def private_imports(known: dict[str, Path], top: dict[str, set[str]],
                    inner: dict[str, set[str]]) -> list[str]:
    """``module -> core module`` for each import (either kind) of a non-public core
    module by a distribution."""
    return sorted(f"{a} -> {b}" for a in known if not _matches(a, "rgym_core")
                  for b in top[a] | inner[a] if _matches(b, "rgym_core") and not is_public(b))


def graph(root: Path = ROOT) -> tuple[dict[str, Path], dict[str, set[str]], dict[str, set[str]]]:
    known = modules(root)
    top: dict[str, set[str]] = {}
    inner: dict[str, set[str]] = {}
    for name, path in known.items():
        top[name], inner[name] = imports_of(name, path, known)
    return known, top, inner


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows from a module of a lower layer to one of a higher layer."""
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if layer_of(b) > layer_of(a))


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def figures(root: Path = ROOT) -> dict:
    known, top, inner = graph(root)
    core = {n: p for n, p in known.items() if _matches(n, "rgym_core")}
    kernel = {n: p for n, p in core.items() if not any(_matches(n, f) for f in FEATURES)}
    return {
        "modules": len(known),
        "core_modules": len(core),
        "core_lines": sum(_lines(p) for p in core.values()),
        "kernel_modules": len(kernel),
        "kernel_lines": sum(_lines(p) for p in kernel.values()),
        "module_level_arrows": sum(len(v) for v in top.values()),
        "function_level_arrows": sum(len(v) for v in inner.values()),
        "circles": circles(top),
        "circles_all": circles({n: top[n] | inner[n] for n in known}),
        "upward_module_level": [list(e) for e in upward(top)],
        "upward_function_level": [list(e) for e in upward(inner)],
        "private_imports": private_imports(known, top, inner),
    }


def main(argv: list[str]) -> int:
    data = figures()
    if "--json" in argv:
        print(json.dumps(data, indent=1))
        return 0
    print(f"modules: {data['modules']} ({data['core_modules']} in rgym_core)")
    print(f"rgym_core: {data['core_lines']} non-blank lines; kernel (rgym_core minus FEATURES): "
          f"{data['kernel_lines']} lines in {data['kernel_modules']} modules")
    print(f"arrows: {data['module_level_arrows']} module-level, "
          f"{data['function_level_arrows']} function-level")
    sizes = ", ".join(str(len(c)) for c in data["circles"]) or "none"
    print(f"circles (module-level): {len(data['circles'])} (sizes: {sizes})")
    sizes = ", ".join(str(len(c)) for c in data["circles_all"]) or "none"
    print(f"circles (function-level imports included): {len(data['circles_all'])} (sizes: {sizes})")
    print(f"upward arrows: {len(data['upward_module_level'])} module-level, "
          f"{len(data['upward_function_level'])} function-level")
    print(f"distribution imports of non-public core modules: {len(data['private_imports'])}")
    if "--verbose" in argv:
        for circle in data["circles"]:
            print("  circle: " + " ".join(circle))
        for circle in data["circles_all"]:
            print("  circle (with function-level): " + " ".join(circle))
        for kind in ("module_level", "function_level"):
            for a, b in data[f"upward_{kind}"]:
                print(f"  up ({kind.replace('_', '-')}): {a} [{layer_name(layer_of(a))}] -> "
                      f"{b} [{layer_name(layer_of(b))}]")
        for line in data["private_imports"]:
            print(f"  private: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
