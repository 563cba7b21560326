"""One labkit command on one student machine, over the system ssh client: `labkit check LAB
--format json` (check_lab, for grading and status), or another one (run_labkit: `labkit run LAB`
for prepare, `labkit --version` for status).

ssh runs with BatchMode (never a password or passphrase prompt), a connect timeout, keep-alives,
and the machine's port, user and key from the inventory. The remote command line is built with
shlex.quote, so nothing from the inventory or the command line reaches a shell unquoted; ssh
itself gets its arguments as a list (no local shell) and the host after `--`.

Host keys: trust on first use, pinned per grading directory. ssh runs with
`StrictHostKeyChecking=accept-new` and `UserKnownHostsFile=<out>/known_hosts`: the first grading
run records each machine's key, later runs into the same directory refuse a machine whose key
changed (reported as broken, with ssh's reason), so a grade is never taken from a different
machine that took over the address. Workshop VMs are often rebuilt: delete their lines from
known_hosts (or grade into a fresh directory) after rebuilding them. The user's ssh config
(~/.ssh/config) is read as usual, so jump hosts configured there keep working.

Outcomes: `labkit check` exits 0 (all passed) or 1 (some failed), and both carry a JSON report;
that is "ok". ssh's own failure (exit 255) is "unreachable", retried with exponential backoff,
as is a run that exceeds the timeout; a refused login or a changed host key is "broken" at once.
Anything else — another exit code, output that is not a
labkit JSON report of the asked lab — is "broken", with the reason, and not retried.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.classroom.inventory import Machine

OK, UNREACHABLE, BROKEN = "ok", "unreachable", "broken"
STATUSES = ("pass", "fail", "error")
NOT_TRANSIENT = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED", "Permission denied")


@dataclass
class Settings:
    known_hosts: Path
    timeout: float = 300.0          # seconds for one lab's checks on one machine, per attempt
    connect_timeout: int = 10
    retries: int = 2                # further attempts after an unreachable machine or a timeout
    backoff: float = 1.0            # seconds before the first retry; doubles with each retry
    labkit: str = "labkit"          # the labkit command on the student machines
    reveal_answers: bool = False    # after the deadline: reports carry each failed exercise's right answer


@dataclass
class LabOutcome:
    lab: str
    outcome: str                    # ok | unreachable | broken
    reason: str | None = None
    report: dict | None = None      # the machine's `labkit check --format json` report when ok
    attempts: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"lab": self.lab, "outcome": self.outcome, "reason": self.reason, "attempts": self.attempts,
                "seconds": round(self.seconds, 3), "report": self.report}


def labkit_command(machine: Machine, args: list[str], settings: Settings) -> str:
    """`labkit ARGS` as one shell-quoted command line, as root (sudo -n for another user)."""
    argv = [settings.labkit, *args]
    if machine.user != "root":
        argv = ["sudo", "-n", "--"] + argv      # labkit runs as root; -n: fail rather than prompt
    return shlex.join(argv)


def remote_command(machine: Machine, lab: str, settings: Settings) -> str:
    # `--format json`, not `-o json`: a student machine still on an older labkit reads `-o` as a
    # file name (and would write the report into ./json); this labkit reads --format as -o, with a
    # deprecation line on stderr, which grading does not parse
    return labkit_command(machine, ["check", lab, "--format", "json"]
                          + (["--reveal-answers"] if settings.reveal_answers else []), settings)


def ssh_argv(machine: Machine, lab: str | None, settings: Settings, command: str | None = None) -> list[str]:
    """ssh's argv for the lab's checks on the machine, or for another remote `command` line."""
    argv = [
        "ssh", "-T",
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={settings.connect_timeout}",
        "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
        "-o", "StrictHostKeyChecking=accept-new",
        "-o", f"UserKnownHostsFile={settings.known_hosts}",
        "-o", "LogLevel=ERROR",
        "-p", str(machine.port),
        "-l", machine.user,
    ]
    if machine.key:
        argv += ["-i", machine.key, "-o", "IdentitiesOnly=yes"]
    for key, value in machine.options:
        argv += ["-o", f"{key}={value}"]
    return argv + ["--", machine.host, command if command is not None else remote_command(machine, lab, settings)]


def _last_line(text: str, limit: int = 300) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[:limit] + "..."


def parse_report(stdout: str, lab: str) -> dict:
    """The machine's JSON report, checked for the shape labkit writes; ValueError says what is off."""
    try:
        rep = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise ValueError(f"output is not JSON ({exc.msg} at line {exc.lineno})")
    if not isinstance(rep, dict) or not isinstance(rep.get("results"), list):
        raise ValueError("output is not a labkit check report (no results list)")
    if rep.get("lab") != lab:
        raise ValueError(f"the report is of lab {str(rep.get('lab'))[:60]!r}, not {lab!r}")
    for key in ("score", "max_score", "passed", "total"):
        if not isinstance(rep.get(key), int) or isinstance(rep.get(key), bool):
            raise ValueError(f"the report's {key} is not a number")
    for key in ("title", "host", "time"):
        if not isinstance(rep.get(key), str):
            raise ValueError(f"the report's {key} is not a string")
    for i, r in enumerate(rep["results"]):
        if not isinstance(r, dict):
            raise ValueError(f"results[{i}] is not a mapping")
        for key in ("exercise", "title", "message"):
            if not isinstance(r.get(key), str):
                raise ValueError(f"results[{i}].{key} is not a string")
        if r.get("status") not in STATUSES:
            raise ValueError(f"results[{i}].status is not one of {', '.join(STATUSES)}")
        for key in ("points", "max_points"):
            if not isinstance(r.get(key), int) or isinstance(r.get(key), bool):
                raise ValueError(f"results[{i}].{key} is not a number")
        if not isinstance(r.get("duration_s", 0), (int, float)):
            raise ValueError(f"results[{i}].duration_s is not a number")
        r.setdefault("duration_s", 0.0)
        if not isinstance(r.get("details", {}), dict):
            raise ValueError(f"results[{i}].details is not a mapping")
        recorded = r.setdefault("recorded", None)
        if recorded is not None and not (isinstance(recorded, dict) and isinstance(recorded.get("time", ""), str)):
            raise ValueError(f"results[{i}].recorded is not a recorded pass")
    return rep


