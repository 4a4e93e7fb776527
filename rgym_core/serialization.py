"""Reading and writing rgym's data types as YAML and JSON (attrs + cattrs).

A bad file never produces a traceback: :class:`SpecError` carries one line,
``path: field.path: what is wrong``.  The field path comes from cattrs' own
error transformation (:func:`cattrs.transform_error`) with rgym's formatter;
validators of spec classes raise :class:`~rgym_core.specs.FieldError` to name
the field they check.

YAML is parsed with libyaml's C loader when PyYAML was built with it.
"""

from __future__ import annotations

import enum
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs
import cattrs
import yaml
from cattrs.cols import list_structure_factory, mapping_structure_factory
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError
from cattrs.gen import make_dict_structure_fn
from cattrs.v import format_exception as cattrs_format_exception
from cattrs.v import transform_error

from rgym_core.errors import SpecError
from rgym_core.specs import (
    MEASUREMENT_FIELDS,
    PROFILE_SECTIONS,
    WHOLE_SECTIONS,
    FieldError,
    TaskSpec,
)

T = TypeVar("T")

#: The YAML loader: libyaml's C loader when present (several times faster).
YAML_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ValueProblem(ValueError):
    """A value of the wrong kind, found by one of rgym's structuring hooks; its
    text is shown as it is."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _origin(tp: Any) -> Any:
    """``typing.get_origin``, typed loosely (``Literal``, ``list``, ``dict``...)."""
    return typing.get_origin(tp)


def _merge_profiles(data: Any) -> Any:
    """Apply each profile of a raw task mapping over the task's own sections, so
    that the profile's partial ``budget: {time_limit_s: ...}`` is validated (and
    stored) as a whole budget.  Anything malformed is left for cattrs to report."""
    if not isinstance(data, Mapping) or not isinstance(data.get("profiles"), Mapping):
        return data
    merged: dict[str, Any] = {}
    for name, profile in data["profiles"].items():
        if not isinstance(profile, Mapping):
            merged[name] = profile
            continue
        out = dict(profile)
        for section in PROFILE_SECTIONS:
            given, base = profile.get(section), data.get(section)
            if section in WHOLE_SECTIONS:
                continue  # replaced whole
            if isinstance(given, Mapping) and isinstance(base, Mapping):
                if section == "baseline" and "scores" in given:
                    # the profile's own measurement: where the task's was measured does not carry over
                    base = {k: v for k, v in base.items() if k not in MEASUREMENT_FIELDS}
                out[section] = {**base, **given}
        merged[name] = out
    return {**data, "profiles": merged}


def _make_converter(forbid_extra: bool) -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=forbid_extra, detailed_validation=True)
    conv.register_structure_hook(Path, lambda v, _: Path(v))
    conv.register_unstructure_hook(Path, str)

    def structure_float(v: Any, _: Any) -> float:
        if isinstance(v, bool):
            raise ValueProblem(f"expected a number, got {v!r}")
        if isinstance(v, str) and v.strip().lower() in ("nan", "inf", "-inf"):
            return float(v)
        if not isinstance(v, int | float):
            raise ValueProblem(f"expected a number, got {v!r}")
        return float(v)

    def structure_int(v: Any, _: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise ValueProblem(f"expected an integer, got {v!r}")
        return int(v)

    def structure_str(v: Any, _: Any) -> str:
        if isinstance(v, dict | list):
            raise ValueProblem(f"expected a string, got {type(v).__name__}")
        return str(v)

    def structure_bool(v: Any, _: Any) -> bool:
        if not isinstance(v, bool):
            raise ValueProblem(f"expected true or false, got {v!r}")
        return v

    def structure_enum(v: Any, tp: Any) -> Any:
        try:
            return tp(v)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in tp)
            raise ValueProblem(f"must be one of {choices}, got {v!r}") from None

    # StrEnum/IntEnum before str/int in the method resolution order: enums stay enums.
    for base in (enum.Enum, enum.StrEnum, enum.IntEnum):
        conv.register_structure_hook(base, structure_enum)
        conv.register_unstructure_hook(base, lambda v: v.value)
    conv.register_structure_hook(float, structure_float)
    conv.register_structure_hook(int, structure_int)
    conv.register_structure_hook(str, structure_str)
    conv.register_structure_hook(bool, structure_bool)

    def literal_hook(tp: Any) -> Any:
        allowed = typing.get_args(tp)

        def structure_literal(v: Any, _: Any) -> Any:
            if v not in allowed:
                choices = ", ".join(repr(a) for a in allowed)
                raise ValueProblem(f"must be one of {choices}, got {v!r}")
            return v

        return structure_literal

    conv.register_structure_hook_factory(lambda t: _origin(t) is typing.Literal, literal_hook)

    def list_hook(tp: Any) -> Any:
        base = list_structure_factory(tp, conv)

        def structure_list(v: Any, t: Any) -> Any:
            if not isinstance(v, list | tuple):
                raise ValueProblem(f"expected a list, got {type(v).__name__}")
            return base(v, t)

        return structure_list

    conv.register_structure_hook_factory(lambda t: _origin(t) is list, list_hook)

    def attrs_hook(cl: Any) -> Any:
        base = make_dict_structure_fn(cl, conv, _cattrs_forbid_extra_keys=forbid_extra,
                                      _cattrs_detailed_validation=True)

        def structure_attrs(v: Any, t: Any) -> Any:
            if not isinstance(v, Mapping):
                raise ValueProblem(f"expected a mapping of {_type_name(cl)} fields, "
                                   f"got {type(v).__name__}")
            if cl is TaskSpec:
                v = _merge_profiles(v)
            return base(v, t)

        return structure_attrs

    conv.register_structure_hook_factory(attrs.has, attrs_hook)

    def dict_hook(tp: Any) -> Any:
        base = mapping_structure_factory(tp, conv)

        def structure_dict(v: Any, t: Any) -> Any:
            if not isinstance(v, Mapping):
                raise ValueProblem(f"expected a mapping, got {type(v).__name__}")
            return base(v, t)

        return structure_dict

    conv.register_structure_hook_factory(lambda t: _origin(t) is dict, dict_hook)
    return conv


#: Strict converter for spec files: unknown keys are errors.
spec_converter = _make_converter(forbid_extra=True)
#: Lenient converter for records (trajectories and results) written by other versions.
record_converter = _make_converter(forbid_extra=False)

_ROOT = "\x00"  # the path root given to transform_error: never part of a message
_FIELD = "\x01"  # separates a validator's field name from its message


def _format(exc: BaseException, tp: type | None) -> str:
    """rgym's formatter for :func:`cattrs.transform_error`."""
    if isinstance(exc, FieldError):
        return f"{exc.field}{_FIELD}{exc.message}"
    if isinstance(exc, ValueProblem):
        return str(exc)
    if isinstance(exc, ForbiddenExtraKeysError):
        keys = ", ".join(sorted(exc.extra_fields))
        return f"unknown field(s): {keys}; check the spelling or remove them"
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)  # a validator of a class outside rgym_core.specs
    return cattrs_format_exception(exc, tp)


