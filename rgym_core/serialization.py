"""Reading and writing rgym's data types as YAML and JSON (attrs + cattrs).

A bad file never produces a traceback: :class:`SpecError` carries one line,
``path: field.path: what is wrong``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypeVar

import cattrs
import yaml
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from rgym_core.records import ExitStatus

T = TypeVar("T")


class SpecError(ValueError):
    """A spec file (or value) is invalid.  ``str(err)`` is one line naming the
    file, the field and what is wrong."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field or "(top level)"
        self.message = message
        super().__init__(f"{source}: {self.field}: {message}")


def _make_converter(forbid_extra: bool) -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=forbid_extra, detailed_validation=True)
    conv.register_structure_hook(Path, lambda v, _: Path(v))
    conv.register_unstructure_hook(Path, str)
    conv.register_structure_hook(ExitStatus, lambda v, _: ExitStatus(v))
    conv.register_unstructure_hook(ExitStatus, lambda v: v.value)

    def structure_float(v: Any, _: Any) -> float:
        if isinstance(v, bool):
            raise ValueError(f"expected a number, got {v!r}")
        if isinstance(v, str) and v.strip().lower() in ("nan", "inf", "-inf"):
            return float(v)
        if not isinstance(v, int | float):
            raise ValueError(f"expected a number, got {v!r}")
        return float(v)

    def structure_int(v: Any, _: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise ValueError(f"expected an integer, got {v!r}")
        return int(v)

    def structure_str(v: Any, _: Any) -> str:
        if isinstance(v, dict | list):
            raise ValueError(f"expected a string, got {type(v).__name__}")
        return str(v)

    def structure_bool(v: Any, _: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueError(f"expected true or false, got {v!r}")
        return v

    conv.register_structure_hook(float, structure_float)
    conv.register_structure_hook(int, structure_int)
    conv.register_structure_hook(str, structure_str)
    conv.register_structure_hook(bool, structure_bool)
    return conv


#: Strict converter for spec files: unknown keys are errors.
spec_converter = _make_converter(forbid_extra=True)
#: Lenient converter for records (trajectories and results) written by other versions.
record_converter = _make_converter(forbid_extra=False)


def _walk_errors(exc: BaseException, path: str) -> tuple[str, str]:
    """Find the first leaf error of a cattrs exception group, with its field path."""
    if isinstance(exc, ForbiddenExtraKeysError):
        keys = ", ".join(sorted(exc.extra_fields))
        return path, f"unknown field(s): {keys}; check the spelling or remove them"
    if isinstance(exc, ClassValidationError | IterableValidationError):
        for sub in exc.exceptions:
            note = _note_of(sub)
            child = path
            if note is not None:
                name, kind = note
                if kind == "attr":
                    child = f"{path}.{name}" if path else str(name)
                else:
                    child = f"{path}[{name!r}]" if isinstance(name, str) else f"{path}[{name}]"
            return _walk_errors(sub, child)
        return path, str(exc)
    if isinstance(exc, KeyError):
        return path, "required field missing"
    msg = str(exc)
    m = re.match(r"'(\w+)' (must .*)", msg)
    if m:  # our attrs validators name the attribute first
        return (f"{path}.{m.group(1)}" if path else m.group(1)), m.group(2)
    m = re.match(r"(.*) not in literal typing.Literal\[(.*)\]", msg)
    if m:
        return path, f"must be one of {m.group(2)}, got {m.group(1)!r}"
    if isinstance(exc, TypeError):
        m = re.search(r"missing \d+ required (?:keyword-only |positional )?arguments?: (.*)", msg)
        if m:
            names = re.findall(r"'(\w+)'", m.group(1))
            field = f"{path}.{names[0]}" if path and names else (names[0] if names else path)
            return field, "required field missing"
    return path, msg or type(exc).__name__


def _note_of(exc: BaseException) -> tuple[Any, str] | None:
    for note in getattr(exc, "__notes__", []) or []:
        name = getattr(note, "name", None)
        index = getattr(note, "index", None)
        if name is not None:
            return name, "attr"
        if index is not None:
            return index, "index"
    return None


def structure(data: Any, cls: type[T], source: str = "<value>", *, strict: bool = True) -> T:
    """Build ``cls`` from plain data, raising :class:`SpecError` on bad input."""
    conv = spec_converter if strict else record_converter
    if not isinstance(data, dict):
        raise SpecError(source, "", f"expected a mapping of fields, got {type(data).__name__}")
    try:
        return conv.structure(data, cls)
    except (ClassValidationError, IterableValidationError, ForbiddenExtraKeysError) as exc:
        field, message = _walk_errors(exc, "")
        raise SpecError(source, field, message) from None
    except (ValueError, TypeError) as exc:
        field, message = _walk_errors(exc, "")
        raise SpecError(source, field, message) from None


def unstructure(obj: Any) -> Any:
    """Plain data (dicts, lists, numbers, strings) for any rgym record or spec."""
    return record_converter.unstructure(obj)


def read_data_file(path: Path) -> Any:
    """Parse a YAML or JSON file, raising :class:`SpecError` for syntax errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), "", "file not found") from None
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise SpecError(str(path), f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise SpecError(str(path), where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


def load_spec(path: Path | str, cls: type[T]) -> T:
    """Read a YAML/JSON file into ``cls``; errors are one-line :class:`SpecError`."""
    path = Path(path)
    return structure(read_data_file(path), cls, str(path))


def dumps(obj: Any, **kwargs: Any) -> str:
    """JSON text for an rgym record or spec."""
    return json.dumps(unstructure(obj), default=str, **kwargs)
