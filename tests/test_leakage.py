"""The core's leakage policy: one policy for every tool, fed from task settings,
policy files and ResearchGym's blocked_urls.yaml."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from rgym_core.leakage import LeakageConfigError, LeakagePolicy, task_policy

BLOCKED_URLS = """
urls:
  - arxiv.org/abs/2501.13198
  - github.com/WuYichen-97/SD-Lora-CL
patterns:
  - "*SD-LoRA*class*incremental*"
"""


def test_researchgym_blocked_urls_become_patterns_and_papers(tmp_path: Path) -> None:
    path = tmp_path / "blocked_urls.yaml"
    path.write_text(BLOCKED_URLS)
    policy = LeakagePolicy.from_file(path)
    assert policy.url_blocked("https://github.com/wuyichen-97/sd-lora-cl/blob/main/x.py")
    assert policy.url_blocked("https://www.liner.com/review/sd-lora-scalable-for-class-incremental-learning")
    assert policy.url_blocked("https://arxiv.org/pdf/2501.13198v2")  # the paper's id, any page
    assert not policy.url_blocked("https://github.com/other/repo")
    assert policy.withhold_reason(ids=["arXiv:2501.13198"], title="SD-LoRA") == "blocked_paper"


def test_task_policy_merges_shared_and_tool_settings_and_files(tmp_path: Path) -> None:
    (tmp_path / "extra.json").write_text(json.dumps({"blocked_papers": ["10.1109/CVPR.1"],
                                                     "cutoff_date": "2023-06-01"}))
    (tmp_path / "blocked_urls.yaml").write_text(BLOCKED_URLS)
    config = {"leakage": {"cutoff_date": "2024-01-01", "policy_files": ["extra.json", "blocked_urls.yaml"]},
              "literature": {"blocked_url_patterns": ["example.org/secret"]}}
    policy = task_policy(config, "literature", task_id="p/t", base_dir=tmp_path)
    assert policy.cutoff_date == dt.date(2023, 6, 1)  # the earliest cutoff wins
    assert policy.url_blocked("https://doi.org/10.1109/cvpr.1")
    assert policy.url_blocked("http://example.org/secret/page")
    assert policy.url_blocked("https://github.com/WuYichen-97/SD-Lora-CL")
    # Another tool sees the shared policy but not literature's own keys.
    pdf = task_policy(config, "pdf", task_id="p/t", base_dir=tmp_path)
    assert pdf.url_blocked("https://github.com/WuYichen-97/SD-Lora-CL")
    assert not pdf.url_blocked("http://example.org/secret/page")
    again = LeakagePolicy.from_config(policy.to_config())
    assert again.blocked_ids >= policy.blocked_ids and again.blocked_url_patterns == policy.blocked_url_patterns
    assert again.cutoff_date == policy.cutoff_date


def test_missing_policy_file_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(LeakageConfigError, match="fails closed"):
        task_policy({"leakage": {"policy_files": [str(tmp_path / "gone.json")]}}, "literature")


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(LeakageConfigError, match=r"p/t: tool_config.leakage: unknown key\(s\) 'cutof'"):
        task_policy({"leakage": {"cutof": "2024"}}, task_id="p/t")
    with pytest.raises(LeakageConfigError, match=r"tool_config.literature.cutoff_date: expected a date"):
        task_policy({"literature": {"cutoff_date": "soon"}}, "literature", task_id="p/t")


def test_no_tool_pack_imports_another() -> None:
    """The PDF tool reads the policy from the core, not from the literature pack."""
    root = Path(__file__).resolve().parents[1] / "plugins"
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        own = {p.name for p in folder.glob("rgym_*") if p.is_dir()} | \
              {p.name for p in (folder / "src").glob("rgym_*") if p.is_dir()}
        others = {p.name for f in root.iterdir() for p in [*f.glob("rgym_*"), *(f / "src").glob("rgym_*")]
                  if p.is_dir()} - own
        for source in [*folder.glob("rgym_*/**/*.py"), *folder.glob("src/rgym_*/**/*.py")]:
            text = source.read_text()
            for other in others:
                assert f"import {other}" not in text and f"from {other}" not in text, \
                    f"{source} imports the pack {other}"
