"""A lab's cgroups for CPU and memory, on cgroup v1 or v2, with the files kubelet and runc write
and the counters the kernel keeps.

v1 has one hierarchy per controller: the same relative path exists under cpu, cpuacct and memory
(labkit.cgroups creates each, ledger first), and a process joins all three. v2 has one tree with
the cpu and memory controllers enabled level by level.

  setting       v1                                   v2
  CPU weight    cpu.shares                           cpu.weight (kubelet's getCPUWeight line)
  CPU cap       cpu.cfs_quota_us / cpu.cfs_period_us cpu.max "<quota|max> <period>"
  memory cap    memory.limit_in_bytes                memory.max
  throttling    cpu.stat nr_periods nr_throttled throttled_time (ns)   ... throttled_usec
  CPU used      cpuacct.usage (ns)                   cpu.stat usage_usec
  memory used   memory.usage_in_bytes, memory.stat total_inactive_file  memory.current, inactive_file
  OOM           memory.oom_control oom_kill, memory.failcnt            memory.events(.local) oom, oom_kill
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from labkit import cgroups
from labkit.errors import LabkitError
from labkit.resources.kubelet import CgroupSettings, shares_to_weight

V1_CONTROLLERS = ("cpu", "cpuacct", "memory")
UNLIMITED_V1 = 9223372036854771712   # memory.limit_in_bytes with no limit (PAGE_COUNTER_MAX pages)


def version() -> str:
    """"v1" or "v2" for the cpu and memory controllers on this machine."""
    found = {c: cgroups.hierarchy(c) for c in ("cpu", "memory")}
    if any(v is None for v in found.values()):
        raise LabkitError("no cgroup hierarchy with the cpu and memory controllers (see `labkit doctor`)")
    kinds = {v[0] for v in found.values()}
    if kinds != {"v1"} and kinds != {"v2"}:
        raise LabkitError("the cpu and memory controllers are split between cgroup v1 and v2: not supported")
    return kinds.pop()


def _controllers() -> tuple[str, ...]:
    if version() == "v2":
        return ("cpu", "memory")
    found = []
    seen = set()
    for controller in V1_CONTROLLERS:
        where = cgroups.hierarchy(controller)
        if where is None:
            raise LabkitError(f"no cgroup v1 hierarchy with the {controller} controller (see `labkit doctor`)")
        real = os.path.realpath(where[1])
        if real not in seen:          # cpu and cpuacct are often mounted together
            seen.add(real)
            found.append(controller)
    return tuple(found)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _keyed(text: str | None) -> dict[str, int]:
    out = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


@dataclass
class CPUStats:
    usage_ns: int
    nr_periods: int
    nr_throttled: int
    throttled_ns: int


@dataclass
class MemoryStats:
    usage: int            # bytes charged
    working_set: int      # usage - inactive file pages (cadvisor's working set, what kubelet ranks by)
    limit: int | None     # None: no limit
    oom_kills: int        # processes the kernel killed in this cgroup
    limit_hit: int        # v1 memory.failcnt / v2 memory.events.local "oom" (this cgroup's own limit)


class LabCgroups:
    """The lab's cgroup subtree for CPU and memory (paths relative to the lab's root)."""

    def __init__(self, env):
        self.env = env
        self.version = version()
        self.controllers = _controllers()
        self.roots = {c: cgroups.hierarchy(c)[1] / cgroups.lab_root_name(env) for c in self.controllers}

    def paths(self, relpath: str) -> dict[str, Path]:
        return {controller: root / relpath for controller, root in self.roots.items()}

    def exists(self, relpath: str) -> bool:
        return all(p.is_dir() for p in self.paths(relpath).values())

    def create(self, relpath: str) -> None:
        for controller in self.controllers:
            root = cgroups.create(self.env, "", controller)     # recorded in the ledger first
            path = root
            for step in [p for p in relpath.split("/") if p]:
                if self.version == "v2":
                    cgroups.enable(path, "cpu", "memory")
                path = path / step
                if not path.is_dir():
                    path.mkdir()

    def remove(self, relpath: str) -> None:
        """Kill what runs inside, then remove the cgroups bottom-up (every hierarchy)."""
        for path in self.paths(relpath).values():
            cgroups.remove_recorded({"path": str(path)})

    def unique_dirs(self, relpath: str) -> list[Path]:
        return list(dict.fromkeys(self.paths(relpath).values()))

    # -- writing ---------------------------------------------------------------------------------

    def apply(self, relpath: str, settings: CgroupSettings, oom_group: bool = False) -> None:
        """Write the settings as kubelet's cgroup manager (or runc, for a container) does."""
        paths = self.paths(relpath)
        if self.version == "v1":
            cpu, memory = paths["cpu"], paths["memory"]
            if settings.cpu_shares is not None:
                (cpu / "cpu.shares").write_text(str(settings.cpu_shares))
            if settings.cpu_period:
                (cpu / "cpu.cfs_period_us").write_text(str(settings.cpu_period))
            if settings.cpu_quota:        # 0: unset, the runtime leaves the kernel's -1
                (cpu / "cpu.cfs_quota_us").write_text(str(settings.cpu_quota))
            if settings.memory_limit:
                # ConfigureNoSwap on v1: memory+swap limited to the memory limit (0, no memory
                # limit, is not written). The kernel keeps memory.limit_in_bytes at or below
                # memsw, so runc (libcontainer/cgroups/fs/memory.go setMemoryAndSwap) writes memsw
                # first when it grows (a resize), after the memory limit otherwise
                memsw = memory / "memory.memsw.limit_in_bytes"
                swap_too = settings.no_swap and memsw.exists()
                grows = swap_too and int((_read(memsw) or "0").strip() or 0) < settings.memory_limit
                if grows:
                    memsw.write_text(str(settings.memory_limit))
                (memory / "memory.limit_in_bytes").write_text(str(settings.memory_limit))
                if swap_too and not grows:
                    memsw.write_text(str(settings.memory_limit))
            return
        group = paths["memory"]
        if settings.cpu_shares is not None:
            (group / "cpu.weight").write_text(str(shares_to_weight(settings.cpu_shares)))
        if settings.cpu_period:
            quota = str(settings.cpu_quota) if settings.cpu_quota and settings.cpu_quota > 0 else "max"
            (group / "cpu.max").write_text(f"{quota} {settings.cpu_period}")
        if settings.memory_limit:
            (group / "memory.max").write_text(str(settings.memory_limit))
        if settings.no_swap and (group / "memory.swap.max").exists():    # ConfigureNoSwap on v2
            (group / "memory.swap.max").write_text("0")
        if oom_group:
            (group / "memory.oom.group").write_text("1")

    def join_dirs(self, relpath: str) -> list[str]:
        """The cgroup directories a container's process joins (one per v1 hierarchy)."""
        return [str(p) for p in self.unique_dirs(relpath)]

    # -- reading ---------------------------------------------------------------------------------

    def settings(self, relpath: str) -> dict:
        """What the cgroup files say now: shares or weight, quota, period, memory limit."""
        paths = self.paths(relpath)
        if self.version == "v1":
            cpu, memory = paths["cpu"], paths["memory"]
            limit = int((_read(memory / "memory.limit_in_bytes") or "0").strip() or 0)
            out = {"cpu.shares": int((_read(cpu / "cpu.shares") or "0").strip() or 0),
                   "cpu.cfs_quota_us": int((_read(cpu / "cpu.cfs_quota_us") or "0").strip() or 0),
                   "cpu.cfs_period_us": int((_read(cpu / "cpu.cfs_period_us") or "0").strip() or 0),
                   "memory.limit_in_bytes": None if limit >= UNLIMITED_V1 else limit}
            memsw = _read(memory / "memory.memsw.limit_in_bytes")
            if memsw is not None:       # the swap controller (swapaccount) is there
                out["memory.memsw.limit_in_bytes"] = None if int(memsw) >= UNLIMITED_V1 else int(memsw)
            return out
        group = paths["memory"]
        quota, _, period = ((_read(group / "cpu.max") or "max 100000").strip()).partition(" ")
        memory_max = (_read(group / "memory.max") or "max").strip()
        out = {"cpu.weight": int((_read(group / "cpu.weight") or "0").strip() or 0),
               "cpu.max": f"{quota} {period}",
               "memory.max": None if memory_max == "max" else int(memory_max)}
        swap_max = _read(group / "memory.swap.max")
        if swap_max is not None:        # the swap controller is there
            out["memory.swap.max"] = None if swap_max.strip() == "max" else int(swap_max)
        return out

    def quota(self, relpath: str) -> tuple[int, int]:
        """(quota us, period us); quota -1 when there is none."""
        s = self.settings(relpath)
        if self.version == "v1":
            return s["cpu.cfs_quota_us"], s["cpu.cfs_period_us"]
        quota, period = s["cpu.max"].split()
        return (-1 if quota == "max" else int(quota)), int(period)

    def cpu(self, relpath: str) -> CPUStats:
        paths = self.paths(relpath)
        if self.version == "v1":
            stat = _keyed(_read(paths["cpu"] / "cpu.stat"))
            acct = paths.get("cpuacct", paths["cpu"])
            usage = int((_read(acct / "cpuacct.usage") or "0").strip() or 0)
            return CPUStats(usage, stat.get("nr_periods", 0), stat.get("nr_throttled", 0), stat.get("throttled_time", 0))
        stat = _keyed(_read(paths["memory"] / "cpu.stat"))
        return CPUStats(stat.get("usage_usec", 0) * 1000, stat.get("nr_periods", 0), stat.get("nr_throttled", 0),
                        stat.get("throttled_usec", 0) * 1000)

    def memory(self, relpath: str) -> MemoryStats:
        group = self.paths(relpath)["memory"]
        stat = _keyed(_read(group / "memory.stat"))
        if self.version == "v1":
            usage = int((_read(group / "memory.usage_in_bytes") or "0").strip() or 0)
            inactive = stat.get("total_inactive_file", 0)
            limit = int((_read(group / "memory.limit_in_bytes") or "0").strip() or 0)
            oom = _keyed(_read(group / "memory.oom_control"))
            failcnt = int((_read(group / "memory.failcnt") or "0").strip() or 0)
            return MemoryStats(usage, max(usage - inactive, 0), None if limit >= UNLIMITED_V1 else limit,
                               oom.get("oom_kill", 0), failcnt)
        usage = int((_read(group / "memory.current") or "0").strip() or 0)
        memory_max = (_read(group / "memory.max") or "max").strip()
        events = _keyed(_read(group / "memory.events.local") or _read(group / "memory.events"))
        return MemoryStats(usage, max(usage - stat.get("inactive_file", 0), 0),
                           None if memory_max == "max" else int(memory_max), events.get("oom_kill", 0),
                           events.get("oom", 0))

    def pids(self, relpath: str) -> list[int]:
        return cgroups.processes(self.paths(relpath)["memory"])
