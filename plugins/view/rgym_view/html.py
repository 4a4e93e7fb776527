"""The viewer's HTML file: one self-contained page (CSS, script and data inline).

The page holds the run list as JSON and each run's trajectory in its own
``<script>`` element, gzip-compressed and base64-encoded by default (the browser
unpacks it with ``DecompressionStream`` only when the run is opened), so a sweep
of a thousand runs or a 20,000-step trajectory stays a file of a few megabytes
that opens at once.  Nothing is fetched from the network: no CDN, no font, no
image.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from rgym_view import data as view_data
from rgym_view.runs import iter_runs

__all__ = ["build_html", "write_viewer", "default_output"]


def _asset(name: str) -> str:
    return resources.files("rgym_view").joinpath("assets", name).read_text(encoding="utf-8")


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by ``None`` (JSON has neither:
    one of them would stop the browser from reading the whole page)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    """Compact, strict JSON (non-finite numbers become ``null``)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere: the slow path, for this value only
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=str,
                          allow_nan=False)


def _script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = _dumps(value)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def encode_trajectory(trajectory: dict[str, Any], *, compress: bool = True) -> tuple[str, str]:
    """``(encoding, payload)`` of one trajectory as the page embeds it."""
    if not compress:
        return "json", _script_json(trajectory)
    raw = _dumps(trajectory).encode("utf-8")
    packed = gzip.compress(raw, compresslevel=3, mtime=0)  # 6 would take twice as long for 1/8 less
    return "gzip-base64", base64.b64encode(packed).decode("ascii")


def build_html(rows: list[dict[str, Any]], trajectories: Sequence[dict[str, Any] | tuple[str, str] | None], *,
               source: str, title: str | None = None, compress: bool = True, live: bool = False,
               version: str = "", poll_s: float = 2.0) -> str:
    """The page for these run rows and trajectories (``None``: not embedded; a pair
    ``(encoding, payload)``: encoded already by :func:`encode_trajectory`)."""
    meta = {"title": title or f"rgym runs: {source}", "source": source, "generated": time.time(),
            "runs": rows, "live": live, "version": version, "poll_s": poll_s}
    parts = []
    for row, traj in zip(rows, trajectories, strict=True):
        if traj is None:
            continue
        encoding, payload = traj if isinstance(traj, tuple) else encode_trajectory(traj, compress=compress)
        parts.append(f'<script type="application/octet-stream" id="traj-{row["id"]}" '
                     f'data-encoding="{encoding}">{payload}</script>')
    page = _asset("viewer.html")
    # the data goes last: no replacement runs over it
    for key, value in (("@@TITLE@@", _html_text(str(meta["title"]))), ("@@CSS@@", _asset("viewer.css")),
                       ("@@JS@@", _asset("viewer.js").replace("</script", "<\\/script"))):
        page = page.replace(key, value)
    head, _, rest = page.partition("@@META@@")
    middle, _, tail = rest.partition("@@TRAJECTORIES@@")
    return "".join([head, _script_json(meta), middle, "\n".join(parts), tail])


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def default_output(paths: Sequence[Path]) -> Path:
    """``<folder>/rgym-view.html`` beside the runs (a run directory: inside it)."""
    first = Path(paths[0])
    folder = first if first.is_dir() else first.parent
    return folder / "rgym-view.html"


def fingerprint(paths: Sequence[Path]) -> str:
    """A short hash of the run directories' files' sizes and times: it changes when a
    run writes a step, a grading or its result (``--serve`` rebuilds then)."""
    h = hashlib.sha256()
    for run in iter_runs(paths):
        for p in (run.config_path, run.trajectory_path, run.result_path,
                  run.path / "integrity.json"):
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def write_viewer(paths: Sequence[Path | str], output: Path | str | None = None, *,
                 compress: bool = True, with_steps: bool = True,
                 max_output_chars: int = view_data.MAX_OUTPUT_CHARS, live: bool = False,
                 title: str | None = None, problems: list[str] | None = None,
                 with_diffs: bool = True) -> tuple[Path, int]:
    """Write the viewer of every run under ``paths``; returns ``(file, number of runs)``.
    The file is replaced atomically.  ``problems`` (when given) receives one line per
    broken run (see :mod:`rgym_view.data`): those runs are in the page, marked.
    ``with_diffs=False`` leaves out the workspace diffs (no archive is read)."""
    targets = [Path(p) for p in paths]
    out = Path(output) if output is not None else default_output(targets)
    version = fingerprint(targets) if live else ""
    rows, trajectories = view_data.load(targets, with_steps=with_steps, max_output_chars=max_output_chars,
                                        encode=functools.partial(encode_trajectory, compress=compress),
                                        with_diffs=with_diffs)
    if problems is not None:
        problems.extend(str(row["problem"]) for row in rows if row.get("problem"))
    source = ", ".join(str(p) for p in targets)
    page = build_html(rows, trajectories, source=source, title=title, compress=compress, live=live,
                      version=version)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out, len(rows)
