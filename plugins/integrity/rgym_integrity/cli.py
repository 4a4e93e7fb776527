"""``rgym audit``: the integrity findings of run directories, and an LLM's verdict.

Exit codes: 0 every run is clean (no error finding, nothing for review; with
``--model``, every verdict PASS); 1 a run is flagged, is up for review (a score at
its metric's ceiling or far beyond the reference) or a verdict is SUSPICIOUS or
NEEDS_REVIEW; 2 bad usage or a run directory that cannot be read.

A stored ``integrity.json`` is read as it is, except for the ``snapshot`` check,
which runs again every time: the archives are compared with the gradings now,
since a report written before an archive was replaced cannot vouch for it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rgym_core import EXIT_FAILED, EXIT_OK, EXIT_USAGE, get_registry


@click.command("audit")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--model", default=None, metavar="PROVIDER/MODEL",
              help="Also ask this model for a verdict (PASS, SUSPICIOUS or NEEDS_REVIEW), e.g. "
                   "openai/gpt-4.1, anthropic/claude-sonnet-4-5 or openai-compatible/NAME.")
@click.option("--base-url", default=None, help="The model server's URL (local servers, proxies).")
@click.option("--cost-limit", type=float, default=2.0, show_default=True,
              help="The most one run's audit may spend, in USD (checked before every call).")
@click.option("--token-limit", type=int, default=None, help="The most tokens one run's audit may use.")
@click.option("--max-turns", type=int, default=16, show_default=True,
              help="The most model calls one run's audit may make.")
@click.option("--recheck", is_flag=True,
              help="Run the automatic checks again on the run directory (also for runs the monitor "
                   "did not watch; they always run when a run has no integrity.json).")
@click.option("--force", is_flag=True, help="Ask the model again for runs that already have a verdict.")
@click.option("--evidence", is_flag=True, help="Show each finding's evidence.")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
@click.pass_context
def audit(ctx: click.Context, run_dirs: tuple[Path, ...], model: str | None, base_url: str | None,
          cost_limit: float, token_limit: int | None, max_turns: int, recheck: bool, force: bool,
          evidence: bool, as_json: bool) -> None:
    """Check run directories for forged, leaked or reused results.

    RUN_DIRS are run directories, runs folders or sweep folders.  Each run's
    findings come from its integrity.json (written by the monitor during the
    episode); --recheck, or a run without one, runs the checks on the run
    directory now; the snapshot check (are workspace.tar.gz and snapshots/ what
    was graded?) runs again every time.  Exit 1 also for a run up for review (a
    score at its metric's ceiling or far beyond the reference).  With --model, a model reads the trajectory, the final files
    and the findings through tools, within --cost-limit/--token-limit/--max-turns,
    and records PASS, SUSPICIOUS or NEEDS_REVIEW with its reasons in
    integrity.json (and result.json).
    """
    from rgym_core import RunDirError, iter_run_dirs
    from rgym_integrity.analyze import AnalysisError, analyze_run_dir, refresh_snapshot_findings
    from rgym_integrity.findings import ReportError, read_report, write_report

    if max_turns < 1 or cost_limit <= 0 or (token_limit is not None and token_limit <= 0):
        raise click.UsageError("--max-turns, --cost-limit and --token-limit must be positive")
    runs = []
    for path in run_dirs:
        if not path.exists():
            raise click.UsageError(f"{path}: no such run directory")
        try:
            runs += [Path(r.path) for r in iter_run_dirs(path)]
        except RunDirError as exc:
            raise click.UsageError(str(exc)) from None
    if not runs:
        raise click.UsageError(f"no run directory under {', '.join(map(str, run_dirs))}")
    client = None
    if model is not None:
        client = _client(ctx, model, base_url, cost_limit, token_limit)
    outcome = EXIT_OK
    out: list[dict[str, Any]] = []
    registry = None
    for run_dir in runs:
        try:
            report = None if recheck else read_report(run_dir)
            if report is None:
                if registry is None:
                    registry = _quiet_registry(ctx)
                report = analyze_run_dir(run_dir, registry=registry)
                write_report(run_dir, report)
            elif refresh_snapshot_findings(run_dir, report):
                write_report(run_dir, report)
        except (AnalysisError, ReportError, RunDirError, OSError) as exc:
            click.echo(f"error: {run_dir}: {exc}", err=True)
            outcome = EXIT_USAGE
            continue
        if client is not None and model is not None and \
                (force or not report.audit or report.audit.get("model") != model):
            from rgym_integrity.audit import AuditBudget, audit_run

            if not as_json:
                click.echo(f"auditing {run_dir} with {model} ...", err=True)
            report.audit = audit_run(run_dir, report, client, model=model,
                                     budget=AuditBudget(cost_limit_usd=cost_limit, token_limit=token_limit,
                                                        max_turns=max_turns))
            write_report(run_dir, report)
        _update_result(run_dir, report)
        verdict = (report.audit or {}).get("verdict") if client is not None else None
        if report.flagged or report.review or verdict in ("SUSPICIOUS", "NEEDS_REVIEW"):
            outcome = max(outcome, EXIT_FAILED)
        if as_json:
            out.append({"run_dir": str(run_dir), **report.to_dict()})
        else:
            _print(run_dir, report, evidence=evidence)
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
    sys.exit(outcome)


def _quiet_registry(ctx: click.Context) -> Any:
    try:
        return get_registry(ctx)
    except click.ClickException:
        return None


def _client(ctx: click.Context, model: str, base_url: str | None, cost_limit: float,
            token_limit: int | None) -> Any:
    from rgym_core import ModelRequirements, RegistryError, check_model_client, create_model_client

    try:
        client = create_model_client(model, base_url=base_url, registry=get_registry(ctx))
    except (RegistryError, ValueError, LookupError, OSError, RuntimeError) as exc:
        raise click.UsageError(f"--model {model}: {exc}") from None
    try:
        check_model_client(client, ModelRequirements(cost_limit_usd=cost_limit, token_limit=token_limit,
                                                     probe=True))
    except (ValueError, LookupError, OSError, RuntimeError) as exc:
        raise click.UsageError(f"--model {model}: {exc}") from None
    return client


def _update_result(run_dir: Path, report: Any) -> None:
    """Keep result.json's summary in step with integrity.json."""
    from rgym_core import RunDir, RunDirError, write_result
    from rgym_integrity.findings import EXTRAS_KEY

    run = RunDir(run_dir)
    if not run.result_path.is_file():
        return
    try:
        result = run.result()
    except RunDirError:
        return
    summary = report.summary()
    if result.extras.get(EXTRAS_KEY) != summary:
        result.extras[EXTRAS_KEY] = summary
        write_result(run_dir, result)


def _print(run_dir: Path, report: Any, *, evidence: bool) -> None:
    from rgym_integrity.render import report_lines

    click.echo(f"{run_dir}")
    for line in report_lines(report, evidence=evidence):
        click.echo(f"  {line}")
    audit = report.audit
    if audit and audit.get("violations"):
        for v in audit["violations"][:10]:
            if isinstance(v, dict):
                click.echo(f"    - {v.get('severity', '?')} {v.get('type', '')}: {v.get('description', '')}")
    if audit and audit.get("usage"):
        usage = audit["usage"]
        click.echo(f"  audit cost: ${usage.get('cost_usd', 0):.4f}, {usage.get('input_tokens', 0)}+"
                   f"{usage.get('output_tokens', 0)} tokens, {audit.get('turns')} turn(s)")


__all__ = ["audit"]
