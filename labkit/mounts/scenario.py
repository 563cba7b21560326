"""Mount scenarios: a node, containers, and steps that mount, unmount, start and stop; played on a
fresh node, then observed from live mountinfo.

    apiVersion: labkit/v1alpha1
    kind: MountScenario
    hostPath: {propagation: shared}        # shared | slave | private; optional path (default
                                           # /var/lib/kubelet/mount-propagation)
    containers:                            # each becomes a Pod of one container "cntr" with the
      - {name: master, mountPropagation: Bidirectional, privileged: true}   # hostPath mounted at /mnt/test
      - {name: default}                    # mountPropagation unset
    pods: [...]                            # or full Pod objects, as `labkit mounts apply` reads them
    steps:
      - start: [master, default]           # or one name
      - mount: {by: master, name: master}  # tmpfs "e2e-mount-propagation-master" at <volume>/master,
                                           # made inside 'master' ("by: host": the node)
      - umount: {by: host, name: host, lazy: false}
      - busy: {by: slave, name: host}      # a process inside 'slave' with its cwd in <volume>/host
      - stop: master                       # the container's processes are killed

`by: upstream` (hostPath propagation slave only) mounts on the node's shared mount that the
hostPath is a slave of. A party's volume is its first volume mount; the node's is the hostPath.

A container's mount and umount steps are made by a process of that container, with its
capabilities: in a container that is not privileged mount(2) fails with EPERM, as on a real node.

The result: {"visible": {party: [mount names]}, "tags": {party: "shared:N" | "master:N" | ...},
"errors": [{"step": n, "container": name (when one is concerned), "message": ...}]} for the node
("host") and every container still running at the end. A mount is visible to a party when the
party's mountinfo has, at <its volume>/<name>, the tmpfs of that name. Steps the API server,
kubelet, containerd or the kernel refuse are reported with their message, one entry per refused
container (step numbers count from 1), and the scenario goes on.
"""

from __future__ import annotations

import os
import secrets
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from labkit import procs
from labkit.errors import ConfigError, LabkitError
from labkit.exercises import wait_for
from labkit.mounts import kernel, mountinfo
from labkit.mounts.node import Node, party_name
from labkit.mounts.pods import Pod, Refused, absolute_path, parse_pod, validate
from labkit.state import LabEnv, LabState

API_VERSION = "labkit/v1alpha1"
KIND = "MountScenario"
DEFAULT_HOST_PATH = "/var/lib/kubelet/mount-propagation"
UPSTREAM = "/mnt/upstream"
HOST, UPSTREAM_PARTY = "host", "upstream"
PROPAGATIONS = ("shared", "slave", "private")
STEP_KINDS = ("start", "mount", "umount", "busy", "stop")
# Kills the process playing a scenario right after step N (0: once the node is up), so that
# tests can prove `labkit cleanup` removes everything a scenario made at any point.
CRASH_AFTER_VAR = "LABKIT_MOUNTS_CRASH_AFTER_STEP"


def tmpfs_source(name: str) -> str:
    """The mount source of a scenario's tmpfs, named as Kubernetes' e2e test names its own."""
    return f"e2e-mount-propagation-{name}"


@dataclass
class Scenario:
    host_path: str
    propagation: str
    pods: list[Pod]
    steps: list[tuple[str, object]]
    party_names: list[str] = field(default_factory=list)   # in the order the scenario lists them


def _container_pod(raw: dict, path, where: str, host_path: str) -> Pod:
    known = {"name", "mountPropagation", "privileged", "command"}
    unknown = sorted(set(raw) - known, key=str)
    if unknown:
        raise ConfigError(path, f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})")
    mount = {"name": "host", "mountPath": "/mnt/test"}
    if "mountPropagation" in raw:
        mount["mountPropagation"] = raw["mountPropagation"]
    container = {"name": "cntr", "volumeMounts": [mount], "securityContext": {"privileged": raw.get("privileged", False)}}
    if raw.get("command"):
        container["command"] = raw["command"]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": raw.get("name")},
           "spec": {"containers": [container], "volumes": [{"name": "host", "hostPath": {"path": host_path}}]}}
    try:
        return parse_pod(obj, path)
    except ConfigError as exc:   # name the scenario's field, not the Pod made from it
        field_name = {"metadata.name": "name", "spec.containers[0].securityContext.privileged": "privileged",
                      "spec.containers[0].volumeMounts[0].mountPropagation": "mountPropagation"}.get(exc.field, exc.field)
        raise ConfigError(path, f"{where}.{field_name}", exc.problem)


