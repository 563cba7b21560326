"""The kernel's own account of OOM kills, from its log (/dev/kmsg), for one lab's cgroups.

When a memory cgroup hits its limit the kernel logs, among others (mm/oom_kill.c):
  oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=<cgroup whose limit was hit>,
           task_memcg=<cgroup of the victim>,task=<comm>,pid=<pid>,uid=<uid>
  Memory cgroup out of memory: Killed process <pid> (<comm>) ... oom_score_adj:<n>
and when the whole machine ran out, `global_oom` in place of oom_memcg and "Out of memory:
Killed process ..." (mem_cgroup_print_oom_context, oom_kill_process).
oom_memcg equal to task_memcg: the container hit its own limit; its pod cgroup: the Pod's (the
sum of its containers' limits — with a single container the Pod's counter, which also holds the
Pod's own charges, is usually the one that fails); kubepods: the node's allocatable ran out;
CONSTRAINT_NONE: the whole machine did.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

# mem_cgroup_print_oom_context: ",oom_memcg=<path>" when a cgroup's limit was hit, ",global_oom" when
# the machine ran out (no cgroup's limit: constraint CONSTRAINT_NONE, or a cpuset/mempolicy one)
_OOM = re.compile(r"oom-kill:constraint=(\w+),.*?(?:oom_memcg=([^,]*)|global_oom),task_memcg=([^,]*),task=([^,]*),"
                  r"pid=(\d+)")
_KILLED = re.compile(r"Killed process (\d+) \(([^)]*)\).*?oom_score_adj:(-?\d+)")


@dataclass
class OOMKill:
    constraint: str
    oom_memcg: str          # the cgroup whose limit was hit ("": none, a global OOM)
    task_memcg: str         # the victim's cgroup
    task: str
    pid: int
    oom_score_adj: int | None = None

    @property
    def own_limit(self) -> bool:
        return self.oom_memcg == self.task_memcg

    @property
    def limit_of(self) -> str:
        """Whose limit was hit, in kubelet's layout: container, pod, QoS class, kubepods (the node's
        allocatable) or machine (CONSTRAINT_NONE)."""
        if self.constraint == "CONSTRAINT_NONE" or not self.oom_memcg:
            return "machine"
        if self.own_limit:
            return "container"
        last = self.oom_memcg.rstrip("/").rsplit("/", 1)[-1]
        if last.startswith("pod"):
            return "pod"
        return {"kubepods": "kubepods", "burstable": "QoS class", "besteffort": "QoS class"}.get(last, self.oom_memcg)


def records(since: float = 0.0) -> list[str]:
    """The records the kernel log holds now, logged `since` seconds after boot or later (needs root;
    [] where /dev/kmsg cannot be read)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    out = []
    try:
        while True:
            try:
                data = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EPIPE:     # a record was overwritten while we read: go on
                    continue
                break                            # EAGAIN: nothing more
            if not data:
                break
            prefix, _, text = data.decode(errors="replace").partition(";")
            fields = prefix.split(",")
            if len(fields) >= 3 and fields[2].isdigit() and int(fields[2]) / 1e6 < since:
                continue
            out.append(text.strip())
    finally:
        os.close(fd)
    return out


def seconds_since_boot(wall_time: float) -> float:
    """A wall-clock time as the kernel log's timestamps count it."""
    import time
    uptime = float(open("/proc/uptime").read().split()[0])
    return wall_time - (time.time() - uptime)


def oom_kills(cgroup_marker: str, since: float = 0.0, lines: list[str] | None = None) -> list[OOMKill]:
    """The OOM kills (logged `since` seconds after boot or later) whose victim lived in a cgroup
    path containing `cgroup_marker`."""
    kills: list[OOMKill] = []
    for line in records(since) if lines is None else lines:
        match = _OOM.search(line)
        if match and cgroup_marker in match.group(3):
            kills.append(OOMKill(match.group(1), match.group(2) or "", match.group(3), match.group(4),
                                 int(match.group(5))))
            continue
        killed = _KILLED.search(line)
        if killed and kills and kills[-1].pid == int(killed.group(1)) and kills[-1].oom_score_adj is None:
            kills[-1].oom_score_adj = int(killed.group(3))
    return kills
