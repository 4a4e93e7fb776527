"""The whole repository's test rules (every test folder: tests/, plugins/, task-packs/,
agents/).

* **A skip cannot hide a missing tool in CI.**  Under ``CI=true`` a skipped test
  fails, whatever skipped it (``pytest.skip``, ``skipif``, ``importorskip``, a skip
  at module level), naming the reason: what it needs belongs in ``.ci/setup.d`` or
  the test's distribution.  Two skips stay skips: tests marked ``gpu`` (CI machines
  have none), and skips whose reason starts with ``not applicable`` (the test can
  never apply to that configuration, e.g. a backend without a feature).
* **Two at a time, services one at a time.**  The suite runs on every core
  (``-n auto`` with pytest-xdist, ``--dist loadgroup``): each test file stays on one
  worker (its module fixtures run once), and the tests that share one machine-wide
  service (the Docker engine, the one-node Slurm, Ray) run in that service's group, one
  after another, so no test sees another's containers, jobs or cluster.  ``-n 0``
  runs the suite in one process.
* **A fast loop.**  ``python -m pytest -m "not slow"`` leaves out every test marked
  ``slow``, and the tests that need ``docker``, ``slurm`` or ``ray``, or allow
  themselves more than :data:`SLOW_TIMEOUT_S` seconds, are marked ``slow`` here.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

#: A test allowed more than this many seconds (``@pytest.mark.timeout``) is ``slow``.
SLOW_TIMEOUT_S = 120
#: Markers whose tests are slow by what they need.
SLOW_NEEDS = ("docker", "slurm", "ray", "fullsize")
#: Markers of machine-wide services: the tests of each run one at a time (one xdist group).
SERVICE_GROUPS = ("docker", "slurm", "ray")
#: A skip with a reason that starts so is by design, also in CI.
NOT_APPLICABLE = "not applicable"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    group: dict[str, str] = {}  # test file -> its xdist group: a service it uses, or itself
    for item in items:
        timeout = item.get_closest_marker("timeout")
        long = bool(timeout and timeout.args and float(timeout.args[0]) > SLOW_TIMEOUT_S)
        if long or any(item.get_closest_marker(name) for name in SLOW_NEEDS):
            item.add_marker(pytest.mark.slow)
        file = item.nodeid.split("::", 1)[0]
        service = next((name for name in SERVICE_GROUPS if item.get_closest_marker(name)), None)
        if service or file not in group:
            group[file] = service or group.get(file, file)
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group[item.nodeid.split("::", 1)[0]]))


def _reason(longrepr: Any) -> str:
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _allowed(reason: str, item: pytest.Item | None) -> bool:
    if reason.lower().startswith(NOT_APPLICABLE):
        return True
    return item is not None and item.get_closest_marker("gpu") is not None


def _fail(report: pytest.TestReport | pytest.CollectReport, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = (f"CI=true but this was skipped: {reason}\n(a skip in CI hides a missing "
                       "install step: install what it needs in .ci/setup.d or the test's "
                       "distribution, mark it gpu, or start the reason with 'not applicable' "
                       "where it can never run in this configuration)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not _in_ci() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _reason(report.longrepr)
    if not _allowed(reason, item):
        _fail(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if _in_ci() and report.skipped:
        reason = _reason(report.longrepr)
        if not _allowed(reason, None):
            _fail(report, reason)
