"""Test configuration shared by every test.

Every test runs with its own labkit state directory, answers directory and name prefix, so tests
never see each other's labs (nor a workshop's labs on the same machine). The labs under
tests/labs/ (the demo lab) are on the labs path.

Host lock (see support.py): each test holds the shared host lock; tests marked
`host_exclusive` hold it exclusively, so their before/after comparison of the host's mount table
and root iptables is not disturbed by other labkit activity. Module-scoped fixtures that build
labs take the shared lock themselves around setup and teardown (`support.host_lock(False)`).
Tests of the HOST_FREE files (marked `host_free`) create nothing on the host and take no lock, so
they also run while a host_exclusive test compares the host (in another test worker or another
checkout's suite); one of them that tries to build a lab fails.

The suite runs in several worker processes (scripts/test: pytest-xdist); each worker has its own
temporary directories, so the state directory, answers directory and prefix of every test are its
own there too, and the host lock (a file lock) orders the workers as it orders checkouts.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import REPO, diff_snapshots, host_lock, host_snapshot  # noqa: E402

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
    "test_scheduler_controller.py", "test_host_snapshot.py",
}


def fresh_environment(base: Path) -> dict[str, str]:
    """Environment variables for an isolated labkit instance rooted at `base`."""
    return {
        "LABKIT_STATE_DIR": str(base / "state"),
        "LABKIT_ANSWERS_DIR": str(base / "answers"),
        "LABKIT_PREFIX": "t" + secrets.token_hex(2),
        "LABKIT_LABS_PATH": str(TEST_LABS),
    }


def drive_labs(request, tmp_path_factory, script: str, what: str, timeout: float) -> dict:
    """For every lab the calling module's selected tests name (their `lab_id` parameter): build it
    in a labkit instance of its own, run `python SCRIPT LAB` there (it prints JSON), clean up;
    the labs at the same time. Lab id -> the parsed output."""
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    from support import labkit

    wanted = sorted({item.callspec.params["lab_id"] for item in request.session.items
                     if item.module is request.module and hasattr(item, "callspec")
                     and "lab_id" in item.callspec.params})
    bases = {lab_id: tmp_path_factory.mktemp(f"{what}-{lab_id}") for lab_id in wanted}

    def run(lab_id):
        env = {**os.environ, **fresh_environment(bases[lab_id])}
        try:
            with host_lock(False):
                labkit("run", lab_id, env=env, check=0, timeout=300)
                out = subprocess.run([sys.executable, script, lab_id], env=env, cwd=REPO, capture_output=True,
                                     text=True, timeout=timeout)
            if out.returncode != 0:
                raise AssertionError(f"driving the {what} of {lab_id} failed:\n{out.stderr[-3000:]}")
            return json.loads(out.stdout)
        finally:
            with host_lock(False):
                labkit("cleanup", lab_id, env=env, check=0)

    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        return dict(zip(wanted, pool.map(run, wanted)))


@pytest.fixture(autouse=True)
def isolated_labkit(tmp_path, monkeypatch, request):
    """Per-test labkit instance (state, answers, prefix) and the host lock."""
    for key, value in fresh_environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    if request.node.get_closest_marker("host_free"):
        # no lab can be built here: its state directory would be under a file
        blocker = tmp_path / "host-free-test-builds-no-lab"
        blocker.write_text("a host_free test (tests/conftest.py HOST_FREE) builds no lab\n")
        monkeypatch.setenv("LABKIT_STATE_DIR", str(blocker / "state"))
        yield tmp_path
        return
    exclusive = request.node.get_closest_marker("host_exclusive") is not None
    with host_lock(exclusive):
        yield tmp_path


@pytest.fixture
def host_unchanged(request):
    """Asserts that the host (mount table, root iptables, netns, cgroups, processes) is unchanged."""
    assert request.node.get_closest_marker("host_exclusive"), "tests using host_unchanged must be marked host_exclusive"
    before = host_snapshot()
    yield before
    after = host_snapshot()
    problems = diff_snapshots(before, after)
    assert not problems, "the host changed:\n" + "\n".join(problems)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in HOST_FREE:
            assert item.get_closest_marker("host_exclusive") is None, f"{item.nodeid}: host_free and host_exclusive"
            item.add_marker(pytest.mark.host_free)
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="labkit's tests need root (network and mount namespaces, netfilter, cgroups)")
        for item in items:
            item.add_marker(skip)
