"""Throwaway plugins for tests: datasets a test generates, registered for the ``rgym``
processes it starts, without installing a distribution.

A pack's tests write fixture data in the real formats, describe it with
:class:`~rgym_core.specs.DatasetSpec` objects, and call :func:`install_dataset_plugin`;
the environment it returns (``PYTHONPATH``) makes every process started with it see
those datasets through the ``rgym`` entry-point group, as if a pack had registered them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from rgym_core.serialization import unstructure
from rgym_core.specs import DatasetSpec

_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")

_PLUGIN = '''"""Throwaway rgym plugin written by rgym_core.testing: the datasets in {folder}/."""
from pathlib import Path

from rgym_core import hookimpl, load_dataset


@hookimpl
def rgym_register_datasets():
    return [load_dataset(p) for p in sorted((Path(__file__).parent / "{folder}").glob("*.json"))]
'''


def install_dataset_plugin(site: Path, specs: Iterable[DatasetSpec], *, name: str) -> dict[str, str]:
    """Register ``specs`` through a plugin written into ``site`` (its spec files, a
    module and a ``.dist-info`` folder naming the entry point ``name`` in the ``rgym``
    group); returns the environment to add: ``PYTHONPATH`` with ``site`` first.

    ``name`` (lower-case letters, digits and ``-``, e.g. ``vision-fixtures``) names the
    plugin; installing the same name again into ``site`` replaces its datasets.  Give
    the specs absolute ``path`` fields: a relative one would be read from ``site``.
    """
    if not _NAME.match(name):
        raise ValueError(f"plugin name {name!r}: use lower-case letters, digits and '-', "
                         f"starting with a letter (e.g. 'vision-fixtures')")
    module = "rgym_" + name.replace("-", "_") + "_plugin"
    spec_dir = site / f"{module}_specs"
    shutil.rmtree(spec_dir, ignore_errors=True)
    spec_dir.mkdir(parents=True)
    for i, spec in enumerate(specs):
        body = unstructure(spec)
        body.pop("root", None)
        (spec_dir / f"{i:03d}-{spec.id.replace('/', '--')}.json").write_text(json.dumps(body, indent=2))
    (site / f"{module}.py").write_text(_PLUGIN.format(folder=spec_dir.name))
    dist = site / f"{module}-0.0.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\n"
                                   f"Version: 0.0.0\n")
    (dist / "entry_points.txt").write_text(f"[rgym]\n{name} = {module}\n")
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": f"{site}{os.pathsep}{path}" if path else str(site)}
