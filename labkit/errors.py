"""Errors labkit reports to users as one clear line (exit code 2), never as a traceback; and a
check's failure (CheckFailed), which becomes its result."""

from __future__ import annotations


class LabkitError(Exception):
    """A usage or environment error: the CLI prints the message and exits with code 2."""

    exit_code = 2


class ConfigError(LabkitError):
    """A file labkit reads is malformed. Names the file, the field and what was expected."""

    def __init__(self, path, field: str | None, problem: str):
        self.path = str(path)
        # a field name may come from the file itself (an unknown key): keep it printable
        self.field = field if field is None or (isinstance(field, str) and field.isprintable()) else repr(field)
        # one line, whatever the problem's source says (YAML parser messages span several lines)
        self.problem = " ".join(str(problem).split())
        where = f"{self.path}: {self.field}" if self.field else self.path
        super().__init__(f"{where}: {self.problem}")


class NotRoot(LabkitError):
    pass


class LabNotFound(LabkitError):
    pass


class CheckFailed(Exception):
    """Raised inside a check to end it with a failure (message, expected, observed)."""

    def __init__(self, message: str, expected=None, observed=None, *, observed_in: str | None = None,
                 right_answer=None, **details):
        super().__init__(message)
        self.message = message
        self.expected = expected
        self.observed = observed
        self.observed_in = observed_in
        self.right_answer = right_answer
        self.details = details
