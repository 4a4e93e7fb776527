"""Numbers in text, and metric values stated in text.

* :func:`numbers_in` finds the numbers a command printed (the "computed" pool);
* :func:`statements_in` finds metric values a text states: ``eval_score = 3400``,
  ``"accuracy": 0.97``, ``r2: 0.95``, ``test accuracy of 97.3%``, ``0.93 F1``, and
  the metric columns of a CSV/Markdown table;
* :func:`matches` says whether a stated value is one of the computed numbers as
  people quote them: rounded or cut to the digits written, or as a percentage.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Iterable, Iterator, Sequence

from attrs import define

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]*[A-Za-z_])")
_NUM_TEXT = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
#: The words that make a name a metric's.
METRIC_WORDS = frozenset({
    "acc", "accuracy", "accuracies", "score", "scores", "r2", "r^2", "rmse", "mse", "mae", "mape",
    "f1", "f1score", "auc", "auroc", "auprc", "roc", "precision", "recall", "loss", "error", "err",
    "bleu", "rouge", "rougel", "meteor", "cider", "spice", "reward", "return", "returns", "map",
    "ndcg", "mrr", "iou", "miou", "dice", "perplexity", "ppl", "cpd", "aup", "aur", "aaa",
    "top1", "top5", "winrate", "wer", "cer", "psnr", "ssim", "fid", "elo", "metric", "metrics",
    "result", "results", "performance", "kappa", "mcc", "spearman", "pearson", "correlation",
    "r@1", "r@5", "r@10", "recall@1", "recall@5", "recall@10", "hit@1", "hits@1", "pass@1",
})
#: Words that make a name a setting, not a result (``lr = 0.001``, ``target_acc: 0.9``).
SETTING_WORDS = frozenset({
    "lr", "learning", "rate", "epoch", "epochs", "batch", "seed", "seeds", "estimators",
    "n_estimators", "threshold", "alpha", "beta", "gamma", "lambda", "decay", "dropout", "momentum",
    "step", "steps", "iteration", "iterations", "iters", "size", "dim", "dims", "layers", "heads",
    "hidden", "depth", "width", "weight", "weights", "warmup", "patience", "target", "goal",
    "expected", "tolerance", "tol", "max", "min", "limit", "budget", "num", "count", "version",
    "port", "id", "ids", "index", "rank", "temperature", "temp", "eps", "epsilon", "clip", "k",
    "n", "timeout", "workers", "gpus", "gpu", "cpus", "memory", "samples", "examples", "rows",
    "columns", "features", "classes", "tokens", "length", "len", "vocab", "random", "state",
    "random_state", "fold", "folds", "split", "ratio", "fraction", "percent", "percentile", "quantile",
    "baseline", "reference", "sota", "previous", "paper", "reported",
    # relations: a change or a comparison is no measured value
    "improved", "improvement", "improves", "increase", "increased", "decrease", "decreased", "gain",
    "gained", "delta", "difference", "drop", "dropped", "by", "than", "over", "from", "vs", "versus",
    "relative", "lift", "change", "changed", "margin",
})
#: Words before a metric's name that make the value something other than a result.
QUALIFIERS = frozenset({"target", "goal", "expected", "baseline", "baseline's", "reference", "sota",
                        "previous", "paper", "paper's", "reported", "desired", "required", "minimum",
                        "maximum", "max", "min", "threshold", "initial", "random", "chance"})
#: Words that make a stated value an aggregate the agent may have worked out itself.
AGGREGATE_WORDS = frozenset({"mean", "average", "avg", "median", "std", "stdev", "overall", "aggregate",
                             "averaged", "total", "sum"})
_SEP = r"(?:\s*(?:=|:|->|→|≈|~)\s*|\s+(?:is|was|of|=|reached|reaches|achieved|achieves|achieving|"\
       r"got|gets|at|to)\s+(?:about\s+|around\s+|approximately\s+|~\s*)?|\s+)"
_NAME = r"([A-Za-z][A-Za-z0-9_@^\-/.]*(?:[ _-][A-Za-z][A-Za-z0-9_@^\-/.]*){0,3})"
_FORWARD = re.compile(r"[\"']?" + _NAME + r"[\"']?" + _SEP + r"[\"']?(" + _NUM_TEXT + r")(\s*%)?(?![\w.]*[A-Za-z_])")
_BACKWARD = re.compile(r"(?<![\w.])(" + _NUM_TEXT + r")(\s*%)?\s+(?:on\s+)?(?:the\s+)?(?:test\s+|val\s+|validation\s+)?"
                       r"([A-Za-z][A-Za-z0-9_@^\-]*)")


@define(frozen=True)
class Number:
    """A number written in text: its value, its text and the digits after the point."""

    value: float
    text: str
    decimals: int

    @classmethod
    def parse(cls, text: str) -> Number | None:
        t = text.strip().rstrip("%").strip()
        try:
            value = float(t)
        except ValueError:
            return None
        if not math.isfinite(value):
            return None
        mantissa, _, exponent = t.lower().partition("e")
        decimals = len(mantissa.partition(".")[2]) - (int(exponent) if exponent else 0)
        return cls(value=value, text=t, decimals=max(decimals, 0) if not exponent else decimals)


@define(frozen=True)
class Statement:
    """A metric value stated in text: ``name`` as written, the number, whether it
    was written as a percentage, and an excerpt around it."""

    name: str
    number: Number
    percent: bool = False
    excerpt: str = ""
    line: int = 0

    @property
    def value(self) -> float:
        return self.number.value

    @property
    def aggregate(self) -> bool:
        """A mean, median, total...: possibly worked out from printed values."""
        return any(w in AGGREGATE_WORDS for w in _words(self.name)) or "±" in self.excerpt \
            or "+-" in self.excerpt


def numbers_in(text: str, limit: int = 20000) -> Iterator[Number]:
    """The numbers in ``text`` (at most ``limit``), in order."""
    for n, match in enumerate(_NUMBER.finditer(text)):
        if n >= limit:
            return
        number = Number.parse(match.group(0))
        if number is not None:
            yield number


def _words(name: str) -> list[str]:
    parts = re.split(r"[\s_\-/.]+", name.lower())
    return [p for p in parts if p]


def is_metric_name(name: str, metrics: Iterable[str] = ()) -> bool:
    """Whether ``name`` names a metric (and not a setting): it contains a metric word
    or one of the task's ``metrics``, and no setting word."""
    return _is_metric_name(name, tuple(metrics))


