"""Reading the files labkit is given (YAML and JSON), with one-line errors naming the file.

Every loader of a user-supplied file reads it through here, so a missing, unreadable, non-UTF-8
or syntactically broken file fails the same way everywhere: ConfigError(path, "line L, column C",
problem), which the CLI prints as one line with exit code 2. The path `-` is standard input (read
once, as kubectl's `-f -`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from labkit.errors import ConfigError
from labkit.paths import BUILTIN_LABS


STDIN = "-"
_stdin_text: str | None = None


def read_text(path) -> str:
    global _stdin_text
    if str(path) == STDIN:
        if _stdin_text is None:
            import sys
            try:
                _stdin_text = sys.stdin.read()
            except UnicodeDecodeError as exc:
                raise ConfigError("STDIN", None, f"not UTF-8 text (byte {exc.start})") from None
        return _stdin_text
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(path, None, "file not found") from None
    except IsADirectoryError:
        raise ConfigError(path, None, "is a directory, expected a file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, None, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read: {exc.strerror or exc}") from None


def yaml_error(path, exc: yaml.YAMLError) -> ConfigError:
    """The parser's complaint as one line: where (line, column) and what."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if isinstance(exc, yaml.reader.ReaderError):
        where, problem = f"character {exc.position + 1}", f"character {exc.character!r} is not allowed in YAML"
    return ConfigError(path, where, f"not valid YAML: {problem}" + (f" ({context})" if context else ""))


# Texts parsed before and what they gave: a check reads the same shipped files (a lab's Pods, its
# scenario) at every judgement, and PyYAML's pure-Python reader costs milliseconds per kilobyte.
# Each caller gets a copy of its own (deepcopy keeps what YAML aliases share); a text that does not
# parse is not kept, so its error is made afresh.
_PARSED: dict[tuple[bool, str], Any] = {}
_PARSED_MAX = 256
# Files labkit ships (its labs and the package's own data) are read with libyaml's parser, ~15x
# faster than PyYAML's pure-Python one (every command reads at least one lab.yaml of 10-30 KB);
# tests/test_inputs_shipped.py proves that both give the same for every file shipped. A student's
# file is read by the pure-Python parser, whose verdicts and error messages the labs' checks and
# tests are written against.
_SHIPPED = (BUILTIN_LABS.resolve(), Path(__file__).resolve().parent)
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def shipped(path) -> bool:
    """Whether `path` is a file labkit ships (under its labs or its package)."""
    if str(path) == STDIN:
        return False
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved.is_relative_to(root) for root in _SHIPPED)


def _parse(path, text: str, every: bool) -> Any:
    loader = _FAST_LOADER if _FAST_LOADER is not None and shipped(path) else yaml.SafeLoader
    return list(yaml.load_all(text, Loader=loader)) if every else yaml.load(text, Loader=loader)


def _parsed(path, text: str, every: bool) -> Any:
    key = (every, text)
    if key not in _PARSED:
        try:
            value = _parse(path, text, every)
        except yaml.YAMLError as exc:
            raise yaml_error(path, exc) from None
        except RecursionError:
            raise ConfigError(path, None, "not valid YAML: nested too deeply") from None
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = value
    return copy.deepcopy(_PARSED[key])


def load_yaml(path, text: str | None = None) -> Any:
    """One YAML document (None for an empty file)."""
    return _parsed(path, read_text(path) if text is None else text, False)


def load_yaml_all(path, text: str | None = None) -> list[Any]:
    """Every document of a YAML file, empty ones included (as None)."""
    return _parsed(path, read_text(path) if text is None else text, True)


def load_json(path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(path, f"line {exc.lineno}, column {exc.colno}", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(path, None, "not valid JSON: nested too deeply") from None
