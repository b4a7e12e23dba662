"""Reading JSON and YAML inputs with one-line errors that name the file.

Both go through :func:`commsched.validation.read_text` (gzip, binary files, size bound)
and catch nesting too deep for the parser.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from commsched.errors import CommschedError
from commsched.validation import parse_json, read_text

__all__ = ["read_json", "read_yaml"]


def read_json(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON of ``path``; a missing or malformed file is a :class:`CommschedError`."""
    return parse_json(read_text(path), path)


def read_yaml(path: str | os.PathLike[str]) -> Any:
    """The parsed YAML of ``path``; a missing or malformed file is a :class:`CommschedError`."""
    try:
        return yaml.safe_load(read_text(path))
    except yaml.YAMLError as e:
        raise CommschedError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise CommschedError(f"{path}: YAML nested too deeply") from None
