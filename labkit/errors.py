"""Errors labkit reports to users as one clear line (exit code 2), never as a traceback."""

from __future__ import annotations


class LabkitError(Exception):
    """A usage or environment error: the CLI prints the message and exits with code 2."""

    exit_code = 2


class ConfigError(LabkitError):
    """A file labkit reads is malformed. Names the file, the field and what was expected."""

    def __init__(self, path, field: str | None, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {problem}")


class NotRoot(LabkitError):
    pass


class LabNotFound(LabkitError):
    pass
