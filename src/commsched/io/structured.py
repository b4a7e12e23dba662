"""Reading JSON and YAML inputs with one-line errors that name the file."""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from commsched.errors import CommschedError

__all__ = ["read_json", "read_yaml"]


def _text(path: str | os.PathLike[str]) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise CommschedError(f"{path}: cannot read: {e.strerror or e}") from None


def read_json(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON of ``path``; a missing or malformed file is a :class:`CommschedError`."""
    try:
        return json.loads(_text(path))
    except json.JSONDecodeError as e:
        raise CommschedError(f"{path}: invalid JSON at line {e.lineno}: {e.msg}") from None


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """The parsed YAML of ``path``; a missing or malformed file is a :class:`CommschedError`."""
    try:
        return yaml.safe_load(_text(path))
    except yaml.YAMLError as e:
        raise CommschedError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from None
