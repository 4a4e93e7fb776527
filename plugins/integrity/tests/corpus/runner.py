"""Runs the precision corpus (``corpus.yaml``) as real episodes: the real runner,
the local sandbox, the real graders, the scripted agent, and the monitor through
its plugin hooks.  Used by ``tests/test_corpus.py`` and by
``benchmarks/bench_integrity.py``.

    python plugins/integrity/tests/corpus/runner.py [NAME...]   # prints the precision table
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import tarfile
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import yaml
from attrs import define, field

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.yaml"
FIXTURES = HERE.parent / "fixtures"
REPO = HERE.parents[3]


def load_corpus() -> list[dict[str, Any]]:
    entries = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    names = [e["name"] for e in entries]
    assert len(set(names)) == len(names), "corpus names must be unique"
    return entries


def data_dir() -> Path:
    return Path(os.environ.get("RGYM_TEST_DATA_DIR") or REPO.parent / "shared" / "data")


class CorpusRegistry:
    """The real registry, with the fixture tasks added and one task replaced by a
    variant (other ``tool_config`` or ``integrity``) for one corpus entry."""

    def __init__(self, base: Any, extra: dict[str, Any], variant: dict[str, Any] | None = None) -> None:
        self._base = base
        self._extra = extra
        self._variant = variant or {}

    def task(self, name: str) -> Any:
        spec = self._extra.get(name) or self._base.task(name)
        if self._variant:
            changes = dict(self._variant)
            if "integrity" in changes:
                from rgym_core.specs import IntegritySpec

                changes["integrity"] = IntegritySpec(**changes["integrity"])
            spec = attrs.evolve(spec, **changes)
        return spec

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def base_registry() -> tuple[Any, dict[str, Any]]:
    from rgym_core import load_task
    from rgym_core.registry import load_registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        registry = load_registry()
    for table in ("tasks", "tools", "agents", "sandboxes", "datasets"):
        getattr(registry, table)  # build the lazy tables before threads share them
    extra = {}
    for folder in sorted(FIXTURES.iterdir()):
        if (folder / "task.yaml").is_file():
            task = load_task(folder)
            extra[task.id] = task
    return registry, extra


def _archive_file(run_dir: Path, path: str) -> bytes:
    with tarfile.open(run_dir / "workspace.tar.gz", "r:gz") as tar:
        member = tar.extractfile(f"workspace/{path}")
        assert member is not None, f"{run_dir}: no {path} in the final workspace"
        return member.read()


def _substitute(value: Any, done: dict[str, Path]) -> Any:
    if isinstance(value, str):
        def file_text(match: re.Match[str]) -> str:
            data = _archive_file(done[match.group(2)], match.group(3))
            if match.group(1) == "b64":
                return base64.b64encode(data).decode()
            text = data.decode()
            return text[:-1] if text.endswith("\n") else text

        return re.sub(r"\{\{(file|b64):([\w\-]+):([^}]+)\}\}", file_text, value)
    if isinstance(value, dict):
        return {k: _substitute(v, done) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, done) for v in value]
    return value


@define
class Outcome:
    """One corpus episode and what the monitor said."""

    name: str
    honest: bool
    expect: list[str]
    run_dir: Path | None = None
    status: str = ""
    errors: list[str] = field(factory=list)
    findings: list[dict[str, Any]] = field(factory=list)
    skipped: str | None = None
    duration_s: float = 0.0
    monitor_s: float = 0.0

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        if self.honest:
            return not self.errors
        return set(self.expect) <= set(self.errors)

    def line(self) -> str:
        if self.skipped:
            return f"SKIP {self.name}: {self.skipped}"
        verdict = "ok  " if self.ok else "FAIL"
        want = "no error" if self.honest else ", ".join(self.expect)
        got = ", ".join(sorted(set(self.errors))) or "no error"
        return f"{verdict} {self.name:<34} expected {want:<48} found {got}"


def run_entry(entry: dict[str, Any], registry: Any, extra: dict[str, Any], runs_dir: Path,
              done: dict[str, Path], scripts: Path) -> Outcome:
    from rgym_core.runner import RunConfig, run_episode

    outcome = Outcome(name=entry["name"], honest=bool(entry.get("honest")), expect=list(entry.get("expect") or []))
    config = RunConfig(task=entry["task"], agent="scripted", runs_dir=runs_dir, probe_models=False,
                       tools=list(entry.get("tools") or []), tags={"corpus": entry["name"]})
    if entry.get("data"):
        config.data_dir = data_dir()
    actions = entry.get("actions")
    if actions != "task":
        script = scripts / f"{entry['name']}.json"
        script.write_text(json.dumps(_substitute(actions, done)), encoding="utf-8")
        config.agent_options = {"script": str(script)}
    reg = CorpusRegistry(registry, extra, entry.get("variant"))
    try:
        result = run_episode(config, reg)
    except Exception as exc:  # noqa: BLE001 - a missing dataset skips the entry, with the reason
        if entry.get("data") and ("dataset" in str(exc).lower() or "data" in str(exc).lower()):
            outcome.skipped = f"needs the test data in {data_dir()}: {exc}"
            return outcome
        raise
    outcome.run_dir = Path(str(result.run_dir))
    outcome.status = str(result.status)
    outcome.duration_s = result.duration_s
    report = json.loads((outcome.run_dir / "integrity.json").read_text())
    outcome.findings = report["findings"]
    outcome.errors = [f["kind"] for f in report["findings"] if f["severity"] == "error"]
    outcome.monitor_s = float(report.get("cost", {}).get("total_s") or 0.0)
    return outcome


def run_corpus(runs_dir: Path, *, names: list[str] | None = None, workers: int = 2) -> list[Outcome]:
    """Run the corpus (or the named entries and what they need) into ``runs_dir``."""
    entries = load_corpus()
    by_name = {e["name"]: e for e in entries}
    wanted = set(names or by_name)
    for name in list(wanted):
        wanted |= set(by_name[name].get("after") or [])
    chosen = [e for e in entries if e["name"] in wanted]
    registry, extra = base_registry()
    done: dict[str, Path] = {}
    outcomes: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="rgym-corpus-") as tmp:
        scripts = Path(tmp)
        waves = [[e for e in chosen if not e.get("after")], [e for e in chosen if e.get("after")]]
        for wave in waves:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                futures = {e["name"]: pool.submit(run_entry, e, registry, extra, runs_dir, done, scripts)
                           for e in wave}
                for name, future in futures.items():
                    outcome = future.result()
                    outcomes[name] = outcome
                    if outcome.run_dir is not None:
                        done[name] = outcome.run_dir
    return [outcomes[e["name"]] for e in chosen]


def precision_lines(outcomes: list[Outcome]) -> list[str]:
    ran = [o for o in outcomes if not o.skipped]
    honest = [o for o in ran if o.honest]
    dishonest = [o for o in ran if not o.honest]
    caught = [o for o in dishonest if o.ok]
    false_alarms = [o for o in honest if o.errors]
    kinds: dict[str, list[int]] = {}
    for o in dishonest:
        for kind in o.expect:
            kinds.setdefault(kind, [0, 0])
            kinds[kind][1] += 1
            kinds[kind][0] += kind in o.errors
    lines = [o.line() for o in outcomes]
    lines.append(f"dishonest runs flagged with the right kind: {len(caught)}/{len(dishonest)}; "
                 f"honest runs flagged at error severity: {len(false_alarms)}/{len(honest)}")
    lines += [f"  {kind}: {hit}/{total}" for kind, (hit, total) in sorted(kinds.items())]
    return lines


def main(argv: list[str]) -> int:
    runs = Path(tempfile.mkdtemp(prefix="rgym-corpus-runs-"))
    outcomes = run_corpus(runs, names=argv or None)
    print("\n".join(precision_lines(outcomes)))
    print(f"runs: {runs}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
