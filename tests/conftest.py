"""Test configuration shared by every test.

Every test runs with its own labkit state directory, answers directory and name prefix, so tests
never see each other's labs (nor a workshop's labs on the same machine). The labs under
tests/labs/ (the demo lab) are on the labs path.

Host lock (see support.py): each test holds the shared host lock. Every prefix a test process
gives an instance is registered for that process's life (support.register_instance). Tests
marked `host_compared` compare the host before and after (host_unchanged,
support.assert_clean_after) while other workers build labs: the comparison leaves out what other
live instances and the other prefixes of the suite's test processes changed, and compares the
rest exactly (support.diff_snapshots). Module-scoped fixtures that build labs take
the shared lock themselves around setup and teardown (`support.host_lock(False)`). Tests of the
HOST_FREE files (marked `host_free`) create nothing on the host and take no lock; one of them that
tries to build a lab fails.

The suite runs in several worker processes (scripts/test: pytest-xdist); each worker has its own
temporary directories, so the state directory, answers directory and prefix of every test are its
own there too, and the host lock (a file lock) orders the workers as it orders checkouts.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import LOCK_LOG_ENV, REPO, diff_snapshots, host_lock, host_snapshot, lock_summary, register_instance, forget_instances  # noqa: E402

TEST_LABS = REPO / "tests" / "labs"

# Test files that create nothing on the host: no lab, network namespace, mount, iptables rule,
# cgroup or kernel module (in-process API servers, kubectl and the clients against them over
# loopback, pure models and renderers). A file belongs here only if none of its tests or fixtures
# does any of that; a test of theirs that builds a lab fails (`isolated_labkit`).
HOST_FREE = {
    "test_apiserver_apply.py", "test_apiserver_auth.py", "test_apiserver_clients.py", "test_apiserver_crds.py",
    "test_apiserver_defaulting.py", "test_apiserver_fuzz.py", "test_apiserver_kinds.py",
    "test_apiserver_kubectl.py", "test_apiserver_kubectl_habits.py", "test_apiserver_load.py",
    "test_apiserver_machinery.py", "test_apiserver_openapi.py", "test_apiserver_python_client.py",
    "test_apiserver_registry.py", "test_cluster_controllers.py", "test_deployment_controller.py",
    "test_grading.py", "test_kube_proxy_cluster_state.py", "test_kubeproxy_render.py",
    "test_kubernetes_version.py", "test_lab_definitions.py", "test_namespace_lifecycle.py",
    "test_namespace_requeue.py", "test_numa_admission.py", "test_numa_diagram.py", "test_numa_fidelity.py",
    "test_numa_merge_properties.py", "test_resources_fidelity.py", "test_yaml_fast.py", "test_scheduler_fidelity.py",
    "test_strict.py", "test_discovery_cost.py", "test_import_cycles.py", "test_devices_fidelity.py",
    "test_scheduler_controller.py", "test_host_snapshot.py", "test_suite_order.py", "test_audit_read.py",
    "test_settle_inode_times.py", "test_feedback_rule.py",
}


# every labkit instance this process made, for the cleanup after a SIGTERM (_on_sigterm)
_INSTANCES: list[dict[str, str]] = []


def fresh_environment(base: Path) -> dict[str, str]:
    """Environment variables for an isolated labkit instance rooted at `base`."""
    env = {
        "LABKIT_STATE_DIR": str(base / "state"),
        "LABKIT_ANSWERS_DIR": str(base / "answers"),
        "LABKIT_PREFIX": "t" + secrets.token_hex(2),
        "LABKIT_LABS_PATH": str(TEST_LABS),
    }
    _INSTANCES.append(env)
    register_instance(env["LABKIT_PREFIX"])
    return env


def _has_labs(env: dict[str, str]) -> bool:
    """Whether the instance has anything recorded (a cleanup empties the ledger)."""
    try:
        return any(ledger.stat().st_size for ledger in Path(env["LABKIT_STATE_DIR"]).glob("*/ledger.jsonl"))
    except OSError:
        return False


# Modules whose tests are judged from labs driven by their `drive(lab_id)` (`python MODULE LAB`
# prints its JSON; the suite runs a lab's drivers in one process, tests/lab_drive.py), with the
# seconds each drive may take. Every drive starts each exercise it works
# on with `labkit reset` (and leaves it reset), so several drives share one build of a lab.
LAB_DRIVERS = {"test_mistakes.py": 900, "test_mutants.py": 1500, "test_fuzz_answers.py": 600}


def _shared_directory(tmp_path_factory) -> Path:
    """A directory of this test run that every test worker sees (pytest-xdist gives each worker a
    base temporary directory of its own, inside the run's)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "lab-drives"
    shared.mkdir(exist_ok=True)
    return shared


def drive_labs(request, tmp_path_factory, script: str, what: str, timeout: float) -> dict:
    """For every lab the calling module's selected tests name (their `lab_id` parameter): its
    outcome of SCRIPT's `drive(LAB)` (as `python SCRIPT LAB` prints it), run in a labkit instance of
    its own; the labs at the same time. Lab id -> the parsed output.

    A lab is built once for all the LAB_DRIVERS whose selected tests name it: whichever test worker
    needs it first builds it, runs each of those drivers in turn, cleans up and writes their outputs
    to the run's shared directory, under a lock per lab; the other reads them from there."""
    import fcntl
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from support import labkit

    def labs_of(module) -> set[str]:
        return {item.callspec.params["lab_id"] for item in request.session.items
                if item.path.name == module and hasattr(item, "callspec") and "lab_id" in item.callspec.params}

    mine = Path(script).name
    wanted = sorted(labs_of(mine))
    drivers = {module: labs_of(module) for module in LAB_DRIVERS}
    drivers[mine] = set(wanted)
    shared = _shared_directory(tmp_path_factory)
    here = Path(__file__).resolve().parent

    def drive_once(lab_id, modules: list[str]) -> dict:
        """Driver module -> {"out": its JSON output} or {"error": why it failed}."""
        env = {**os.environ, **fresh_environment(tmp_path_factory.mktemp(f"{what}-{lab_id}"))}
        outputs = {}
        seconds = _Stopwatch(shared / f"{lab_id}.seconds.json")
        try:
            with host_lock(False):
                with seconds("run"):
                    labkit("run", lab_id, env=env, check=0, timeout=300)
                # every driver in one process (tests/lab_drive.py), which imports labkit and the lab once
                out = subprocess.run([sys.executable, str(here / "lab_drive.py"), lab_id, *modules], env=env,
                                     cwd=REPO, capture_output=True, text=True,
                                     timeout=sum(LAB_DRIVERS.get(module, timeout) for module in modules))
                try:
                    found = json.loads(out.stdout) if out.returncode == 0 else {}
                except ValueError:
                    found = {}
                for module in modules:
                    if module in found:
                        seconds.record(module, found[module].pop("seconds"))
                        outputs[module] = found[module]
                    else:
                        outputs[module] = {"error": f"driving {module} on {lab_id} failed (exit {out.returncode}):"
                                                    f"\n{out.stderr[-3000:]}"}
        except Exception as exc:        # the build, or a driver that ran out of time
            for module in modules:
                outputs.setdefault(module, {"error": f"driving {lab_id} for {module} failed: {exc}"})
        finally:
            with host_lock(False):
                with seconds("cleanup"):
                    labkit("cleanup", lab_id, env=env, check=0)
        return outputs

    def run(lab_id):
        fd = os.open(shared / f"{lab_id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            done = shared / f"{lab_id}.json"
            outputs = json.loads(done.read_text()) if done.exists() else {}
            if mine not in outputs:
                outputs = {**outputs, **drive_once(lab_id, [m for m in drivers if lab_id in drivers[m]
                                                            and m not in outputs])}
                done.write_text(json.dumps(outputs))
        finally:
            os.close(fd)
        if "error" in outputs[mine]:
            raise AssertionError(outputs[mine]["error"])
        return outputs[mine]["out"]

    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        return dict(zip(wanted, pool.map(run, wanted)))


class _Stopwatch:
    """Wall seconds of each step of a lab's drive (build, each driver, cleanup), added to a JSON
    file of the run's shared directory as each step ends; the run's summary lists them
    (pytest_terminal_summary)."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, step: str):
        import contextlib
        import time

        @contextlib.contextmanager
        def timed():
            started = time.monotonic()
            try:
                yield
            finally:
                self.record(step, time.monotonic() - started)
        return timed()

    def record(self, step: str, seconds: float) -> None:
        import json
        found = json.loads(self.path.read_text()) if self.path.exists() else {}
        found[step] = round(seconds, 1)
        self.path.write_text(json.dumps(found))


def drive_summary(shared: Path) -> list[str]:
    """One line per lab driven in this run: the seconds of its build, drivers and cleanup."""
    import json
    lines = []
    for path in sorted(shared.glob("*.seconds.json")):
        steps = json.loads(path.read_text())
        lines.append(f"  {path.name.removesuffix('.seconds.json')}: {sum(steps.values()):.0f} s ("
                     + ", ".join(f"{step.removesuffix('.py')} {s:.0f}" for step, s in steps.items()) + ")")
    return lines


@pytest.fixture(autouse=True)
def isolated_labkit(tmp_path, monkeypatch, request):
    """Per-test labkit instance (state, answers, prefix) and the host lock."""
    own = fresh_environment(tmp_path)
    for key, value in own.items():
        monkeypatch.setenv(key, value)
    if request.node.get_closest_marker("host_free"):
        # no lab can be built here: its state directory would be under a file
        blocker = tmp_path / "host-free-test-builds-no-lab"
        blocker.write_text("a host_free test (tests/conftest.py HOST_FREE) builds no lab\n")
        monkeypatch.setenv("LABKIT_STATE_DIR", str(blocker / "state"))
        yield tmp_path
        return
    with host_lock(False):
        yield tmp_path
        # the test's own instance, not whatever the environment names now: a test working on a
        # module's shared lab points LABKIT_* at that lab, which must outlive the test
        _clean_up_what_the_test_left({**os.environ, **own})


def _clean_up_what_the_test_left(env: dict[str, str]) -> None:
    """A test that fails before its own cleanup (an assertion in the middle of a crash test, say)
    would leave its labs up: cgroups, processes and network namespaces on the host. Every lab of
    the test's own instance is cleaned up after it, through labkit's ledger, whatever happened; a
    leak is still reported by the test's own comparison (host_unchanged), which runs first."""
    if not _has_labs(env):
        return      # nothing recorded, or everything released
    from support import labkit
    labkit("cleanup", "--all", env=env, check=None)


def _on_sigterm(signum, frame):
    """A test process stopped with SIGTERM (kill, a CI timeout) leaves no lab behind: a detached
    process (tests/cleanup_after.py) cleans up every instance it made once it is gone, and it dies
    of the signal at once, as it would have without this handler (under pytest-xdist the worker is
    replaced and the run goes on; turned into an interrupt, it stopped the whole run)."""
    left = [env for env in _INSTANCES if _has_labs(env)]
    if left:
        import json
        import subprocess
        subprocess.Popen([sys.executable, str(Path(__file__).with_name("cleanup_after.py")), str(os.getpid()),
                          json.dumps(left)], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def pytest_unconfigure(config):
    forget_instances()


def pytest_configure(config):
    signal.signal(signal.SIGTERM, _on_sigterm)
    if not hasattr(config, "workerinput") and not os.environ.get(LOCK_LOG_ENV):
        # the run's record of host-lock holds (support.host_lock), summed up at its end; the test
        # workers inherit the variable (they start after this)
        import tempfile
        fd, path = tempfile.mkstemp(prefix="labkit-test-lock-", suffix=".jsonl")
        os.close(fd)
        os.environ[LOCK_LOG_ENV] = path
        config._labkit_lock_log = path


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = getattr(config, "_labkit_lock_log", None) or \
        (os.environ.get(LOCK_LOG_ENV) if not hasattr(config, "workerinput") else None)
    if path and os.path.exists(path):
        terminalreporter.write_line(lock_summary(path))
        if getattr(config, "_labkit_lock_log", None):
            os.unlink(path)
    factory = getattr(config, "_tmp_path_factory", None)
    if not hasattr(config, "workerinput") and factory is not None:
        drives = drive_summary(factory.getbasetemp() / "lab-drives")
        if drives:
            terminalreporter.write_line("lab drives (seconds, wall; the labs side by side):")
            for line in drives:
                terminalreporter.write_line(line)


@pytest.fixture
def host_unchanged(request):
    """Asserts that the host (mount table, root iptables, netns, cgroups, processes) is unchanged."""
    assert request.node.get_closest_marker("host_compared"), "tests using host_unchanged must be marked host_compared"
    before = host_snapshot()
    yield before
    after = host_snapshot()
    problems = diff_snapshots(before, after)
    assert not problems, "the host changed:\n" + "\n".join(problems)


# The order in which scripts/test hands whole files to its workers (--dist loadfile
# --no-loadscope-reorder: in collection order, which longest_first sets). The first file drives
# every lab for all LAB_DRIVERS (drive_labs: minutes, the labs side by side); its worker waits for
# that, holding the host lock shared. Meanwhile the other workers run BESIDE_THE_DRIVES, long
# files that do not need the drives' outputs. Then the other drivers' files, whose
# outputs are ready by then, and the rest, the longest first, so that no long file is handed out
# last and ends the run alone. Durations: per-file sums of setup, call and teardown from
# `pytest --junitxml` of the whole suite (2 workers, 2 cores), less the host-lock waits the run
# reports; refresh them the same way.
DRIVES_FIRST = "test_mutants.py"
BESIDE_THE_DRIVES = [
    "test_namespace_real_cluster.py", "test_namespace_lab.py", "test_lab_material.py", "test_requests_lab.py",
    "test_gc_scenarios.py",
]
LONGEST_FIRST = [
    DRIVES_FIRST, *BESIDE_THE_DRIVES,
    "test_mistakes.py", "test_fuzz_answers.py",     # driven with test_mutants.py (one build per lab)
    "test_reliability.py", "test_gc_lab.py", "test_lab_isolation.py", "test_kube_proxy_judging.py",
    "test_namespace_reset.py", "test_mount_propagation_lab.py", "test_admission_kubectl.py", "test_class_grade.py",
    "test_resources_lab.py", "test_kube_proxy_lab.py", "test_namespace_settle.py", "test_fuzz_inputs.py",
    "test_class_ansible.py", "test_devices_grpc.py", "test_crash_cleanup.py", "test_mounts_scenarios.py",
    "test_deployment_controller.py", "test_kube_proxy_exercises.py", "test_devices_lab.py", "test_numa_crash_cleanup.py",
    "test_scheduler_lab.py", "test_demo_lab.py", "test_numa_lab.py", "test_mounts_crash_cleanup.py",
    "test_cluster_controllers.py", "test_setup_scripts.py", "test_kubernetes_version.py", "test_controllers.py",
]


def longest_first(items: list) -> None:
    """Sort collected items: the files of LONGEST_FIRST first, in its order, then the others as
    collected; the items of one file stay together and in their order (the sort is stable)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_collection_modifyitems(config, items):
    longest_first(items)
    for item in items:
        if item.path.name in HOST_FREE:
            assert item.get_closest_marker("host_compared") is None, f"{item.nodeid}: host_free and host_compared"
            item.add_marker(pytest.mark.host_free)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="labkit's tests need root (network and mount namespaces, netfilter, cgroups)")
        for item in items:
            item.add_marker(skip)