@functools.lru_cache(maxsize=4096)
def _is_metric_name(name: str, metrics: tuple[str, ...]) -> bool:
    low = name.lower().strip("\"' ")
    words = _words(low)
    if not words or any(w in SETTING_WORDS for w in words):
        return False
    task = {m.lower() for m in metrics}
    if low in task or any(w in task for w in words):
        return True
    compact = re.sub(r"[\s_\-]", "", low)
    if compact in METRIC_WORDS or any(m in compact for m in task if len(m) >= 3):
        return True
    return any(w in METRIC_WORDS for w in words)


def _excerpt(text: str, start: int, end: int, width: int = 60) -> str:
    a = max(0, start - width)
    b = min(len(text), end + width)
    return (("..." if a else "") + text[a:b].replace("\n", " ⏎ ") + ("..." if b < len(text) else "")).strip()


def _trim_name(name: str, metrics: Iterable[str]) -> str:
    """The tail of a multi-word match that names the metric ("final test accuracy")."""
    words = re.split(r"(\s+)", name.strip())
    tokens = [w for w in words if w.strip()]
    for i in range(len(tokens)):
        candidate = " ".join(tokens[i:])
        if is_metric_name(candidate, metrics):
            return candidate
    return name.strip()


def statements_in(text: str, metrics: Iterable[str] = (), *, limit: int = 500) -> list[Statement]:
    """Metric values ``text`` states (see the module docstring).  ``metrics``: the
    task's metric names (always recognised).  Trivial values (0) are skipped."""
    metrics = list(metrics)
    out: list[Statement] = []
    seen: set[tuple[int, int]] = set()
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(line_starts)
        while lo + 1 < hi:
            mid = (lo + hi) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid
        return lo + 1

    def add(name: str, num_text: str, pct: bool, start: int, end: int, num_pos: int) -> None:
        if num_pos in {p for p, _ in seen}:
            return
        number = Number.parse(num_text)
        if number is None or number.value == 0:
            return
        seen.add((num_pos, 0))
        out.append(Statement(name=name, number=number, percent=pct,
                             excerpt=_excerpt(text, start, end), line=line_of(start)))

    for match in _FORWARD.finditer(text):
        raw = match.group(1)
        name = _trim_name(raw, metrics)
        if not is_metric_name(name, metrics):
            continue
        before = _words(raw[: len(raw) - len(name)])
        if before and before[-1] in QUALIFIERS:  # "target accuracy: 0.99", "baseline r2 = 0.87"
            continue
        add(name, match.group(2), bool(match.group(3)), match.start(), match.end(), match.start(2))
        if len(out) >= limit:
            return out
    for match in _BACKWARD.finditer(text):
        name = match.group(3)
        if not is_metric_name(name, metrics) or name.lower() in ("score", "result", "results", "error"):
            continue
        add(name, match.group(1), bool(match.group(2)), match.start(), match.end(), match.start(1))
        if len(out) >= limit:
            break
    out.extend(table_statements(text, metrics, limit=limit - len(out), skip_lines={s.line for s in out}))
    return out


