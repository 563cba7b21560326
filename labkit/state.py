"""Per-lab instance state in <state root>/<lab>/, and the LabEnv handed to lab code.

Files (all private to root, mode 0600 / 0700):
  lock            flock held by run / reset / cleanup / solve / check, so they never interleave
  ledger.jsonl    what the lab created (labkit.ledger)
  status.json     {"phase": "building" | "up", "token": ..., "started": ...}
  progress.json   the latest check result per exercise
  credit.json     each exercise's first pass: when, and what the check said (its evidence);
                  kept through `labkit reset`, so a rebuilt lab loses no credit
  ready.json      when each exercise's part of the environment was (re)built (labs read it to
                  tell the student's requests from their own, e.g. in an audit log)
  hints.json      how many hints of each exercise were shown
  logs/           output of the lab's processes
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from labkit import paths, progress
from labkit.errors import LabkitError
from labkit.ledger import Ledger


def write_json_atomic(path: Path, data) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except PermissionError:     # not damaged, only not ours to read: saying "not started" would be false
        raise LabkitError(f"cannot read labkit's state {path}: permission denied "
                          "(labkit keeps it as root: run labkit with sudo)") from None
    except (ValueError, OSError):
        return default   # a damaged state file is treated as absent, never as a crash


# the lab locks this process holds, by lock file and thread (LabState.locked)
_HELD: set[tuple[str, int]] = set()


class LabState:
    def __init__(self, lab_id: str, root: Path | None = None):
        self.lab_id = lab_id
        self.dir = (root or paths.state_root()) / lab_id
        self.ledger = Ledger(self.dir / "ledger.jsonl")

    def ensure_dir(self) -> None:
        try:
            self.dir.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            self.dir.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise LabkitError(f"cannot make the lab's state directory {self.dir}: {exc.strerror} "
                              "(LABKIT_STATE_DIR chooses where labkit keeps its state)") from None

    @contextmanager
    def locked(self, waiting: Callable[[], None] | None = None):
        """The lab's lock (run, reset, cleanup, solve, check and the labs' commands that change
        them), held exclusively; `waiting` is called once when another process holds it, before
        waiting for it. Re-entrant in one thread: code that holds it may call code that takes it."""
        self.ensure_dir()
        key = (str(self.dir / "lock"), threading.get_ident())
        if key in _HELD:            # this thread holds it already: the outer holder releases it
            yield
            return
        fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                fcntl.flock(fd, fcntl.LOCK_EX)
            _HELD.add(key)
            yield
        finally:
            _HELD.discard(key)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- status -------------------------------------------------------------------------
    @property
    def status(self) -> dict:
        return _read_json(self.dir / "status.json", {})

    def set_status(self, **fields) -> None:
        write_json_atomic(self.dir / "status.json", fields)

    def clear_status(self) -> None:
        (self.dir / "status.json").unlink(missing_ok=True)

    def new_token(self) -> str:
        return f"{paths.prefix()}:{self.lab_id}:{secrets.token_hex(6)}"

    @property
    def phase(self) -> str:
        """"not started", "building" (also: crashed while building) or "up"."""
        return self.status.get("phase", "not started")

    # -- progress and hints -------------------------------------------------------------
    @property
    def progress(self) -> dict:
        return _read_json(self.dir / "progress.json", {})

    @property
    def credit(self) -> dict:
        """Exercise id -> its recorded pass: {"at", "time", "points", "message", "details", "build"}."""
        return _read_json(self.dir / "credit.json", {})

    def record_results(self, results) -> None:
        """The latest result of each exercise, and the first pass of each as its credit."""
        now = time.time()
        progress = self.progress
        credit = self.credit
        for r in results:
            progress[r.exercise] = {"status": r.status, "points": r.points, "max_points": r.max_points,
                                    "at": round(now, 3)}
            if r.status == "pass" and r.exercise not in credit:
                credit[r.exercise] = {"at": round(now, 3), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                                                 time.localtime(now)),
                                      "points": r.points, "max_points": r.max_points, "message": r.message,
                                      "details": r.details, "build": self.status.get("token")}
        write_json_atomic(self.dir / "progress.json", progress)
        write_json_atomic(self.dir / "credit.json", credit)

    def clear_progress(self, exercise_id: str | None = None) -> None:
        """Forget the latest results (of one exercise); recorded passes stay, and so do the wrong
        answers checked (a reset is no second first try: answer_tries)."""
        if exercise_id is None:
            (self.dir / "progress.json").unlink(missing_ok=True)
            return
        progress = self.progress
        if progress.pop(exercise_id, None) is not None:
            write_json_atomic(self.dir / "progress.json", progress)

    # -- when each exercise's part was built ----------------------------------------------
    def ready_time(self, exercise_id: str) -> float:
        """When the exercise's part of the environment was last (re)built; 0.0 if never recorded."""
        data = _read_json(self.dir / "ready.json", {})
        return float(data.get(exercise_id) or data.get("*") or 0.0)

    def set_ready(self, exercise_ids=None) -> None:
        """Record that these exercises' parts (None: the whole lab) were just built."""
        data = {} if exercise_ids is None else _read_json(self.dir / "ready.json", {})
        for ex in ["*"] if exercise_ids is None else exercise_ids:
            data[ex] = round(time.time(), 6)
        write_json_atomic(self.dir / "ready.json", data)

    def answer_tries(self, exercise_id: str, attempt: str) -> int:
        """Record that a wrong answer was checked; how many different wrong answers of the
        exercise were checked while the lab existed (resets included). `attempt` tells them apart
        (CheckContext.count_wrong_answer): the answer's digest, and the digest of the failure
        it was told after a dot when that counts too; a record kept before failures were told
        apart holds answers' digests alone, and is read the same way."""
        data = _read_json(self.dir / "tries.json", {})
        seen = data.get(exercise_id) or []
        if attempt not in seen:
            seen.append(attempt)
            data[exercise_id] = seen
            write_json_atomic(self.dir / "tries.json", data)
        return len(seen)

    def wrong_answers_checked(self, exercise_id: str) -> int:
        """How many different wrong answers of the exercise were checked while the lab existed."""
        return len(_read_json(self.dir / "tries.json", {}).get(exercise_id) or [])

    def hints_shown(self, exercise_id: str) -> int:
        return int(_read_json(self.dir / "hints.json", {}).get(exercise_id, 0))

    def set_hints_shown(self, exercise_id: str, count: int) -> None:
        data = _read_json(self.dir / "hints.json", {})
        data[exercise_id] = count
        write_json_atomic(self.dir / "hints.json", data)


class LabEnv:
    """What lab code (lab.py, checks, solutions) gets: the lab, its state, ledger and names."""

    def __init__(self, lab, state: LabState, token: str | None = None):
        self.lab = lab
        self.state = state
        self.dir = state.dir
        self.ledger = state.ledger
        self.prefix = paths.prefix()
        self.token = token or state.status.get("token") or state.new_token()
        self.options = dict(state.status.get("options") or {})   # `labkit run LAB --kubeconfig ...`

    def netns_name(self, host: str) -> str:
        return f"{self.prefix}-{self.lab.id}-{host}"

    def log(self, message: str) -> None:
        progress.step(message)
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "lab.log", "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {message}\n")