def check_lab(machine: Machine, lab: str, settings: Settings) -> LabOutcome:
    """Run the lab's checks on the machine; never raises for anything the machine does."""
    return _with_retries(ssh_argv(machine, lab, settings), settings, lambda proc: _check_outcome(proc, lab, settings), lab)


@dataclass
class CommandOutcome:
    """One other labkit command on one machine (`labkit run LAB`, `labkit --version`)."""
    outcome: str                    # ok (exit 0) | unreachable | broken
    reason: str | None = None
    stdout: str = ""
    attempts: int = 0
    seconds: float = 0.0


def run_labkit(machine: Machine, args: list[str], settings: Settings) -> CommandOutcome:
    """`labkit ARGS` as root on the machine, with check_lab's timeout, retries and outcomes; ok only
    when it exits 0. Never raises for anything the machine does."""
    command = labkit_command(machine, args, settings)

    def interpret(proc: subprocess.CompletedProcess) -> CommandOutcome:
        if proc.returncode == 0:
            return CommandOutcome(OK, None, proc.stdout)
        detail = _last_line(proc.stderr) or _last_line(proc.stdout) or "no output"
        if proc.returncode == 127:
            detail = f"{settings.labkit!r} not found on the machine ({detail})"
        return CommandOutcome(BROKEN, f"labkit {args[0]} exited {proc.returncode}: {detail}", proc.stdout)

    return _with_retries(ssh_argv(machine, None, settings, command), settings, interpret, None)


def _with_retries(argv: list[str], settings: Settings, interpret, lab: str | None):
    start = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        kind, reason, proc = _ssh(argv, settings)
        if proc is not None:
            outcome = interpret(proc)
        elif lab is not None:
            outcome = LabOutcome(lab, kind, reason)
        else:
            outcome = CommandOutcome(kind, reason)
        outcome.attempts = attempt
        if outcome.outcome != UNREACHABLE or attempt > settings.retries:
            outcome.seconds = time.monotonic() - start
            return outcome
        time.sleep(settings.backoff * 2 ** (attempt - 1))


def _kill_group(proc: subprocess.Popen) -> None:
    """Only while ssh is alive and not yet reaped: its group id is still its own."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _ssh(argv: list[str], settings: Settings) -> tuple[str, str | None, subprocess.CompletedProcess | None]:
    """Run ssh once: (kind, reason, None) when ssh itself failed or timed out, else (OK, None, the
    completed process) whatever the remote command's exit code."""
    try:
        # a session of its own: on a timeout, ssh and anything it started (a ProxyCommand) are killed
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", start_new_session=True)
    except OSError as exc:
        return BROKEN, f"cannot run ssh: {exc}", None
    try:
        stdout, stderr = proc.communicate(timeout=settings.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return UNREACHABLE, f"no answer within {settings.timeout:g} s", None
    if proc.returncode == 255:
        line = _last_line(stderr) or "connection failed (exit 255)"
        reason = line if line.startswith("ssh:") else f"ssh: {line}"
        # refused keys and changed host keys do not get better by trying again
        kind = BROKEN if any(s in stderr for s in NOT_TRANSIENT) else UNREACHABLE
        return kind, reason, None
    return OK, None, subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)


def _check_outcome(proc: subprocess.CompletedProcess, lab: str, settings: Settings) -> LabOutcome:
    if proc.returncode not in (0, 1):
        detail = _last_line(proc.stderr) or _last_line(proc.stdout) or "no output"
        if proc.returncode == 127:
            detail = f"{settings.labkit!r} not found on the machine ({detail})"
        return LabOutcome(lab, BROKEN, f"labkit check exited {proc.returncode}: {detail}")
    try:
        report = parse_report(proc.stdout, lab)
    except ValueError as exc:
        return LabOutcome(lab, BROKEN, f"labkit check exited {proc.returncode} with unusable output: {exc}")
    return LabOutcome(lab, OK, None, report)
