"""rgym: a plugin-based framework for evaluating AI research agents.

This package is rgym's public API: packs, plugins and agents import from here
(and from the test kit :mod:`rgym_core.testing` and the grader kit
:mod:`rgym_core.grader_kit`), never from another module of ``rgym_core``, whose
modules may move.  ``tests/test_import_graph.py`` holds every distribution of the
repository to this.  The extension surface is documented in
:mod:`rgym_core.hookspecs`.

Every name is imported from its module the first time it is used (PEP 562), so
``import rgym_core`` costs almost nothing; type checkers read the imports under
``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rgym_core.lazy import lazy_exports

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    # Specs and records
    "DEFAULT_DISK_MB": "rgym_core.specs", "FieldError": "rgym_core.specs", "Baseline": "rgym_core.specs", "Budget": "rgym_core.specs", "DatasetMount": "rgym_core.specs",
    "DatasetSpec": "rgym_core.specs", "GraderSpec": "rgym_core.specs", "Metric": "rgym_core.specs",
    "PreparedDataset": "rgym_core.specs", "Resources": "rgym_core.specs",
    "SubTask": "rgym_core.specs", "TaskSpec": "rgym_core.specs",
    "Action": "rgym_core.records", "EndReason": "rgym_core.records",
    "EpisodeResult": "rgym_core.records", "ExitStatus": "rgym_core.records",
    "Observation": "rgym_core.records", "ScoreRecord": "rgym_core.records",
    "Step": "rgym_core.records", "Usage": "rgym_core.records",
    "SpecError": "rgym_core.errors",
    "parse_yaml": "rgym_core.serialization", "read_data_file": "rgym_core.serialization",
    "structure": "rgym_core.serialization", "unstructure": "rgym_core.serialization",
    "better": "rgym_core.direction", "glob_match": "rgym_core.globs",
    # The extension surface and the interfaces plugins implement
    "hookimpl": "rgym_core.hookspecs",
    "Agent": "rgym_core.agents", "AgentConfig": "rgym_core.agents",
    "AgentFormatError": "rgym_core.agents", "AgentSpec": "rgym_core.agents",
    "BudgetExceeded": "rgym_core.agents", "EpisodeStatus": "rgym_core.agents",
    "TaskContext": "rgym_core.agents",
    "DEFAULT_OUTPUT_LIMIT": "rgym_core.sandbox", "ExecResult": "rgym_core.sandbox",
    "EffectiveResources": "rgym_core.sandbox",
    "Sandbox": "rgym_core.sandbox", "SandboxConfig": "rgym_core.sandbox",
    "SandboxError": "rgym_core.sandbox", "SandboxFacts": "rgym_core.sandbox",
    "SandboxSpec": "rgym_core.sandbox", "TIMEOUT_EXIT_CODE": "rgym_core.sandbox",
    "WorkspaceLayout": "rgym_core.sandbox", "truncate_output": "rgym_core.sandbox",
    "truncation_marker": "rgym_core.sandboxes.output",
    "Tool": "rgym_core.tools", "ToolArg": "rgym_core.tools", "ToolContext": "rgym_core.tools",
    "ToolError": "rgym_core.tools", "ToolResult": "rgym_core.tools",
    "ToolSchema": "rgym_core.tools",
    "ModelCheckError": "rgym_core.models", "ModelClient": "rgym_core.models",
    "ModelFactory": "rgym_core.models", "ModelProviderSpec": "rgym_core.models",
    "ModelRequirements": "rgym_core.models", "ModelResponse": "rgym_core.models",
    "ToolCall": "rgym_core.models", "check_model_client": "rgym_core.models",
    "CommandFormatError": "rgym_core.aci.commands", "parse_action": "rgym_core.aci.commands",
    "render_tool_docs": "rgym_core.aci.commands",
    "lazy_command": "rgym_core.commands.lazy",
    "lazy_exports": "rgym_core.lazy",
    # The registry, runs and run directories
    "Registry": "rgym_core.registry", "RegistryError": "rgym_core.registry",
    "create_model_client": "rgym_core.registry", "load_registry": "rgym_core.registry",
    "RunConfig": "rgym_core.runner", "RunError": "rgym_core.runner",
    "resolve_datasets": "rgym_core.runner", "run_episode": "rgym_core.runner",
    "RESULT_FILE": "rgym_core.rundir", "RunDir": "rgym_core.rundir",
    "RunDirError": "rgym_core.rundir", "RunState": "rgym_core.rundir",
    "TRAJECTORY_FILE": "rgym_core.rundir", "iter_numbered_records": "rgym_core.rundir",
    "iter_run_dirs": "rgym_core.rundir", "write_result": "rgym_core.rundir",
    "TrajFormatError": "rgym_core.mlgym_traj", "finite_number": "rgym_core.mlgym_traj",
    "read_traj": "rgym_core.mlgym_traj",
    "BrokenRun": "rgym_core.runcheck", "broken_line": "rgym_core.runcheck",
    "record_problem": "rgym_core.runcheck", "result_problem": "rgym_core.runcheck",
    "run_problem": "rgym_core.runcheck", "trajectory_problem": "rgym_core.runcheck",
    "RunSummary": "rgym_core.runs", "safe_summary": "rgym_core.runs",
    "EXIT_FAILED": "rgym_core.cli", "EXIT_OK": "rgym_core.cli", "EXIT_USAGE": "rgym_core.cli",
    "get_registry": "rgym_core.cli",
    "archive_digest": "rgym_core.snapshot", "snapshot_archive": "rgym_core.snapshot",
    "DroppedEntry": "rgym_core.workspace_export", "ExportReport": "rgym_core.workspace_export",
    "WorkspaceExportError": "rgym_core.workspace_export",
    "WorkspaceQuotaExceeded": "rgym_core.workspace_export",
    "extract_archive": "rgym_core.workspace_export",
    # Packs and datasets
    "load_dataset": "rgym_core.packs", "load_task": "rgym_core.packs",
    "load_tasks": "rgym_core.packs", "package_path": "rgym_core.packs",
    "DatasetError": "rgym_core.datasets", "check_data_dir": "rgym_core.datasets", "fetch_raw": "rgym_core.datasets",
    "verify_checksums": "rgym_core.datasets", "cache_root": "rgym_core.datasets",
    "download": "rgym_core.datasets", "locate_source": "rgym_core.datasets",
    "sha256_file": "rgym_core.datasets", "starter_folders": "rgym_core.datasets",
    "MANIFEST": "rgym_core.dataset_cache", "cached_build": "rgym_core.dataset_cache",
    "file_digests": "rgym_core.dataset_cache", "problems": "rgym_core.dataset_cache",
    "KNOWN_KEYS": "rgym_core.leakage", "LeakageConfigError": "rgym_core.leakage",
    "LeakagePolicy": "rgym_core.leakage", "normalise_id": "rgym_core.leakage",
    "normalise_title": "rgym_core.leakage", "normalise_url": "rgym_core.leakage",
    "task_policy": "rgym_core.leakage",
    "RequestFailed": "rgym_core.http", "RetryPolicy": "rgym_core.http",
    "call_with_retries": "rgym_core.http", "check_status": "rgym_core.http",
    "is_retryable_status": "rgym_core.http", "retry_after_seconds": "rgym_core.http",
    # Grading
    "EVAL_MOUNT": "rgym_core.grader_protocol",
    "GraderSecret": "rgym_core.grader_secret", "read_or_make_secret": "rgym_core.grader_secret",
    # Sweep executors (for executor plugins)
    "EpisodeJob": "rgym_core.sweep.executors", "Executor": "rgym_core.sweep.executors",
    "ExecutorOptions": "rgym_core.sweep.executors", "ExecutorSpec": "rgym_core.sweep.executors",
    "JobUpdate": "rgym_core.sweep.executors", "job_requirements": "rgym_core.sweep.executors",
    "SweepFolder": "rgym_core.sweep.folder",
    "Cell": "rgym_core.sweep.matrix",
    "job_payload": "rgym_core.sweep.worker", "plugin_names": "rgym_core.sweep.worker",
    "run_job": "rgym_core.sweep.worker", "unpack_run": "rgym_core.sweep.worker",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [  # every name of _EXPORTS (tests/test_import_graph.py checks), and the version
    "Action", "Agent", "AgentConfig", "AgentFormatError", "AgentSpec", "Baseline", "BrokenRun",
    "Budget", "BudgetExceeded", "Cell", "CommandFormatError", "DEFAULT_DISK_MB",
    "DEFAULT_OUTPUT_LIMIT", "DatasetError", "DatasetMount", "DatasetSpec", "DroppedEntry",
    "EVAL_MOUNT", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "EffectiveResources", "EndReason",
    "EpisodeJob",
    "EpisodeResult", "EpisodeStatus", "ExecResult", "Executor", "ExecutorOptions",
    "ExecutorSpec", "ExitStatus", "ExportReport", "FieldError", "GraderSecret", "GraderSpec",
    "JobUpdate", "KNOWN_KEYS", "LeakageConfigError", "LeakagePolicy", "MANIFEST", "Metric",
    "ModelCheckError", "ModelClient", "ModelFactory", "ModelProviderSpec", "ModelRequirements",
    "ModelResponse", "Observation", "PreparedDataset", "RESULT_FILE", "Registry",
    "RegistryError", "RequestFailed", "Resources", "RetryPolicy", "RunConfig", "RunDir",
    "RunDirError", "RunError", "RunState", "RunSummary", "Sandbox", "SandboxConfig", "SandboxError",
    "SandboxFacts", "SandboxSpec", "ScoreRecord", "SpecError", "Step", "SubTask",
    "SweepFolder", "TIMEOUT_EXIT_CODE", "TRAJECTORY_FILE", "TaskContext", "TaskSpec", "Tool",
    "ToolArg", "ToolCall", "ToolContext", "ToolError", "ToolResult", "ToolSchema",
    "TrajFormatError", "Usage",
    "WorkspaceExportError", "WorkspaceLayout", "WorkspaceQuotaExceeded", "__version__",
    "archive_digest", "better", "broken_line", "cache_root", "cached_build",
    "call_with_retries", "check_data_dir", "check_model_client", "check_status",
    "create_model_client", "download", "extract_archive", "fetch_raw", "file_digests", "finite_number",
    "get_registry", "glob_match", "hookimpl", "is_retryable_status", "iter_numbered_records",
    "iter_run_dirs", "job_payload", "job_requirements", "lazy_command", "lazy_exports",
    "load_dataset", "load_registry", "load_task", "load_tasks", "locate_source",
    "normalise_id", "normalise_title", "normalise_url", "package_path", "parse_action",
    "parse_yaml", "plugin_names", "problems", "read_data_file", "read_or_make_secret", "read_traj",
    "record_problem", "render_tool_docs", "resolve_datasets", "result_problem",
    "retry_after_seconds", "run_episode", "run_job", "run_problem", "safe_summary", "sha256_file",
    "snapshot_archive", "starter_folders", "structure", "task_policy", "trajectory_problem",
    "truncate_output", "truncation_marker", "unpack_run", "unstructure", "verify_checksums",
    "write_result",
]

if TYPE_CHECKING:  # for type checkers and IDEs; nothing is imported at run time
    from rgym_core.aci.commands import CommandFormatError, parse_action, render_tool_docs
    from rgym_core.agents import (
        Agent,
        AgentConfig,
        AgentFormatError,
        AgentSpec,
        BudgetExceeded,
        EpisodeStatus,
        TaskContext,
    )
    from rgym_core.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, get_registry
    from rgym_core.commands.lazy import lazy_command
    from rgym_core.dataset_cache import MANIFEST, cached_build, file_digests, problems
    from rgym_core.datasets import (
        DatasetError,
        cache_root,
        check_data_dir,
        download,
        fetch_raw,
        locate_source,
        sha256_file,
        starter_folders,
        verify_checksums,
    )
    from rgym_core.direction import better
    from rgym_core.errors import SpecError
    from rgym_core.globs import glob_match
    from rgym_core.grader_protocol import EVAL_MOUNT
    from rgym_core.grader_secret import GraderSecret, read_or_make_secret
    from rgym_core.hookspecs import hookimpl
    from rgym_core.http import (
        RequestFailed,
        RetryPolicy,
        call_with_retries,
        check_status,
        is_retryable_status,
        retry_after_seconds,
    )
    from rgym_core.lazy import lazy_exports
    from rgym_core.leakage import (
        KNOWN_KEYS,
        LeakageConfigError,
        LeakagePolicy,
        normalise_id,
        normalise_title,
        normalise_url,
        task_policy,
    )
    from rgym_core.mlgym_traj import TrajFormatError, finite_number, read_traj
    from rgym_core.models import (
        ModelCheckError,
        ModelClient,
        ModelFactory,
        ModelProviderSpec,
        ModelRequirements,
        ModelResponse,
        ToolCall,
        check_model_client,
    )
    from rgym_core.packs import load_dataset, load_task, load_tasks, package_path
    from rgym_core.records import (
        Action,
        EndReason,
        EpisodeResult,
        ExitStatus,
        Observation,
        ScoreRecord,
        Step,
        Usage,
    )
    from rgym_core.registry import Registry, RegistryError, create_model_client, load_registry
    from rgym_core.runcheck import (
        BrokenRun,
        broken_line,
        record_problem,
        result_problem,
        run_problem,
        trajectory_problem,
    )
    from rgym_core.rundir import (
        RESULT_FILE,
        TRAJECTORY_FILE,
        RunDir,
        RunDirError,
        RunState,
        iter_numbered_records,
        iter_run_dirs,
        write_result,
    )
    from rgym_core.runner import RunConfig, RunError, resolve_datasets, run_episode
    from rgym_core.runs import RunSummary, safe_summary
    from rgym_core.sandbox import (
        DEFAULT_OUTPUT_LIMIT,
        TIMEOUT_EXIT_CODE,
        EffectiveResources,
        ExecResult,
        Sandbox,
        SandboxConfig,
        SandboxError,
        SandboxFacts,
        SandboxSpec,
        WorkspaceLayout,
        truncate_output,
    )
    from rgym_core.sandboxes.output import truncation_marker
    from rgym_core.serialization import parse_yaml, read_data_file, structure, unstructure
    from rgym_core.snapshot import archive_digest, snapshot_archive
    from rgym_core.specs import (
        DEFAULT_DISK_MB,
        Baseline,
        Budget,
        DatasetMount,
        DatasetSpec,
        FieldError,
        GraderSpec,
        Metric,
        PreparedDataset,
        Resources,
        SubTask,
        TaskSpec,
    )
    from rgym_core.sweep.executors import (
        EpisodeJob,
        Executor,
        ExecutorOptions,
        ExecutorSpec,
        JobUpdate,
        job_requirements,
    )
    from rgym_core.sweep.folder import SweepFolder
    from rgym_core.sweep.matrix import Cell
    from rgym_core.sweep.worker import job_payload, plugin_names, run_job, unpack_run
    from rgym_core.tools import Tool, ToolArg, ToolContext, ToolError, ToolResult, ToolSchema
    from rgym_core.workspace_export import (
        DroppedEntry,
        ExportReport,
        WorkspaceExportError,
        WorkspaceQuotaExceeded,
        extract_archive,
    )
