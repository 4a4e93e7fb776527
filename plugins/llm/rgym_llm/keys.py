"""API keys: found in the environment or a ``.env`` file, held in a :class:`Secret`
whose ``repr`` and ``str`` never show the value."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path


class Secret:
    """A string that does not print itself.  ``reveal()`` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret cannot be pickled or serialized")


def parse_dotenv(text: str) -> dict[str, str]:
    """Parse simple ``KEY=VALUE`` lines (``export`` prefix, ``#`` comments and
    single or double quotes allowed; no interpolation)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key:
            values[key] = value
    return values


def read_dotenv(path: Path | None = None) -> dict[str, str]:
    """The ``.env`` file of the working directory (or ``path``); empty when absent."""
    path = path or Path.cwd() / ".env"
    try:
        return parse_dotenv(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError):
        return {}


def find_key(names: Iterable[str], *, environ: Mapping[str, str] | None = None,
             dotenv: Path | None = None) -> tuple[Secret | None, str | None]:
    """The first of ``names`` set (non-empty) in the environment, then in ``.env``.

    Returns the key and where it came from (``"$NAME"`` or ``".env:NAME"``).
    """
    names = list(names)
    env = os.environ if environ is None else environ
    for name in names:
        if env.get(name):
            return Secret(env[name]), f"${name}"
    file_values = read_dotenv(dotenv)
    for name in names:
        if file_values.get(name):
            return Secret(file_values[name]), f".env:{name}"
    return None, None


def redact(text: str, *secrets: Secret | str | None) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for secret in secrets:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text
