"""The per-lab ledger: every resource labkit creates is recorded here *before* it is created.

A ledger is an append-only JSON-lines file in the lab's state directory. Each line names a
resource kind and what identifies it. Because the line is on disk (fsync'd) before the resource
exists, `labkit cleanup` can remove everything a lab made even after `kill -9` in the middle of
building it, and never touches anything that was not recorded.

Kinds and the function that removes each (removal is idempotent: "already gone" is success):
  process  {token}          every process whose environment carries LABKIT_OWNER=<token>
  netns    {name}           a named network namespace (/run/netns/<name>)
  link     {netns, name}    a link inside a lab network namespace
  cgroup   {path}           a cgroup directory (processes in it are killed first)
  mount    {path}           a mount in the host's mount namespace (unmounted lazily)
  path     {path}           a file or directory tree labkit made
  kmodule  {name, token}    a kernel module labkit loaded for the lab (labkit.netlab.brnetfilter)
  kmodules {token, root}    the lab's claim on the modules the kernel loads for it (labkit.kmodules)
  apiobject {kubeconfig, context, apiVersion, resource, namespace, name[, finalizers]}
                            an object labkit created on a real cluster (a lab run with --kubeconfig)
"""

from __future__ import annotations

import importlib
import json
import os
import time
from pathlib import Path

from labkit import progress
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError

REMOVERS = {
    "process": "labkit.procs:remove_recorded",
    "netns": "labkit.netlab.netns:remove_recorded",
    "link": "labkit.netlab.links:remove_recorded",
    "cgroup": "labkit.cgroups:remove_recorded",
    "mount": "labkit.hostmounts:remove_recorded",
    "path": "labkit.hostmounts:remove_recorded_path",
    "kmodule": "labkit.netlab.brnetfilter:remove_recorded",
    "kmodules": "labkit.kmodules:remove_recorded",
    "apiobject": "labkit.apiserver.client:remove_recorded",
}


def _remover(kind: str):
    target = REMOVERS.get(kind)
    if target is None:
        return None
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


# Records made by this process, for the generic crash points "ledger:<n>" (kill -9 right after
# the n-th record is on disk, before the resource it names is created: the most delicate moment).
_records_made = 0


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)

    def record(self, kind: str, **fields) -> dict:
        if kind not in REMOVERS:
            raise ValueError(f"unknown ledger kind {kind!r}")
        entry = {"kind": kind, **fields, "t": round(time.time(), 3)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(entry, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        global _records_made
        _records_made += 1
        crash_point(f"ledger:{_records_made}")
        progress.step(progress.describe_record(entry))
        return entry

    def entries(self) -> list[dict]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                # A line cut short by a crash: the resource it would have named was never created.
                continue
        return out

    def _rewrite(self, entries: list[dict]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for e in entries:
                f.write(json.dumps(e, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def cleanup(self, log=lambda msg: None) -> list[str]:
        """Remove every recorded resource, processes first, then the rest newest first.

        Returns the problems met; entries that could not be removed stay in the ledger.
        """
        entries = self.entries()
        # A link in a namespace this ledger also records goes with that namespace: removing it on
        # its own first would only cost a netlink round trip per link.
        namespaces = {e.get("name") for e in entries if e.get("kind") == "netns"}
        with_namespace = [e for e in entries if e.get("kind") == "link" and e.get("netns") in namespaces]
        problems: list[str] = []
        remaining: list[dict] = []
        # All processes first, in one sweep (they may hold namespaces, mounts and cgroups).
        processes = [e for e in reversed(entries) if e.get("kind") == "process"]
        if processes:
            from labkit.procs import remove_all
            try:
                if remove_all({e["token"] for e in processes}):
                    log(f"stopped the lab's processes ({', '.join(sorted({e.get('tag', '?') for e in processes}))})")
            except (OSError, RuntimeError) as exc:
                problems.append(f"could not stop the lab's processes: {exc}")
                remaining += processes
        for entry in (e for e in reversed(entries) if e.get("kind") != "process" and e not in with_namespace):
            remover = _remover(entry.get("kind", ""))
            if remover is None:
                problems.append(f"unknown ledger entry {entry}")
                continue
            try:
                removed = remover(entry)
                if removed:
                    log(f"removed {describe(entry)}")
            except (OSError, LabkitError, RuntimeError) as exc:
                problems.append(f"could not remove {describe(entry)}: {exc}")
                remaining.append(entry)
        kept = {e.get("name") for e in remaining if e.get("kind") == "netns"}
        remaining += [e for e in with_namespace if e.get("netns") in kept]
        self._rewrite(list(reversed(remaining)))
        return problems


def describe(entry: dict) -> str:
    kind = entry.get("kind")
    if kind == "process":
        return f"processes {entry.get('tag') or entry.get('token')}"
    if kind == "netns":
        return f"network namespace {entry['name']}"
    if kind == "link":
        return f"link {entry['name']} in {entry['netns']}"
    if kind in ("cgroup", "mount", "path"):
        return f"{kind} {entry['path']}"
    if kind == "apiobject":
        where = f"{entry['namespace']}/" if entry.get("namespace") else ""
        return f"{entry['resource']} {where}{entry['name']} on the cluster of {entry['kubeconfig']}"
    if kind == "kmodule":
        return f"this lab's claim on kernel module {entry['name']} (unloaded when no lab needs it)"
    if kind == "kmodules":
        return "this lab's claim on the kernel modules labs made the kernel load (unloaded when no lab is left)"
    return json.dumps(entry)