def _field_path(raw: str) -> str:
    return raw.removeprefix(_ROOT).removeprefix(".")


def spec_problems(exc: BaseException) -> list[tuple[str, str]]:
    """Every problem in a structuring error, as ``(field.path, message)`` pairs."""
    out = []
    for line in transform_error(exc, path=_ROOT, format_exception=_format):
        message, _, path = line.rpartition(f" @ {_ROOT}")
        path = _field_path(_ROOT + path)
        if _FIELD in message:
            name, _, message = message.partition(_FIELD)
            path = f"{path}.{name}" if path else name
        out.append((path, message))
    return out


def structure(data: Any, cls: type[T], source: str = "<value>", *, strict: bool = True) -> T:
    """Build ``cls`` from plain data, raising :class:`SpecError` (the first
    problem found) on bad input."""
    conv = spec_converter if strict else record_converter
    if not isinstance(data, dict):
        raise SpecError(source, "", f"expected a mapping of fields, got {type(data).__name__}")
    try:
        return conv.structure(data, cls)
    except (ClassValidationError, IterableValidationError, ForbiddenExtraKeysError, ValueError,
            TypeError, KeyError, AttributeError) as exc:
        field, message = spec_problems(exc)[0]
        raise SpecError(source, field, message) from None


def unstructure(obj: Any) -> Any:
    """Plain data (dicts, lists, numbers, strings) for any rgym record or spec."""
    return record_converter.unstructure(obj)


def parse_yaml(text: str) -> Any:
    """Parse YAML text with the fastest safe loader available."""
    return yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader


def read_data_file(path: Path) -> Any:
    """Parse a YAML or JSON file, raising :class:`SpecError` for syntax errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), "", "file not found") from None
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(str(path), "", "not UTF-8 text") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return parse_yaml(text)
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
