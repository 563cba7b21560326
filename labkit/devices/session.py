"""One run of a device plugin against a fresh node: labkit's kubelet (labkit.devices.kubelet)
serving kubelet.sock in `directory` (its device-plugins directory; the run's other files — the
health file, the containers' specs and roots — go to `<directory>.files`), the plugin started as a
process of its own with

    DEVICE_PLUGIN_DIR   kubelet's device-plugins directory (kubelet.sock is there; the plugin's
                        own socket goes there too, its file name being the RegisterRequest's endpoint)
    DEVICE_HEALTH_FILE  a YAML mapping device ID -> Healthy | Unhealthy that the session rewrites
                        to make devices fail; a plugin watching its devices reads it

and Pods admitted by that kubelet whose containers start as real processes with the Allocate
answer (labkit.devices.container). Given a Node on an API server (`node_status`:
labkit.devices.nodestatus), the kubelet registers it at the start (a fresh node: its extended
resources zeroed), writes its status whenever the device manager's numbers change, and `node()`
reads what a client of the API server (kubectl) sees there. `labkit devices try` and the device-plugins lab's checks both
drive a plugin through this; what they show or judge is what the session saw on the wire and in
the processes.

The caller passes `spawn(tag, argv, extra_env) -> Popen` (the lab's ledger-recorded processes)
and `log(tag) -> Path` (where that process's output goes).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import grpc
import yaml

from labkit.devices import api, container
from labkit.devices.kubelet import Kubelet, go_status

PLUGIN_TAG = "plugin"
POLL = 0.02
BUSY_STRETCH = 5        # wait_for_plugin: a plugin kept busy gets at most this many times its time


class Session:
    def __init__(self, directory: Path, plugin_file: Path, spawn: Callable, log: Callable,
                 numa_nodes: list[int] | None = None, node_status=None):
        self.directory = Path(directory)
        self.plugin_file = Path(plugin_file)
        self.spawn = spawn
        self.log = log
        self.files = self.directory.with_name(self.directory.name + ".files")
        self.kubelet = Kubelet(self.directory, numa_nodes=list(numa_nodes or [0, 1]), dial_timeout=2.0)
        self.health_file = self.files / "health.yaml"
        self.process: subprocess.Popen | None = None
        self.containers = 0
        self.node_status = node_status
        self.node_registered = False          # sync_node writes nothing before the Node is registered
        self.node_lock = threading.Lock()
        if node_status is not None:
            self.kubelet.on_change = self.sync_node

    # -- start and stop ---------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        for path in (self.directory, self.files):
            if path.exists():
                shutil.rmtree(path)
        self.files.mkdir(parents=True)
        self.health_file.write_text("{}\n")
        self.kubelet.start()
        self.started_at = self.kubelet.clock()
        recreated = not self.kubelet.checkpoint_path.exists()
        # the plugin starts (Python and grpc take a while) as kubelet.sock is served, while kubelet
        # registers its Node, as a real node's kubelet and plugins start independently; what the
        # device manager learns meanwhile is written to the Node once it is registered
        self.process = self.spawn(PLUGIN_TAG, [sys.executable, "-u", str(self.plugin_file)],
                                  {"DEVICE_PLUGIN_DIR": str(self.kubelet.directory),
                                   "DEVICE_HEALTH_FILE": str(self.health_file)})
        if self.node_status is not None:
            # kubelet_node_status.go tryRegisterWithAPIServer -> reconcileExtendedResource: no
            # checkpoint in the device-plugins directory (ShouldResetExtendedResourceCapacity)
            try:
                with self.node_lock:
                    self.node_status.register(node_recreated=recreated)
                    self.node_registered = True
            except BaseException:          # no `with` body runs, nor __exit__: stop what started
                self.stop_plugin()
                self.kubelet.stop()
                raise
            self.sync_node()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_plugin()
        if self.node_status is not None:
            # the plugin's streams end: kubelet marks its devices unhealthy (allocatable 0) and
            # writes that to the Node before it stops
            self.streams_settled()
            self.sync_node()
        self.kubelet.stop()

    def stop_plugin(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    # -- what the node sees -----------------------------------------------------------------------
    @property
    def exited(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def wait(self, condition: Callable[[], object], seconds: float) -> bool:
        """Wait for `condition` (False when the time is up or the plugin exited first)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return True
            if self.exited is not None:
                return bool(condition())
            time.sleep(POLL)
        return bool(condition())

    def wait_for_plugin(self, condition: Callable[[], object], seconds: float) -> bool:
        """Wait for `condition`, something the plugin has `seconds` to do, counted in the plugin's
        own time: while a thread of the plugin is running, waiting for a CPU or reading the disk
        (plugin_busy), the deadline moves on by that time; and by the time the plugin's threads
        and kubelet's side here waited for a CPU, measured by the kernel (plugin_delay,
        kubelet_delay: a Register or ListAndWatch message the plugin sent is not recorded until
        kubelet's thread runs); up to BUSY_STRETCH times `seconds` in all. On a
        loaded machine a plugin that is still importing grpc, or has not been given a CPU since
        kubelet.sock changed, is not judged late, nor is a call that waited for kubelet's side; an
        idle plugin on an idle machine has its deadline unmoved, so a plugin that never does it is
        judged after `seconds`."""
        start = last = time.monotonic()
        deadline, most = start + seconds, start + BUSY_STRETCH * seconds
        delayed = self.kubelet_delay() + self.plugin_delay()
        while True:
            if condition():
                return True
            if self.exited is not None:
                return bool(condition())
            now, delayed_now = time.monotonic(), self.kubelet_delay() + self.plugin_delay()
            moved = max(now - last if self.plugin_busy() else 0.0, delayed_now - delayed)
            deadline = min(most, deadline + moved)
            last, delayed = now, delayed_now
            if now >= deadline:
                return bool(condition())
            time.sleep(POLL)

    def plugin_busy(self) -> bool:
        """Whether a thread of the plugin is running or runnable (state R in /proc/PID/task/TID/stat)
        or in an uninterruptible wait (D: reading its modules from disk)."""
        if self.process is None:
            return False
        tasks = Path(f"/proc/{self.process.pid}/task")
        try:
            tids = os.listdir(tasks)
        except OSError:
            return False
        for tid in tids:
            try:
                line = (tasks / tid / "stat").read_bytes()
            except OSError:
                continue
            if line[line.rindex(b")") + 2:][:1] in (b"R", b"D"):
                return True
        return False

    def plugin_delay(self) -> float:
        """Seconds the plugin's threads have spent runnable but waiting for a CPU (a timer of the
        plugin's that expired waits there too, as does its answer to kubelet)."""
        return run_delay(self.process.pid) if self.process is not None else 0.0

    def kubelet_delay(self) -> float:
        """Seconds the threads of this process other than the waiting one (kubelet's gRPC server
        and its ListAndWatch readers run here) have spent runnable but waiting for a CPU."""
        return run_delay(os.getpid(), but=threading.get_native_id())

    def streams_settled(self, seconds: float = 1.0) -> None:
        """Once the plugin has exited, wait (`seconds` at most) until kubelet has seen the
        ListAndWatch streams it opened end: its record of registrations then says so."""
        if self.exited is None:
            return
        deadline = time.monotonic() + seconds
        while any(r["stream"] == "open" for r in list(self.kubelet.registrations)) and time.monotonic() < deadline:
            time.sleep(POLL)

    def lists(self, resource: str) -> int:
        """How many ListAndWatch messages kubelet received for `resource`."""
        return sum(1 for c in list(self.kubelet.manager.calls) if c["call"] == "ListAndWatch" and c["resource"] == resource)

    def devices(self, resource: str) -> list[dict]:
        """The resource's devices as the last ListAndWatch message listed them."""
        with self.kubelet.lock:
            found = self.kubelet.manager.all_devices.get(resource, {})
            return [{"ID": d.id, "health": d.health, "numa": list(d.numa or [])} for d in found.values()]

    def node(self) -> dict:
        """The node's extended resources: {"capacity": {resource: n}, "allocatable": {...}}; with a
        Node on an API server, as the API server has them once kubelet has written its status."""
        if self.node_status is None:
            capacity, allocatable = self.kubelet.node_status()
            return {"capacity": capacity, "allocatable": allocatable}
        self.sync_node()
        return self.node_status.read()

    def sync_node(self) -> None:
        """Write the device manager's capacity to the Node (nodestatus.NodeStatus.update); an API
        server that cannot be reached is logged in kubelet's events, as kubelet logs it."""
        if self.node_status is None:
            return
        with self.node_lock:
            if not self.node_registered:
                return              # __enter__ writes the device manager's numbers once it is
            capacity, allocatable, removed = self.kubelet.device_capacity()
            try:
                self.node_status.update(capacity, allocatable, removed)
            except Exception as exc:          # ApiError, OSError: the API server is away
                self.kubelet.events.append(f"Error updating node status, will retry: {exc}")

    def registrations(self) -> list[dict]:
        return [dict(r) for r in self.kubelet.registrations]

    def registrations_shown(self, first: int = 0) -> list[dict]:
        """The registrations from the `first`-th on, each one's time as seconds since the run began."""
        return [{**r, **{key: f"{r[key] - self.started_at:.2f} s" for key in ("at", "answered_at", "ended_at")
                         if r.get(key) is not None}}
                for r in self.registrations()[first:]]

    def serving(self, resource: str) -> str | None:
        """Whether the plugin kubelet holds for `resource` still answers an rpc on the connection
        kubelet calls it on (as its next GetPreferredAllocation or Allocate would): None when it
        does, else the error (kubelet's words, go_status). A ListAndWatch stream that stays open
        does not show this: a Python plugin whose main returns stops its grpc server, yet the
        thread serving the stream keeps the process alive and the stream open."""
        with self.kubelet.lock:
            client = self.kubelet.clients.get(resource)
        if client is None or client.stub is None:
            return "no registered plugin"
        try:
            client.stub.GetDevicePluginOptions(api.Empty(), timeout=client.dial_timeout)
        except grpc.RpcError as exc:
            return go_status(exc)
        return None

    def options(self, resource: str) -> dict | None:
        endpoint = self.kubelet.manager.endpoints.get(resource)
        return None if endpoint is None else dict(endpoint.options.__dict__)

    def set_health(self, health: dict[str, str]) -> None:
        tmp = self.health_file.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(health))
        tmp.replace(self.health_file)

    def plugin_log(self, lines: int = 8) -> str:
        try:
            text = self.log(PLUGIN_TAG).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- Pods and their containers ----------------------------------------------------------------
    def admit(self, name: str, resource: str, count: int) -> dict:
        """A Pod of one container `c` asking `count` of `resource`: {"admitted", "devices", "error"}."""
        rejected = self.kubelet.admit({"name": name, "uid": name, "containers": [{"name": "c", "limits": {resource: count}}]})
        held = self.kubelet.manager.pod_devices.get(name, {}).get("c", {}).get(resource)
        return {"admitted": rejected is None, "devices": list(held.devices) if held else [],
                "error": rejected["message"] if rejected else None}

    def run_container(self, pod: str, seconds: float = 3.0) -> dict:
        """Start the Pod's container `c` as a process with what Allocate returned (after
        PreStartContainer when asked); what the process has: its environment (the Allocate
        envs), and each mount point under its root with the host path and options."""
        options = self.kubelet.run_options(pod, "c")
        self.containers += 1
        here = self.files / "containers" / f"{pod}-c"
        here.mkdir(parents=True, exist_ok=True)
        root = here / "root"
        (here / "error").unlink(missing_ok=True)     # an earlier run's, in the same place
        spec = container.write_spec(here / "spec.json", root, options, ["sleep", "30"])
        proc = self.spawn(f"container-{self.containers}", container.argv(spec), {})
        try:
            def started():
                try:
                    return Path(f"/proc/{proc.pid}/cmdline").read_bytes().startswith(b"sleep")
                except OSError:
                    return False
            deadline = time.monotonic() + seconds
            while not started() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(POLL)
            if not started():
                error = here / "error"
                return {"started": False, "envs": {}, "mounts": {}, "options": options,
                        "error": error.read_text().strip() if error.exists() else None}
            env = container.environ(proc.pid)
            mounts = {}
            prefix = str(root)
            for path, seen in container.mounts(proc.pid).items():
                if path.startswith(prefix + "/"):
                    inside = Path(f"/proc/{proc.pid}/root{path}")
                    mounts[path[len(prefix):]] = {"read_only": "ro" in seen["options"], "files": _files(inside),
                                                  "source": _identity(inside)}
            seen = {"started": True, "envs": container.added_envs(env, options),
                    "mounts": mounts, "options": options}
            if options["devices"]:       # each DeviceSpec as the process sees it at its container path
                seen["devices"] = {d["container_path"]: _device_node(Path(f"/proc/{proc.pid}/root{prefix}"
                                                                          f"{d['container_path']}"))
                                   for d in options["devices"]}
            return seen
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def _device_node(path: Path) -> dict | None:
    """What a process finds at a device's container path: a character or block device and its
    numbers (`major:minor`), or another kind of file; None when nothing is there."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    kind = "char" if stat.S_ISCHR(info.st_mode) else "block" if stat.S_ISBLK(info.st_mode) else \
        "directory" if stat.S_ISDIR(info.st_mode) else "file"
    out = {"kind": kind}
    if kind in ("char", "block"):
        out["device"] = f"{os.major(info.st_rdev)}:{os.minor(info.st_rdev)}"
    return out


def _identity(path: Path) -> list[int] | None:
    """[device, inode] of what the process sees at a mount point: a bind mount shows its host
    directory's own, a copy of that directory has others."""
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _files(directory: Path) -> dict[str, str]:
    """The regular files at the top of a directory as a process sees it, with their first line."""
    out = {}
    try:
        for entry in sorted(directory.iterdir())[:20]:
            if entry.is_file():
                out[entry.name] = entry.read_text(errors="replace").split("\n", 1)[0][:200]
    except OSError:
        pass
    return out


def run_delay(pid: int, but: int | None = None) -> float:
    """Seconds the threads of process `pid` (other than thread `but`) have spent runnable but
    waiting on a CPU's run queue: the second field of /proc/PID/task/TID/schedstat (nanoseconds;
    the kernel's sched_info run_delay, present with CONFIG_SCHED_INFO as in Debian's and Ubuntu's
    kernels; 0 without it, which leaves the deadline to plugin_busy)."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(tasks)
    except OSError:
        return 0.0
    waited = 0
    for tid in tids:
        if but is not None and tid == str(but):
            continue
        try:
            waited += int((tasks / tid / "schedstat").read_bytes().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return waited / 1e9
