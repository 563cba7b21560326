"""`labkit shell <lab> <host>`: a shell (or one command) inside a lab host.

A lab's lab.py may define hosts(env) -> {name: Host}, and before_shell(env, host_name), which may
refuse (LabkitError) to run anything in a host now; with after_shell(env, host_name, started), which
says whether it must look at the lab once the shell or command has ended (started: its start, epoch
seconds; it returns that look, or None), the shell runs as a child of labkit instead of replacing it. A host is a named network namespace, a
process whose namespaces to join (mount namespace "containers"), or both. Inside, `iptables`,
`iptables-save` and `iptables-restore` mean the legacy backend labkit writes to, and the prompt
names the host. Processes started from the shell carry the lab's owner token, so `labkit
cleanup` stops them too.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit.errors import LabkitError
from labkit.procs import OWNER_VAR

LEGACY_TOOLS = ("iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore")


@dataclass(frozen=True)
class Host:
    description: str
    netns: str | None = None      # a named network namespace
    pid: int | None = None        # join this process's mount namespace (and its netns, if netns is None)
    wrapper: tuple[str, ...] = ()  # runs the command once inside, e.g. limiting its capabilities


def legacy_shim(env) -> Path:
    """A directory whose iptables* point at the iptables-legacy* tools (first on PATH in lab shells)."""
    shim = Path(env.dir) / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    for tool in LEGACY_TOOLS:
        target = shutil.which(tool.replace("tables", "tables-legacy", 1))
        link = shim / tool
        if target and not link.exists():
            link.symlink_to(target)
    return shim


def hosts(env) -> dict[str, Host]:
    fn = getattr(env.lab.environment_module(), "hosts", None)
    return fn(env) if callable(fn) else {}


def command(env, host_name: str, argv: list[str] | None) -> tuple[list[str], dict]:
    """The argv and environment that enter `host_name` and run `argv` (default: a login-like shell)."""
    known = hosts(env)
    if host_name not in known:
        names = ", ".join(sorted(known)) or "none"
        raise LabkitError(f"lab {env.lab.id} has no host {host_name!r} (hosts: {names})")
    host = known[host_name]
    gate = getattr(env.lab.environment_module(), "before_shell", None)
    if callable(gate):
        gate(env, host_name)
    enter = ["nsenter"]
    if host.netns:
        enter.append(f"--net=/run/netns/{host.netns}")
    if host.pid:
        if not Path(f"/proc/{host.pid}").exists():
            raise LabkitError(f"host {host_name} is not running (pid {host.pid} is gone): `labkit run {env.lab.id}` repairs it")
        enter += [f"--target={host.pid}", "--mount"] + ([] if host.netns else ["--net"])
    child_env = dict(os.environ)
    child_env["PATH"] = f"{legacy_shim(env)}:{child_env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    child_env["PS1"] = f"[{env.lab.id}:{host_name}] \\w# "
    child_env["LABKIT_HOST"] = host_name
    token = f"{env.token}/shell-{host_name}"
    env.ledger.record("process", token=token, tag=f"{env.lab.id}/shell-{host_name}")
    child_env[OWNER_VAR] = token
    run = argv or ["bash", "--norc", "-i"]
    return enter + ["--", *host.wrapper, *run], child_env


def run(env, host_name: str, argv: list[str] | None) -> None:
    """Enter `host_name` and run `argv` (command): labkit is replaced by it, unless the lab's
    after_shell asks to look at the lab once it has ended; then it runs as a child (labkit ignores
    Ctrl-C meanwhile, as the shell handles it), the look runs, and labkit exits with its status."""
    started = time.time()
    full, child_env = command(env, host_name, argv)
    after = getattr(env.lab.environment_module(), "after_shell", None)
    look = after(env, host_name, started) if callable(after) else None
    sys.stdout.flush()
    if look is None:
        os.execvpe(full[0], full, child_env)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = subprocess.call(full, env=child_env)
    finally:
        signal.signal(signal.SIGINT, previous)
    look()
    raise SystemExit(code)
