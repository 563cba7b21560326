"""The device-plugins lab's environment.

Lab directory (env.dir):
  plugins/<exercise>.py   the student's plugins, one per exercise (a starter until written)
  widget-driver/          the directory the Allocate answer mounts into containers (VERSION inside)
  devices/                the widgets' stand-in device nodes: widget-0 .. widget-3, character devices
                          with /dev/null's numbers (1:3), made with mknod; a DeviceSpec naming one
                          puts it into the container's mount namespace
  scenarios/              the checkpoint exercise's case (restart.yaml) and the checkpoint it gives,
                          as kubelet writes it (kubelet_internal_checkpoint); graded on the lab's copy
  logs/                   the plugin processes' and containers' output

API server: labkit's embedded API server (apiserver/ in the lab directory) with its controllers
and labkit's kube-scheduler (not the node stand-in: the lab's Node is the one its kubelet
registers). The Node `widget-node` is registered at the start as its kubelet registers it
(labkit.devices.nodestatus); every run's kubelet then writes its status: capacity and allocatable
of the plugin's resource. Pods created with kubectl are validated and scheduled against it (an
extended resource is a whole number, its request equal to its limit; `Insufficient
example.com/widget` when the Node's allocatable is short); no kubelet runs them, so a bound Pod
stays Pending with its node, as on a cluster whose kubelet is stopped.

Nodes: /run/labkit/<prefix>-device-plugins/<run>/, one fresh node per run (`labkit devices try`,
each check): kubelet's device-plugins directory with kubelet.sock, the plugin's socket and the
checkpoint; beside it <run>.files/ with the health file and the containers' specs and roots. They
are not in the lab directory because a unix socket's path has at most 107 bytes, and a lab
directory may be deep; /run/labkit is labkit's own (it holds the labs' kernel-module claims).

Nothing runs between runs: each `labkit devices try` and each check starts labkit's kubelet and
the plugin afresh, as processes recorded in the ledger, and stops them at the end. A reset puts
the starter back in place of an exercise's plugin; the student's file is copied first to the
answers directory (`kept/`), which no reset or cleanup touches. `labkit cleanup` copies every plugin
the student wrote there too before it removes plugins/ (keep_at_cleanup).
"""

import os
import shutil
import stat
from pathlib import Path

from labkit import paths, procs
from labkit.apiserver.target import SERVER_TAG, for_env
from labkit.crashpoints import crash_point

HERE = Path(__file__).resolve().parent
STARTER = HERE / "starter" / "plugin.py"
EXERCISES = ("register", "health", "allocate", "preferred", "restart", "share")    # the plugin exercises
SCENARIO = HERE / "scenarios" / "restart.yaml"      # exercise checkpoint: the lab's own case
DRIVER_VERSION = "widget driver 1.4.2 (labkit device-plugins lab)\n"
NODE = "widget-node"
WIDGETS = ("widget-0", "widget-1", "widget-2", "widget-3")
# the stand-in widgets' device numbers: /dev/null's (the mem driver, minor 3): a process that
# opens one reads nothing and writes into nothing, and no hardware is behind it
STAND_IN = (1, 3)
# what Pods made with kubectl need (a namespace's default ServiceAccount and root CA ConfigMap,
# namespace deletion, owner references) and the scheduler; not the node stand-in (it would register
# a Node of its own and bind Pods itself): the lab's Node is the one its kubelet registers
CONTROLLERS = ("garbagecollector", "namespace", "serviceaccount", "root-ca-cert-publisher", "scheduler")


def _record_dir(env, name: str) -> Path:
    path = env.dir / name
    env.ledger.record("path", path=str(path))
    return path


def up(env):
    plugins = _record_dir(env, "plugins")
    plugins.mkdir()
    for exercise in EXERCISES:
        shutil.copy(STARTER, plugins / f"{exercise}.py")
    crash_point("device-plugins:plugins")
    _record_dir(env, "scenarios").mkdir()
    write_scenario(env)
    driver = _record_dir(env, "widget-driver")
    driver.mkdir()
    (driver / "VERSION").write_text(DRIVER_VERSION)
    make_devices(_record_dir(env, "devices"))      # in the ledger before it exists
    crash_point("device-plugins:devices")
    nodes = node_root(env)
    env.ledger.record("path", path=str(nodes))
    nodes.mkdir()          # /run/labkit exists: the lab's kernel-module claim (labkit.kmodules) made it
    crash_point("device-plugins:node")
    from labkit.apiserver.process import spawn
    spawn(env, SERVER_TAG, controllers=CONTROLLERS)     # its state directory is in the ledger
    crash_point("device-plugins:server")
    node_status(env).register(node_recreated=True)
    env.log(f"the Node {NODE} registered on labkit's embedded API server, with its scheduler")


