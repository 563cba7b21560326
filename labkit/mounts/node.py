"""A lab's node and its Pods: the processes that hold the mount namespaces, and what labkit knows of them.

State lives in <lab state dir>/mounts/pods/<pod>.json (the Pod as applied and
each container's state). The node's root filesystem is a tmpfs mounted, inside the node's own
namespace, on the directory <lab state dir>/node/rootfs (recorded in the ledger before it is
made); everything the lab mounts exists only inside the namespaces of tracked processes
(labkit.mounts.party), so killing them (what `labkit cleanup` does first) takes every lab mount
with them, and the host's mount table is never touched.

Every attempt to create a container gets a container ID, as containerd's CreateContainer gives
one (64 hex digits); a running container's state records it, its capability set and its process.

Party names: "node", and for each running container the Pod name (a Pod with one container) or
"pod/container".
"""

from __future__ import annotations

import json
import os
import secrets
import select
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from labkit import procs
from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN
from labkit.errors import LabkitError
from labkit.mounts import kernel, mountinfo
from labkit.mounts.pods import Pod, Refused, capabilities, create_error, parse_pod, runtime_plan, validate
from labkit.state import write_json_atomic

NODE = "node"
READY_TIMEOUT = 20.0
PARTY = str(Path(__file__).resolve().with_name("party.py"))


@dataclass(frozen=True)
class Volume:
    host_path: str       # in the node's view
    path: str            # where the party sees it (for the node: the host path itself)


@dataclass(frozen=True)
class Party:
    name: str
    pid: int
    volumes: tuple[Volume, ...]
    pod: str | None = None
    container: str | None = None
    capabilities: int | None = None    # a container's capability mask (None: the node, all of them)


def party_name(pod: Pod, container_name: str) -> str:
    return pod.name if len(pod.containers) == 1 else f"{pod.name}/{container_name}"


# -- actions run inside a party's namespace (in a forked child, see kernel.in_namespace) ------


def _mount_tmpfs(path: str, source: str, content: str | None) -> None:
    os.makedirs(path, exist_ok=True)
    kernel.mount(source, path, "tmpfs")
    if content is not None:
        with open(os.path.join(path, "file"), "w") as f:
            f.write(content + "\n")


def _umount(path: str, lazy: bool) -> None:
    kernel.umount(path, lazy=lazy)


