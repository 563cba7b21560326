"""Long-lived processes a lab starts (pod servers, the API server, "containers").

Each process carries LABKIT_OWNER=<token> in its environment, and the token is recorded in the
ledger before the process is started. Cleanup finds processes by that token, so a crash between
starting a process and noting its PID loses nothing, and a reused PID is never mistaken for ours.
Children inherit the variable, so a whole process tree is found and stopped together.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Sequence

OWNER_VAR = "LABKIT_OWNER"


def _environ_has(pid: str, needle: bytes, prefix: bool) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    if needle not in data:      # most processes: no need to split their environment
        return False
    for item in data.split(b"\0"):
        if item == needle or (prefix and item.startswith(needle)):
            return True
    return False


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] in (b"Z", b"X")


def start_time(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat, proc(5));
    None for a process that is gone or a zombie. With its pid, it names one process for the
    machine's uptime: a reused pid has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()     # from field 3 (state) on: the name may hold spaces
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def same_process(pid: int, started: int) -> bool:
    """Whether the process `pid` that started at `started` (start_time) is still alive: one read
    of its /proc/<pid>/stat instead of a pass over every process's environment (find)."""
    return start_time(pid) == started


def find(token: str, *, prefix: bool = False) -> list[int]:
    """PIDs of live processes whose LABKIT_OWNER equals `token` (or starts with it, if prefix)."""
    needle = f"{OWNER_VAR}={token}".encode()
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and _environ_has(name, needle, prefix):
            if not _is_zombie(int(name)):
                pids.append(int(name))
    return pids


# running(): the PID last found alive for each token, in this process
_SEEN: dict[str, int] = {}


def running(token: str) -> bool:
    """Whether a live process carries LABKIT_OWNER=`token`: bool(find(token)), but the process
    found last time is asked first (`owns`: one process's environment, not a pass over every
    process). A lab's health check (is_up) asks this for each of its processes before every check,
    reset and solution."""
    pid = _SEEN.get(token)
    if pid is not None and owns(pid, token):
        return True
    found = find(token)
    if found:
        _SEEN[token] = found[0]
    else:
        _SEEN.pop(token, None)
    return bool(found)


def owns(pid: int, token: str) -> bool:
    """Whether the live process `pid` carries LABKIT_OWNER=`token` (what find(token) would include
    it for), without a pass over every process."""
    return pid != os.getpid() and _environ_has(str(pid), f"{OWNER_VAR}={token}".encode(), False) \
        and not _is_zombie(pid)


def find_any(tokens: set[str]) -> list[int]:
    """PIDs of live processes whose LABKIT_OWNER is one of `tokens` (one pass over /proc)."""
    wanted = {f"{OWNER_VAR}={t}".encode() for t in tokens}
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                items = f.read().split(b"\0")
        except OSError:
            continue
        if not wanted.isdisjoint(items) and not _is_zombie(int(name)):
            pids.append(int(name))
    return pids


def kill(pids: Sequence[int], grace: float = 2.0) -> None:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL whatever is left; wait until gone."""
    pids = list(pids)
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            _reap_children()
            pids = [p for p in pids if not _is_zombie(p)]
            if not pids:
                return
            time.sleep(0.02)
    if pids:
        raise RuntimeError(f"processes {pids} survived SIGKILL")


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def spawn(env, tag: str, argv: Sequence[str], *, netns: str | None = None,
          cwd: str | os.PathLike | None = None, extra_env: dict | None = None,
          pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start a detached, tracked process for the lab `env` (a LabEnv); output goes to a log file.

    With `netns`, the process runs in that lab network namespace.
    """
    token = f"{env.token}/{tag}"
    env.ledger.record("process", token=token, tag=f"{env.lab.id}/{tag}")
    child_env = dict(os.environ)
    child_env.update(extra_env or {})
    child_env[OWNER_VAR] = token
    if netns is not None:
        argv = ["nsenter", f"--net=/run/netns/{netns}", "--", *argv]
    log_dir = Path(env.dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    record = _started_path(env, tag)
    record.unlink(missing_ok=True)      # a record of an earlier process names one that is gone
    with open(log_dir / f"{tag.replace('/', '_')}.log", "ab") as log:
        proc = subprocess.Popen(
            list(argv), env=child_env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, pass_fds=tuple(pass_fds),
        )
    _wait_for_exec(proc)
    started = start_time(proc.pid)
    if started is not None:
        tmp = record.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": proc.pid, "start": started}))
        os.replace(tmp, record)
    return proc


def _wait_for_exec(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """Return once the new program's environment is readable in /proc, so that find() and
    running() see the process from the moment spawn() returns. Popen returns when the child's
    close-on-exec descriptors are closed, which the kernel does before it lays out the new
    program's arguments and environment (fs/exec.c begin_new_exec, then fs/binfmt_elf.c
    create_elf_tables): in between, /proc/<pid>/environ reads empty. On a loaded machine that
    window was long enough for a find() right after spawn() to miss the process. (A process
    started through nsenter execs once more, in place, and has that window again: remove_all's
    repeated scans cover it.)"""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline and not _environ_laid_out(proc.pid):
        time.sleep(0.001)


def _environ_laid_out(pid: int) -> bool:
    """Whether /proc/<pid>/environ has content (or cannot be read: nothing to wait for)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return bool(f.read(1))
    except OSError:
        return True


def _started_path(env, tag: str) -> Path:
    return Path(env.dir) / "logs" / f"{tag.replace('/', '_')}.started.json"


def alive(env, tag: str) -> bool:
    """Whether the process spawn() started for the lab `env` under `tag` still lives: the pid and
    start time spawn() recorded (same_process: one read of /proc/<pid>/stat), as the
    mount-propagation node's record does, instead of a pass over every process's environment. A
    lab's health check (is_up) asks it before every check, reset and solution. Without a record (a
    spawn cut short), a live process carrying the owner token (running)."""
    try:
        record = json.loads(_started_path(env, tag).read_text())
        pid, started = int(record["pid"]), int(record["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return running(owner_token(env, tag))
    return same_process(pid, started)


def spawn_until_ready(env, tag: str, argv: Sequence[str], *, netns: str | None = None,
                      timeout: float = 10.0) -> bool:
    """spawn() a process that says it is ready by writing one byte to the descriptor given after
    `--ready-fd` (added to argv here); whether it did within `timeout` seconds."""
    read_end, write_end = os.pipe()
    try:
        spawn(env, tag, [*argv, "--ready-fd", str(write_end)], netns=netns, pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        return bool(select.select([read_end], [], [], timeout)[0] and os.read(read_end, 1))
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


def owner_token(env, tag: str) -> str:
    return f"{env.token}/{tag}"


def remove_recorded(entry: dict) -> bool:
    return remove_all({entry["token"]})


def remove_all(tokens: set[str]) -> bool:
    """Stop every process carrying one of `tokens`; True if there were any.

    A process in the middle of execve() briefly shows an empty /proc/<pid>/environ, so a single
    scan can miss it: keep scanning until three scans in a row find nothing.
    """
    removed = False
    quiet_scans = 0
    while quiet_scans < 3:
        pids = find_any(tokens)
        if pids:
            kill(pids)
            removed = True
            quiet_scans = 0
        else:
            quiet_scans += 1
            if quiet_scans < 3:
                time.sleep(0.01)
    return removed