def make_devices(directory: Path) -> None:
    """The stand-in character devices, one per widget (mknod; mode 0666 whatever the umask)."""
    directory.mkdir()
    for widget in WIDGETS:
        node = directory / widget
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(*STAND_IN))
        os.chmod(node, 0o666)


def devices_ready(env) -> bool:
    try:
        return all(stat.S_ISCHR((st := os.lstat(env.dir / "devices" / w)).st_mode)
                   and (os.major(st.st_rdev), os.minor(st.st_rdev)) == STAND_IN for w in WIDGETS)
    except OSError:
        return False


def write_scenario(env) -> None:
    """scenarios/ in the lab directory: the checkpoint exercise's case file, and the checkpoint it
    gives written as kubelet writes kubelet_internal_checkpoint (`labkit devices checkpoint -f`)."""
    from labkit.devices.play import load_case, write_given_checkpoint
    target = env.dir / "scenarios"
    shutil.copy(SCENARIO, target / SCENARIO.name)
    write_given_checkpoint(load_case(SCENARIO)["given"]["checkpoint"], target / "kubelet_internal_checkpoint")


def node_status(env):
    """The lab's Node as its kubelet writes it (labkit.devices.nodestatus), on the lab's API server."""
    from labkit.apiserver.client import HttpClient
    from labkit.devices.nodestatus import USER_AGENT, NodeStatus
    return NodeStatus(HttpClient.for_embedded(for_env(env).kubeconfig, user_agent=USER_AGENT), NODE)


def node_root(env) -> Path:
    return Path("/run/labkit") / f"{env.prefix}-device-plugins"


def is_up(env):
    if not ((env.dir / "plugins").is_dir() and (env.dir / "widget-driver" / "VERSION").is_file()
            and (env.dir / "scenarios" / SCENARIO.name).is_file() and devices_ready(env) and node_root(env).is_dir()):
        return False
    from labkit.apiserver.errors import ApiError
    from labkit.errors import LabkitError
    try:
        return for_env(env).client().get_or_none("v1", "nodes", NODE) is not None
    except (LabkitError, ApiError, OSError):
        return False


def plugin_path(env, exercise_id: str) -> Path:
    return env.dir / "plugins" / f"{exercise_id}.py"


def write_plugin(env, exercise_id: str, source: str) -> Path:
    """Write a plugin as a student would (reference solutions, common mistakes)."""
    path = plugin_path(env, exercise_id)
    path.write_text(source)
    return path


def session(env, run: str, plugin_file: Path):
    """A fresh node in <node root>/<run>/ with `plugin_file` started against it (labkit.devices.session),
    its processes in the lab's ledger and their output in logs/<run>-<tag>.log."""
    from labkit.devices.session import Session

    def log(tag: str) -> Path:
        return env.dir / "logs" / f"{run}-{tag}.log"

    def spawn(tag: str, argv, extra_env):
        log(tag).unlink(missing_ok=True)
        return procs.spawn(env, f"{run}-{tag}", argv, cwd=env.dir, extra_env=extra_env)

    return Session(node_root(env) / run, plugin_file, spawn, log, node_status=node_status(env))


# -- resetting one exercise, keeping the student's work ---------------------------------------------

def _edited(env, exercise_id: str) -> bool:
    path = plugin_path(env, exercise_id)
    try:
        return path.read_bytes() != STARTER.read_bytes()
    except OSError:
        return False


def _kept_dir() -> Path:
    return paths.answers_root() / "device-plugins" / "kept"


def _edited_scenarios(env, exercise_id: str | None) -> list[Path]:
    """The checkpoint exercise's scenario files in the lab directory the student changed (reset
    writes them afresh): those that differ from what write_scenario writes."""
    if exercise_id not in (None, "checkpoint"):
        return []
    import tempfile

    from labkit.devices.play import load_case, write_given_checkpoint
    with tempfile.TemporaryDirectory(prefix="labkit-devices-") as tmp:
        fresh = Path(tmp) / "kubelet_internal_checkpoint"
        write_given_checkpoint(load_case(SCENARIO)["given"]["checkpoint"], fresh)
        given = {SCENARIO.name: SCENARIO.read_bytes(), fresh.name: fresh.read_bytes()}
    out = []
    for name, text in given.items():
        path = env.dir / "scenarios" / name
        try:
            if path.read_bytes() != text:
                out.append(path)
        except OSError:
            continue
    return out