def table_statements(text: str, metrics: Iterable[str] = (), *, limit: int = 500,
                     skip_lines: set[int] | None = None) -> list[Statement]:
    """The values in the metric columns of a CSV, TSV or Markdown table in ``text``."""
    metrics = list(metrics)
    skip_lines = skip_lines or set()
    lines = text.splitlines()
    out: list[Statement] = []
    i = 0
    while i < len(lines) and len(out) < limit:
        line = lines[i]
        sep = "|" if line.count("|") >= 2 else ("\t" if "\t" in line else ("," if line.count(",") >= 1 else None))
        if sep is None:
            i += 1
            continue
        header = _cells(line, sep)
        metric_cols = [j for j, h in enumerate(header) if h and is_metric_name(h, metrics)
                       and Number.parse(h) is None]
        if not metric_cols:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and len(out) < limit:
            row_line = lines[j]
            if sep == "|" and re.fullmatch(r"[\s|:\-]+", row_line):
                j += 1
                continue
            row = _cells(row_line, sep)
            if len(row) < 2 or (sep == "|" and "|" not in row_line):
                break
            for col in metric_cols:
                if col < len(row) and j + 1 not in skip_lines:
                    cell = row[col].strip().strip("*`")
                    number = Number.parse(cell.split("±")[0].split("+-")[0].strip())
                    if number is not None and number.value != 0:
                        out.append(Statement(name=header[col], number=number, percent=cell.endswith("%"),
                                             excerpt=f"{header[col]} column: {row_line.strip()[:120]}",
                                             line=j + 1))
            j += 1
        i = j
    return out


def _cells(line: str, sep: str) -> list[str]:
    if sep == "|":
        return [c.strip() for c in line.strip().strip("|").split("|")]
    try:
        return [c.strip() for c in next(csv.reader(io.StringIO(line), delimiter=sep))]
    except (csv.Error, StopIteration):
        return line.split(sep)


def _close(stated: float, decimals: int, value: float) -> bool:
    """``value`` written with ``decimals`` digits (rounded or cut) gives ``stated``."""
    if decimals < 0:  # 3.4e3: compare to the written precision
        unit = 10.0 ** (-decimals)
        return abs(value - stated) <= unit / 2 + 1e-12 * max(1.0, abs(stated))
    unit = 10.0 ** -decimals
    eps = 1e-9 * max(1.0, abs(stated))
    if abs(value - stated) <= unit / 2 + eps:
        return True
    cut = math.trunc(value * 10 ** decimals) / 10 ** decimals if abs(value) < 1e15 else value
    return abs(cut - stated) <= eps


def matches(statement: Statement | Number, values: Iterable[float]) -> float | None:
    """The first of ``values`` that ``statement`` quotes (rounded, cut, or as a
    percentage either way), or ``None``."""
    number = statement.number if isinstance(statement, Statement) else statement
    percent = isinstance(statement, Statement) and statement.percent
    stated, decimals = number.value, number.decimals
    for value in values:
        if _close(stated, decimals, value):
            return value
        if (percent or abs(stated) > 1) and abs(value) <= 1.0 and _close(stated, decimals, value * 100):
            return value
        if percent and abs(stated) <= 1 and _close(stated * 100, max(decimals - 2, 0), value):
            return value
        if abs(value) > 1 and abs(stated) <= 1 and _close(stated, decimals, value / 100):
            return value
    return None


def same_number(a: float, values: Sequence[float]) -> bool:
    """Whether ``a`` equals one of ``values`` exactly (as floats)."""
    return any(a == v for v in values)


__all__ = ["AGGREGATE_WORDS", "METRIC_WORDS", "SETTING_WORDS", "Number", "Statement", "is_metric_name", "matches",
           "numbers_in", "same_number", "statements_in", "table_statements"]