def load(path) -> Scenario:
    from labkit.inputs import load_yaml

    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(path, None, "expected a MountScenario mapping")
    known = {"apiVersion", "kind", "hostPath", "containers", "pods", "steps", "description"}
    unknown = sorted(set(raw) - known, key=str)
    if unknown:
        raise ConfigError(path, unknown[0], f"unknown field (known: {', '.join(sorted(known))})")
    if raw.get("apiVersion") != API_VERSION:
        raise ConfigError(path, "apiVersion", f"expected {API_VERSION}, got {raw.get('apiVersion')!r}")
    if raw.get("kind") != KIND:
        raise ConfigError(path, "kind", f"expected {KIND}, got {raw.get('kind')!r}")
    hp = raw.get("hostPath") or {}
    if not isinstance(hp, dict):
        raise ConfigError(path, "hostPath", "expected a mapping {propagation, path}")
    propagation = hp.get("propagation", "shared")
    if propagation not in PROPAGATIONS:
        raise ConfigError(path, "hostPath.propagation", f"expected one of {', '.join(PROPAGATIONS)}, got {propagation!r}")
    host_path = absolute_path(path, "hostPath.path", hp.get("path", DEFAULT_HOST_PATH))
    if host_path in ("/", UPSTREAM):
        raise ConfigError(path, "hostPath.path", f"expected an absolute path other than / and {UPSTREAM}, got {host_path!r}")
    pods: list[Pod] = []
    for key in ("containers", "pods", "steps"):
        if not isinstance(raw.get(key) or [], list):
            raise ConfigError(path, key, f"expected a list, got {type(raw[key]).__name__}")
    for i, item in enumerate(raw.get("containers") or []):
        if not isinstance(item, dict):
            raise ConfigError(path, f"containers[{i}]", "expected a mapping {name, mountPropagation, privileged}")
        pods.append(_container_pod(item, path, f"containers[{i}]", host_path))
    for i, item in enumerate(raw.get("pods") or []):
        pods.append(parse_pod(item, path, f"pods[{i}]"))
    if not pods:
        raise ConfigError(path, "containers", "expected at least one container (or pods)")
    names = [party_name(pod, c.name) for pod in pods for c in pod.containers]
    if HOST in names or UPSTREAM_PARTY in names:
        raise ConfigError(path, "containers", f"{HOST!r} and {UPSTREAM_PARTY!r} name the node: give containers other names")
    if len(set(p.name for p in pods)) != len(pods):
        raise ConfigError(path, "containers", "container and Pod names must be unique")
    for pod in pods:
        for c in pod.containers:
            if not c.volume_mounts:
                raise ConfigError(path, "pods", f"{party_name(pod, c.name)}: a container needs a volume mount to take part")
    steps = [_parse_step(path, i, s, names, propagation) for i, s in enumerate(raw.get("steps") or [])]
    return Scenario(host_path, propagation, pods, steps, names)


def _parse_step(path, i: int, raw, names: list[str], propagation: str):
    where = f"steps[{i}]"
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in STEP_KINDS:
        raise ConfigError(path, where, f"expected a mapping with one of {', '.join(STEP_KINDS)}, got {raw!r}")
    kind, arg = next(iter(raw.items()))
    if kind in ("start", "stop"):
        targets = [arg] if isinstance(arg, str) else arg
        if not isinstance(targets, list) or not targets:
            raise ConfigError(path, f"{where}.{kind}", "expected a container name or a list of them")
        for t in targets:
            if t not in names:
                raise ConfigError(path, f"{where}.{kind}", f"unknown container {t!r} (containers: {', '.join(names)})")
        return kind, targets
    if not isinstance(arg, dict):
        raise ConfigError(path, f"{where}.{kind}", "expected a mapping {by, name}")
    allowed = {"by", "name"} | ({"lazy"} if kind == "umount" else set())
    unknown = sorted(set(arg) - allowed, key=str)
    if unknown:
        raise ConfigError(path, f"{where}.{kind}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(allowed))})")
    by, name = arg.get("by"), arg.get("name")
    parties = [HOST, *names] + ([UPSTREAM_PARTY] if propagation == "slave" and kind != "busy" else [])
    if by not in parties:
        raise ConfigError(path, f"{where}.{kind}.by", f"expected one of {', '.join(parties)}, got {by!r}")
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise ConfigError(path, f"{where}.{kind}.name", f"expected a mount name (no '/'), got {name!r}")
    lazy = arg.get("lazy", False)
    if not isinstance(lazy, bool):
        raise ConfigError(path, f"{where}.{kind}.lazy", f"expected true or false, got {lazy!r}")
    return kind, {"by": by, "name": name, "lazy": lazy}


