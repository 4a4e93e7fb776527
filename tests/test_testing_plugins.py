"""``rgym_core.testing.install_dataset_plugin``: datasets a test generates (fixtures in
the real formats) registered for the ``rgym`` processes it starts, through a throwaway
plugin in a folder of its own, without installing anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rgym_core.specs import DatasetSpec
from rgym_core.testing import install_dataset_plugin, run_cli


def test_datasets_are_registered_for_subprocesses(tmp_path: Path) -> None:
    data = tmp_path / "data" / "tiny"
    data.mkdir(parents=True)
    (data / "rows.csv").write_text("a,b\n1,2\n")
    specs = [DatasetSpec(id="kit-fixture/tiny", description="a generated table", path=str(data),
                         options={"rows": 1}),
             DatasetSpec(id="kit-fixture/other", description="another", options={"note": "x: y"})]
    env = install_dataset_plugin(tmp_path / "site", specs, name="kit-fixtures")
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path / "site")
    listed = run_cli("list", "datasets", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "warning" not in listed.stderr.lower(), listed.stderr  # the plugin loads cleanly
    found = {d["name"]: d for d in json.loads(listed.stdout)}
    assert found["kit-fixture/tiny"]["description"] == "a generated table"
    assert "kit-fixture/other" in found
    # the spec round-trips whole: its path and options survive
    code = ("from rgym_core.registry import load_registry; d = load_registry().dataset('kit-fixture/tiny'); "
            "print(d.path, d.options)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**env, "PATH": "/usr/bin:/bin"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{data} {{'rows': 1}}"


def test_a_second_install_replaces_the_first(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_dataset_plugin(site, [DatasetSpec(id="kit-fixture/old", description="old")], name="kit-fixtures")
    env = install_dataset_plugin(site, [DatasetSpec(id="kit-fixture/new", description="new")],
                                 name="kit-fixtures")
    listed = run_cli("list", "datasets", "--json", env=env)
    ids = {d["name"] for d in json.loads(listed.stdout)}
    assert "kit-fixture/new" in ids and "kit-fixture/old" not in ids


@pytest.mark.parametrize("name", ["", "Has Space", "../up", "a/b"])
def test_a_bad_plugin_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        install_dataset_plugin(tmp_path / "site", [], name=name)