class Node:
    def __init__(self, env):
        self.env = env
        self.dir = Path(env.dir) / "mounts"
        self.rootfs = Path(env.dir) / "node" / "rootfs"

    # -- the node ----------------------------------------------------------------------------

    def start(self, host_paths: list[dict], dirs: tuple[str, ...] = ()) -> int:
        """Start the node. host_paths: [{path, propagation: shared|slave|private, upstream?}]."""
        self.env.ledger.record("path", path=str(self.dir))
        self.env.ledger.record("path", path=str(self.rootfs.parent))
        self.rootfs.mkdir(parents=True, exist_ok=True)
        spec = {"role": "node", "rootfs": str(self.rootfs), "host_paths": host_paths,
                "dirs": sorted({*dirs, *(h["path"] for h in host_paths)})}
        self._node_file().unlink(missing_ok=True)     # a record of an earlier node names a process that is gone
        proc, ready = self._spawn(NODE, spec)
        reply = self._wait_ready(NODE, proc, ready)
        if "error" in reply:
            raise LabkitError(f"the node's mount namespace could not be built: {reply['error']} (log: {self._log(NODE)})")
        write_json_atomic(self._node_file(), {"pid": proc.pid, "start": procs.start_time(proc.pid)})
        return proc.pid

    def _node_file(self) -> Path:
        return self.dir / "node.json"

    @property
    def pid(self) -> int | None:
        """The node's process: the one start() recorded while it lives (its pid and start time;
        one read of /proc/<pid>/stat). Without a record (a start cut short), the process carrying
        the node's owner token, found by a pass over every process."""
        try:
            record = json.loads(self._node_file().read_text())
        except (OSError, ValueError):
            return self._live_pid(NODE)
        return record["pid"] if procs.same_process(record["pid"], record["start"]) else None

    def require_pid(self) -> int:
        pid = self.pid
        if pid is None:
            raise LabkitError("the node is not running (its process is gone): rebuild the lab with `labkit run` or `labkit reset`")
        return pid

    def mounts(self, pid: int | None = None) -> list[mountinfo.Mount]:
        return mountinfo.read(pid or self.require_pid())

    def run(self, pid: int, action, *args):
        """Run `action(*args)` inside the mount namespace of `pid` (a forked, single-threaded child)."""
        return kernel.in_namespace(pid, action, *args)

    def mount_tmpfs(self, pid: int, path: str, source: str, content: str | None = None,
                    capabilities: int | None = None) -> None:
        """mount -t tmpfs inside the namespace of `pid`; with `capabilities`, done by a process
        holding only those (a container's own process), else with all of labkit's."""
        kernel.in_namespace(pid, _mount_tmpfs, path, source, content, capabilities=capabilities)

    def umount(self, pid: int, path: str, lazy: bool = False, capabilities: int | None = None) -> None:
        kernel.in_namespace(pid, _umount, path, lazy, capabilities=capabilities)

    # -- Pods --------------------------------------------------------------------------------

    def _pod_file(self, name: str) -> Path:
        return self.dir / "pods" / f"{name}.json"

    def pod_record(self, name: str) -> dict | None:
        try:
            return json.loads(self._pod_file(name).read_text())
        except (OSError, ValueError):
            return None

    def pod(self, name: str) -> Pod | None:
        record = self.pod_record(name)
        return parse_pod(record["spec"], self._pod_file(name)) if record else None

    def pod_names(self) -> list[str]:
        directory = self.dir / "pods"
        return sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []

    def apply(self, pod: Pod) -> dict[str, dict]:
        """Create the Pod (API validation first) and start its containers, or retry the ones that
        are not running when the same Pod exists (what kubelet's restarts do). Returns the state
        of each container. Raises Refused when the API server would reject the Pod.
        """
        self.apply_all([pod])
        return {c.name: self.container_state(pod.name, c.name) for c in pod.containers}

    def apply_all(self, pods: list[Pod]) -> None:
        """apply() for several Pods, their containers started together. All are validated first."""
        for pod in pods:
            validate(pod)
            self._check_unchanged(pod)
        waiting = []
        for pod in pods:
            if self.pod_record(pod.name) is None:
                write_json_atomic(self._pod_file(pod.name), {"spec": pod.source, "containers": {}})
            waiting += [(pod, c.name) for c in pod.containers
                        if self.container_state(pod.name, c.name)["state"] != "running"]
        self.start_containers(waiting)

    def _check_unchanged(self, pod: Pod) -> None:
        # The API server's ValidatePodUpdate: a Pod's containers and volumes are immutable.
        old = self.pod(pod.name)
        if old is not None and old != pod:
            raise Refused(f'Pod "{pod.name}" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}', by="api")

    def container_state(self, pod_name: str, container_name: str) -> dict:
        record = self.pod_record(pod_name) or {"containers": {}}
        state = dict(record["containers"].get(container_name) or {"state": "waiting", "reason": "ContainerCreating"})
        if state["state"] == "running":
            token = procs.owner_token(self.env, state["tag"])
            if procs.owns(state["pid"], token):     # still its process: the state stands
                return state
            pids = procs.find(token)
            if not pids:
                state = {"state": "terminated", "reason": "Error", "message": "the container's process exited"}
            elif state["pid"] not in pids:      # the party is gone, its command's processes are not
                state["pid"] = min(pids)
        return state

    def _set_state(self, pod_name: str, container_name: str, state: dict) -> None:
        record = self.pod_record(pod_name)
        record["containers"][container_name] = state
        write_json_atomic(self._pod_file(pod_name), record)

    def start_containers(self, containers: list[tuple[Pod, str]]) -> None:
        """Start containers given as (Pod, container name); all are spawned first, then awaited
        (they build their namespaces in parallel)."""
        node_pid = self.require_pid()
        node_mounts = self.mounts(node_pid)
        runtime_capabilities = kernel.status_mask("self")    # WithAllCurrentCapabilities reads them
        started = []
        for pod, name in containers:
            container = pod.container(name)
            container_id = secrets.token_hex(32)
            try:
                self._check_host_path_types(pod, container, node_pid)
                plan = runtime_plan(pod, container, node_mounts)
            except Refused as exc:
                message = create_error(container_id, exc) if exc.by == "runtime" else exc.message
                self._set_state(pod.name, name, {"state": "waiting", "reason": "CreateContainerError", "message": message})
                continue
            caps = capabilities(container, runtime_capabilities)
            tag = f"pod-{pod.name}_{name}"     # '_' is in neither a Pod nor a container name
            spec = {"role": "container", "node_pid": node_pid,
                    "rootfs": f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{container_id}/rootfs",
                    "root_propagation": plan.root_propagation, "capabilities": caps,
                    "mounts": [{"source": m.source, "destination": m.destination, "propagation": m.propagation,
                                "readonly": m.read_only} for m in plan.mounts],
                    "command": list(container.command) or None, "workdir": container.working_dir}
            proc, ready = self._spawn(tag, spec)
            started.append((pod, name, tag, proc, ready, container_id, caps))
        for pod, name, tag, proc, ready, container_id, caps in started:
            reply = self._wait_ready(tag, proc, ready)
            if "error" in reply:
                procs.kill(procs.find(procs.owner_token(self.env, tag)))
                self._set_state(pod.name, name, {"state": "waiting", "reason": "RunContainerError", "message": reply["error"]})
            else:
                self._set_state(pod.name, name, {"state": "running", "tag": tag, "pid": proc.pid, "containerID": container_id,
                                                 "capabilities": caps, "started": round(time.time(), 3)})

    def _check_host_path_types(self, pod: Pod, container, node_pid: int) -> None:
        # kubelet's hostPath volume plugin (pkg/volume/hostpath): type Directory must already be one.
        for vm in container.volume_mounts:
            volume = pod.volumes[vm.name]
            if volume.type == "Directory" and not os.path.isdir(f"/proc/{node_pid}/root{volume.path}"):
                raise Refused(f'MountVolume.SetUp failed for volume "{volume.name}" : hostPath type check failed: '
                              f"{volume.path} is not a directory", by="kubelet")

    def stop(self, pod_name: str, container_name: str, reason: str = "Killed") -> None:
        state = self.container_state(pod_name, container_name)
        if state["state"] == "running":
            procs.kill(procs.find(procs.owner_token(self.env, state["tag"])), grace=0.0)
            self._set_state(pod_name, container_name, {"state": "terminated", "reason": reason, "exitCode": 137})

    def delete(self, pod_name: str) -> bool:
        pod = self.pod(pod_name)
        if pod is None:
            return False
        for c in pod.containers:
            self.stop(pod_name, c.name)
        self._pod_file(pod_name).unlink(missing_ok=True)
        return True

    # -- parties -----------------------------------------------------------------------------

    def parties(self) -> list[Party]:
        """The node and every running container, each with the volumes it mounts."""
        node_pid = self.require_pid()
        found = [Party(NODE, node_pid, ())]
        for pod_name in self.pod_names():
            pod = self.pod(pod_name)
            for c in pod.containers:
                state = self.container_state(pod_name, c.name)
                if state["state"] != "running":
                    continue
                volumes = tuple(Volume(pod.volumes[vm.name].path, vm.mount_path) for vm in c.volume_mounts)
                found.append(Party(party_name(pod, c.name), state["pid"], volumes, pod_name, c.name,
                                   state.get("capabilities")))
        return found

    def not_running(self, name: str) -> str | None:
        """Why `name` (POD or POD/CONTAINER) names a container that is not running; None when it
        runs or names no container at all."""
        pod_name, _, container_name = name.partition("/")
        pod = self.pod(pod_name)
        if pod is None or name == NODE:
            return None
        if not container_name:
            if len(pod.containers) != 1:
                return None
            container_name = pod.containers[0].name
        if container_name not in {c.name for c in pod.containers}:
            return None
        state = self.container_state(pod_name, container_name)
        if state["state"] == "running":
            return None
        what = state.get("reason", state["state"]) + (f" (exit code {state['exitCode']})" if "exitCode" in state else "")
        if state["state"] == "terminated":
            return (f"container {container_name} of Pod {pod_name} has exited ({what}): there is no process to run a "
                    f"command in (kubectl exec answers: container not found)")
        return (f"container {container_name} of Pod {pod_name} is not running ({what}): it never started; "
                "`labkit mounts get` shows why")

    def party(self, name: str) -> Party:
        parties = {p.name: p for p in self.parties()}
        if name not in parties:
            known = ", ".join(parties)
            raise LabkitError(f"no running party {name!r} (running: {known}); a Pod with several containers is POD/CONTAINER")
        return parties[name]

    # -- processes ---------------------------------------------------------------------------

    def _live_pid(self, tag: str) -> int | None:
        pids = procs.find(procs.owner_token(self.env, tag))
        return min(pids) if pids else None

    def _log(self, tag: str) -> Path:
        return Path(self.env.dir) / "logs" / f"{tag}.log"

    def _spawn(self, tag: str, spec: dict):
        read_fd, write_fd = os.pipe()
        try:
            argv = [sys.executable, "-I", "-S", PARTY, json.dumps({**spec, "ready_fd": write_fd})]
            proc = procs.spawn(self.env, tag, argv, pass_fds=(write_fd,), cwd="/")
        finally:
            os.close(write_fd)
        return proc, read_fd

    def _wait_ready(self, tag: str, proc, read_fd: int) -> dict:
        """The party's one-line report; EOF without one means it died (its log says why)."""
        data = b""
        deadline = time.monotonic() + READY_TIMEOUT
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([read_fd], [], [], remaining)[0]:
                    return {"error": f"no answer within {READY_TIMEOUT:.0f} s (log: {self._log(tag)})"}
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(read_fd)
        if not data:
            proc.wait()
            return {"error": f"the process exited with status {proc.returncode} before it was ready (log: {self._log(tag)})"}
        return json.loads(data)