# -- playing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PlayLab:
    id: str


@contextmanager
def throwaway_env(prefix: str = "mounts-play"):
    """A lab instance of its own (state dir, ledger, lock) that is removed afterwards.

    Its state directory is the first thing recorded in its ledger, so `labkit cleanup --all`
    removes it too when the process playing was killed.
    """
    state = LabState(f"{prefix}-{secrets.token_hex(4)}")
    with state.locked():
        state.ledger.record("path", path=str(state.dir))
        env = LabEnv(_PlayLab(state.lab_id), state)
        try:
            yield env
        finally:
            problems = state.ledger.cleanup()
    if problems:
        raise LabkitError(f"cleaning up after the scenario left things behind: {'; '.join(problems)}; "
                          "`labkit cleanup --all` retries")


def _maybe_crash(step: int) -> None:
    if os.environ.get(CRASH_AFTER_VAR) == str(step):
        os.kill(os.getpid(), signal.SIGKILL)


class Refusals(Exception):
    """Several containers of one step refused, each with its own message."""

    def __init__(self, refusals: list[tuple[str, str]]):
        super().__init__("; ".join(f"{name}: {message}" for name, message in refusals))
        self.refusals = refusals


class Player:
    """Plays one scenario on the node of `env` (a fresh one)."""

    def __init__(self, scenario: Scenario, env):
        self.scenario = scenario
        self.node = Node(env)
        self.pods = {party_name(p, c.name): (p, c.name) for p in scenario.pods for c in p.containers}
        self.created: set[str] = set()     # Pods the API server accepted
        self.errors: list[dict] = []
        self.holders = 0

    def play(self) -> dict:
        s = self.scenario
        self.node.start([{"path": s.host_path, "propagation": s.propagation, "upstream": UPSTREAM}])
        _maybe_crash(0)
        for number, (kind, arg) in enumerate(s.steps, start=1):
            by = arg.get("by") if isinstance(arg, dict) else None
            concerned = {"container": by} if by not in (None, HOST, UPSTREAM_PARTY) else {}
            try:
                getattr(self, f"_{kind}")(arg)
            except Refusals as exc:
                self.errors += [{"step": number, "container": name, "message": message}
                                for name, message in exc.refusals]
            except Refused as exc:
                self.errors.append({"step": number, **concerned, "message": exc.message})
            except OSError as exc:   # the kernel's answer, e.g. "umount /mnt/test/x: Device or resource busy"
                self.errors.append({"step": number, **concerned, "message": exc.strerror or str(exc)})
            _maybe_crash(number)
        return self.observe()

    # -- where things are ----------------------------------------------------------------------

    def _volume_of(self, party: str) -> tuple[int, str, int | None]:
        """(pid, path of the party's volume in its own view, capabilities: None for the node)."""
        if party == HOST:
            return self.node.require_pid(), self.scenario.host_path, None
        if party == UPSTREAM_PARTY:
            return self.node.require_pid(), UPSTREAM, None
        pod, cname = self.pods[party]
        state = self.node.container_state(pod.name, cname)
        if state["state"] != "running":
            raise Refused(f"container {party} is not running ({state.get('reason', state['state'])}"
                          + (f": {state['message']}" if state.get("message") else "") + ")", by="kubelet")
        return state["pid"], pod.container(cname).volume_mounts[0].mount_path, state["capabilities"]

    # -- steps ------------------------------------------------------------------------------

    def _start(self, names: list[str]) -> None:
        """Create the Pods of these containers (all their containers start, as with kubectl
        apply), or start again containers of Pods created before; all build in parallel. Every
        container that does not start is reported with its own refusal."""
        refusals, new_pods, again = [], [], []
        for name in names:
            pod, cname = self.pods[name]
            if pod.name in self.created:
                again.append((pod, cname))
                continue
            try:
                validate(pod)
            except Refused as exc:
                refusals.append((name, exc.message))
                continue
            self.created.add(pod.name)
            new_pods.append(pod)
        self.node.apply_all(new_pods)
        self.node.start_containers(again)
        for name in names:
            pod, cname = self.pods[name]
            if pod.name in self.created:
                state = self.node.container_state(pod.name, cname)
                if state["state"] != "running":
                    refusals.append((name, f"{state['reason']}: {state['message']}" if state.get("message")
                                     else state.get("reason", "not started")))
        if refusals:
            raise Refusals(refusals)

    def _mount(self, arg: dict) -> None:
        pid, volume, caps = self._volume_of(arg["by"])
        self.node.mount_tmpfs(pid, f"{volume}/{arg['name']}", tmpfs_source(arg["name"]), arg["name"], capabilities=caps)

    def _umount(self, arg: dict) -> None:
        pid, volume, caps = self._volume_of(arg["by"])
        self.node.umount(pid, f"{volume}/{arg['name']}", lazy=arg["lazy"], capabilities=caps)

    def _busy(self, arg: dict) -> None:
        pid, volume, caps = self._volume_of(arg["by"])
        self.holders += 1
        tag = f"busy-{self.holders}"
        where = f"{volume}/{arg['name']}"
        # a process of the container (its capabilities); nsenter's --wd=DIR would open DIR before
        # entering the namespace: cd once inside
        wrapper = kernel.exec_wrapper(caps) if caps is not None else ()
        holder = procs.spawn(self.node.env, tag, ["nsenter", f"--target={pid}", "--mount", "--", *wrapper, "sh", "-c",
                                                  'cd "$1" && exec sleep infinity', "sh", where])
        # the shell execs sleep once its cwd is in place; if it cannot, it exits
        wait_for(lambda: holder.poll() is not None or _comm(holder.pid) == "sleep", timeout=10, interval=0.005)
        if holder.poll() is not None or _comm(holder.pid) != "sleep":
            raise Refused(f"busy: cannot hold {where} in {arg['by']} (log: {self.node.env.dir}/logs/{tag}.log)", by="kernel")

    def _stop(self, names: list[str]) -> None:
        for name in names:
            pod, cname = self.pods[name]
            self.node.stop(pod.name, cname)

    # -- observing --------------------------------------------------------------------------

    def observe(self) -> dict:
        names = []
        for kind, arg in self.scenario.steps:
            if kind == "mount" and arg["name"] not in names:
                names.append(arg["name"])
        parties = [HOST] + [p for p in self.scenario.party_names
                            if self.node.container_state(*self._pod_container(p))["state"] == "running"]
        visible, tags = {}, {}
        for party in parties:
            pid, volume, _caps = self._volume_of(party)
            mounts = mountinfo.read(pid)
            visible[party] = [n for n in names if _is_tmpfs(mountinfo.visible_at(mounts, f"{volume}/{n}"), n)]
            holder = mountinfo.containing_mount(mounts, volume) if party == HOST else mountinfo.visible_at(mounts, volume)
            tags[party] = holder.tags if holder else ""
        return {"visible": visible, "tags": tags, "errors": self.errors}

    def _pod_container(self, party: str) -> tuple[str, str]:
        pod, cname = self.pods[party]
        return pod.name, cname


def _is_tmpfs(mount: mountinfo.Mount | None, name: str) -> bool:
    return mount is not None and mount.fstype == "tmpfs" and mount.source == tmpfs_source(name)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def play(scenario: Scenario) -> dict:
    """Play `scenario` on a fresh node of its own and return what every party sees."""
    with throwaway_env() as env:
        return Player(scenario, env).play()