def student_work(env, exercise_id: str | None) -> list[str]:
    """What `labkit reset device-plugins [EXERCISE]` replaces of the student's work: each plugin
    they wrote (the starter comes back; their file is kept in the answers directory first), and
    the checkpoint exercise's scenario files they changed (written afresh; theirs kept first)."""
    ids = [exercise_id] if exercise_id in EXERCISES else [] if exercise_id else list(EXERCISES)
    return [f"plugins/{ex}.py you wrote (the starter comes back; your file is kept under {_kept_dir()})"
            for ex in ids if _edited(env, ex)] + \
        [f"scenarios/{p.name} you changed (the lab's comes back; yours is kept under {_kept_dir()})"
         for p in _edited_scenarios(env, exercise_id)]


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Copy each plugin the student wrote to <answers>/device-plugins/kept/<exercise>-<n>.py
    before a reset replaces it; one line each saying where it went."""
    ids = [exercise_id] if exercise_id in EXERCISES else [] if exercise_id else list(EXERCISES)
    lines = []
    for ex in ids:
        if not _edited(env, ex):
            continue
        kept = _kept_dir()
        kept.mkdir(parents=True, exist_ok=True)
        n = 1
        while (kept / f"{ex}-{n}.py").exists():
            n += 1
        shutil.copy2(plugin_path(env, ex), kept / f"{ex}-{n}.py")
        lines.append(f"plugins/{ex}.py kept as {kept / f'{ex}-{n}.py'}")
    for path in _edited_scenarios(env, exercise_id):
        kept = _kept_dir()
        kept.mkdir(parents=True, exist_ok=True)
        n = 1
        while (kept / f"scenarios-{n}-{path.name}").exists():
            n += 1
        shutil.copy2(path, kept / f"scenarios-{n}-{path.name}")
        lines.append(f"scenarios/{path.name} kept as {kept / f'scenarios-{n}-{path.name}'}")
    return lines


def keep_at_cleanup(env) -> list[str]:
    """`labkit cleanup device-plugins` removes the lab directory, plugins/ with it: every plugin
    the student wrote is kept first, as before a reset."""
    return keep_student_work(env, None)


def reset_exercise(env, exercise_id: str) -> None:
    """The starter back in plugins/<exercise>.py (keep_student_work has copied the student's
    file first); the exercise's node directory goes. checkpoint: the scenario files are written
    afresh (the answer file is the student's work, and no reset touches it)."""
    if exercise_id not in EXERCISES:
        write_scenario(env)
        return
    shutil.copy(STARTER, plugin_path(env, exercise_id))
    for run in (node_root(env) / exercise_id, node_root(env) / f"{exercise_id}.files"):
        if run.exists():
            shutil.rmtree(run)


def access(env):
    return (
        "## Your lab directory\n\n"
        f"`cd {env.dir}` — the exercises' paths are relative to it.\n\n"
        "* `plugins/` — your plugins, one per exercise (each starts as a skeleton to complete)\n"
        "* `widget-driver/` — the driver directory containers get mounted (exercise allocate)\n"
        "* `devices/` — the widgets' stand-in device nodes (character devices 1:3, /dev/null's numbers)\n"
        "* `logs/` — your plugins' output\n"
        "* `scenarios/` — the checkpoint exercise's case file and kubelet_internal_checkpoint\n"
        f"* `{node_root(env)}/` — the nodes `labkit devices try` and the checks start\n\n"
        "Run a plugin against a fresh kubelet: `labkit devices try plugins/register.py`.\n\n"
        "## Your cluster\n\n"
        f"labkit's embedded API server with labkit's kube-scheduler; each run's kubelet writes the Node {NODE}'s "
        "status (capacity and allocatable of your plugin's resource).\n\n"
        f"    export KUBECONFIG={for_env(env).kubeconfig}\n"
        f"    kubectl get node {NODE} -o yaml\n"
        f"    kubectl describe node {NODE}\n"
    )
