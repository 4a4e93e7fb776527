"""How a sweep shows itself: a live table on a terminal, one line per finished
episode elsewhere, JSON event lines for scripts (``--json``).

The live table and the lines go to stderr, so stdout holds only the final
summary (the one ``rgym score SWEEP_DIR`` prints) or the JSON events.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import IO, Any

from rgym_core.sweep.status import QUEUED, RUNNING, WAITING, SweepStatus, duration_text


def _score_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def render(status: SweepStatus, *, max_running: int = 8) -> Any:
    """The live table as a rich renderable."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    total = status.total
    done, failed = status.count("done"), status.count("failed")
    running = status.count(RUNNING) + status.count(WAITING)
    pending = status.count("pending")
    queued = status.count(QUEUED)
    eta = status.eta_s()
    head = Text.assemble(
        ("rgym sweep ", "bold"), (status.sweep_dir, "cyan"), f"  ({status.executor})\n",
        ("done ", ""), (f"{done}/{total}", "green"), "  queued ", (str(queued), "blue" if queued else ""),
        "  running ", (str(running), "yellow"),
        "  failed ", (str(failed), "red" if failed else ""), f"  pending {pending}",
        f"  retries {status.retries}", f"  cost ${status.cost_usd:.4f}",
        f"  elapsed {duration_text(status.elapsed_s)}",
        f"  ETA {duration_text(eta) if eta is not None else '?'}",
        ("  stopping: waiting for running episodes (Ctrl-C again: exit now)" if status.cancelling else "",
         "bold red"))
    table = Table(show_edge=False, pad_edge=False, expand=False)
    for name, justify in (("task", "left"), ("done", "right"), ("queued", "right"), ("running", "right"),
                          ("failed", "right"), ("pending", "right"), ("mean score", "right"),
                          ("cost", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for tally in status.tallies():
        mean = tally.mean_score
        table.add_row(tally.task, f"{tally.done}/{tally.total}", str(tally.queued) if tally.queued else "",
                      str(tally.running) if tally.running else "",
                      str(tally.failed) if tally.failed else "", str(tally.pending) if tally.pending else "",
                      (f"{_score_text(mean)} {tally.metric}" if mean is not None else "-"),
                      f"${tally.cost_usd:.4f}")
    parts: list[Any] = [head, table]
    active = [r for r in status.rows.values() if r.state in (RUNNING, WAITING, QUEUED)]
    if active:
        lines = Text()
        now = time.monotonic()
        for row in sorted(active, key=lambda r: r.started or now)[:max_running]:
            age = duration_text(now - row.started) if row.started else "-"
            what = ("waiting for another process" if row.state == WAITING
                    else "queued (the scheduler has not started it)" if row.state == QUEUED
                    else f"step {row.step or 0}")
            attempt = f", attempt {row.attempt}" if row.attempt > 1 else ""
            lines.append(f"  > {row.cell.label}: {what}, {age}, ${row.cost_usd:.4f}{attempt}\n")
        if len(active) > max_running:
            lines.append(f"  ... and {len(active) - max_running} more\n")
        parts.append(lines)
    return Group(*parts)


class Display:
    """The reporter of one sweep invocation (an event sink for the engine)."""

    def __init__(self, status_getter: Any, *, mode: str, stream: IO[str] | None = None,
                 json_stream: IO[str] | None = None) -> None:
        self.mode = mode  # "live", "lines", "json", "quiet"
        self.get_status = status_getter
        self.stream = stream or sys.stderr
        self.json_stream = json_stream or sys.stdout
        self._live: Any = None
        self._lock = threading.Lock()
        self._last_refresh = 0.0

    @staticmethod
    def choose(as_json: bool, quiet: bool, stream: IO[str] | None = None) -> str:
        if as_json:
            return "json"
        if quiet:
            return "quiet"
        target = stream or sys.stderr
        return "live" if getattr(target, "isatty", lambda: False)() else "lines"

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream)
            self._live = Live(render(self.get_status()), console=console, refresh_per_second=4,
                              get_renderable=lambda: render(self.get_status()), transient=False)
            self._live.start()

    def close(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.update(render(self.get_status()))
            live.stop()

    def final(self) -> None:
        """After the sweep: the per-task table once (the live display already shows it)."""
        if self.mode == "lines":
            from rich.console import Console

            Console(file=self.stream, width=120).print(render(self.get_status()))

    def __call__(self, event: dict[str, Any]) -> None:
        """Handle one engine event."""
        if self.mode == "json":
            with self._lock:
                self.json_stream.write(json.dumps(event, default=str) + "\n")
                self.json_stream.flush()
            return
        if self.mode != "lines":
            return
        kind = event["event"]
        line = None
        if kind == "sweep_start":
            line = (f"sweep {event['sweep_dir']}: {event['cells']} episodes, {event['complete']} already "
                    f"complete, {event['to_run']} to run ({event['executor']})")
        elif kind == "cell_end":
            status = self.get_status()
            finished = status.count("done") + status.count("failed")
            score = event.get("score")
            what = event.get("status") or "no result"
            if score is not None:
                what += f", {event.get('metric')} = {_score_text(score)}"
            if event.get("error") and event.get("outcome") != "done":
                what += f" ({str(event['error']).splitlines()[0][:200]})"
            label = event["cell"]
            line = f"[{finished}/{status.total}] {label}: {event.get('outcome')}: {what}"
        elif kind == "cell_retry":
            line = f"retrying {event['cell']} (attempt {event['attempt']}): {event.get('reason')}"
        elif kind == "cell_queued":
            where = f" as job {event['job_id']}" if event.get("job_id") else ""
            line = f"queued {event['cell']}{where}" + (" (adopted)" if event.get("adopted") else "")
        elif kind == "cell_retired":
            line = f"moved aside {event['cell']}: {event['reason']} -> {event['moved_to']}"
        elif kind == "cell_resumed":
            line = f"resuming {event['cell']}: {event['reason']}"
        elif kind == "sweep_end" and event.get("cancelled"):
            line = (f"sweep stopped by {event.get('stopped_by')}: run the same command again to "
                    "continue")
        if line is not None:
            with self._lock:
                print(line, file=self.stream, flush=True)


__all__ = ["Display", "render"]
