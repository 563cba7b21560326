"""The ledger: recorded resources are removed, unrecorded ones are never touched."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit import cgroups, procs
from labkit.labs import get_lab
from labkit.netlab import create_netns, exists
from labkit.netlab.netns import release_run_netns
from labkit.state import LabEnv, LabState
from support import wait_until


@pytest.fixture
def env():
    lab = get_lab("demo")
    state = LabState(lab.id)
    state.ensure_dir()
    e = LabEnv(lab, state)
    yield e
    state.ledger.cleanup()


def drop_foreign_netns(name: str) -> None:
    """Remove a namespace the test made without labkit; it kept /run/netns in use when labkit's
    cleanup ran, so undo the /run/netns mount now as that cleanup would have (else the host keeps
    it, and a later host comparison sees it go)."""
    subprocess.run(["ip", "netns", "del", name])
    release_run_netns()


def test_recorded_netns_and_process_are_removed_unrecorded_survive(env):
    mine = create_netns(env, "x")
    foreign = f"{env.prefix}-foreign"
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tracked = procs.spawn(env, "sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], netns=mine)
        # the token is in the process's environment once it has exec'd (nsenter execs in place:
        # same pid); on a loaded machine that came after the first look, once
        assert wait_until(lambda: procs.find(procs.owner_token(env, "sleeper")), timeout=30), tracked.pid
        problems = env.ledger.cleanup()
        assert problems == []
        assert not exists(mine)
        assert procs.find(procs.owner_token(env, "sleeper")) == []
        assert exists(foreign), "cleanup removed a namespace it did not record"
        assert stranger.poll() is None, "cleanup killed a process it did not start"
        assert env.ledger.entries() == []
    finally:
        stranger.kill()
        stranger.wait()
        drop_foreign_netns(foreign)


def test_running_is_whether_find_finds_a_process_of_the_token(env):
    """procs.running asks the process it found last time first; a process of the token started
    anew is found, one that is gone (or a PID now of another process) is not."""
    token = procs.owner_token(env, "runner")
    assert not procs.running(token)
    first = procs.spawn(env, "runner", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert procs.running(token) and procs._SEEN[token] in procs.find(token)
    assert procs.running(token)         # the one found before, asked alone
    procs.kill(procs.find(token))
    first.wait()
    assert not procs.running(token) and token not in procs._SEEN
    again = procs.spawn(env, "runner", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert procs.running(token)
    procs._SEEN[token] = os.getpid()    # a PID that is not the token's: the scan decides
    assert procs.running(token) and procs._SEEN[token] in procs.find(token)
    procs.kill(procs.find(token))
    again.wait()
    assert not procs.running(token)


def _no_pass_over_every_process(*_args, **_kwargs):
    raise AssertionError("a pass over every process's environment")


@pytest.mark.parametrize("lab_id", ["namespace", "requests"])
def test_a_labs_health_check_reads_its_backends_recorded_pid_instead_of_every_process(env, monkeypatch, lab_id):
    """is_up of the namespace and requests labs asks whether the webhook / metrics backend lives
    before every check, reset and solution: one read of /proc/<pid>/stat of the process spawn()
    recorded (pid and start time), not every process's environment (~23 ms with 1,100 processes);
    a backend that is gone, or whose pid now names another process, is not up."""
    lab = get_lab(lab_id).environment_module()
    monkeypatch.setattr(lab, "server_alive", lambda state_dir: True)
    built = Path(env.dir) / ("namespaces.json" if lab_id == "namespace" else lab.AUDIT_FILE)
    built.parent.mkdir(parents=True, exist_ok=True)
    built.write_text("{}")
    backend = procs.spawn(env, lab.BACKEND_TAG, [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        monkeypatch.setattr(procs, "find", _no_pass_over_every_process)
        monkeypatch.setattr(procs, "find_any", _no_pass_over_every_process)
        assert lab.is_up(env)
        record = procs._started_path(env, lab.BACKEND_TAG)
        pid, started = json.loads(record.read_text()).values()
        record.write_text(json.dumps({"pid": pid, "start": started + 1}))      # the pid reused by another process
        assert not lab.is_up(env)
        record.write_text(json.dumps({"pid": pid, "start": started}))
    finally:
        backend.kill()
        backend.wait()
    assert not lab.is_up(env)
    monkeypatch.undo()
    again = procs.spawn(env, lab.BACKEND_TAG, [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record.unlink()          # no record (a spawn cut short): a process carrying the owner token
        assert wait_until(lambda: procs.alive(env, lab.BACKEND_TAG), timeout=30)
    finally:
        again.kill()
        again.wait()
    assert not procs.alive(env, lab.BACKEND_TAG)


def test_processes_a_student_starts_inside_a_lab_netns_go_with_it(env):
    name = create_netns(env, "y")
    loose = subprocess.Popen(["nsenter", f"--net=/run/netns/{name}", "--", "sleep", "60"])
    time.sleep(0.1)
    env.ledger.cleanup()
    assert loose.wait(timeout=5) is not None


def test_cut_short_line_is_ignored(env):
    env.ledger.record("path", path=str(env.dir / "thing"))
    with open(env.ledger.path, "a") as f:
        f.write('{"kind": "netns", "na')   # a crash in the middle of writing
    assert [e["kind"] for e in env.ledger.entries()] == ["path"]


def test_cgroup_with_a_process_is_removed(env):
    group = cgroups.create(env, "pods/one")
    sleeper = procs.spawn(env, "pinned", ["sleep", "60"])
    cgroups.add_process(group, sleeper.pid)
    assert sleeper.pid in cgroups.processes(group)
    assert env.ledger.cleanup() == []
    assert not group.exists() and not group.parent.parent.exists()


def test_paths_outside_labkit_roots_are_refused(env, tmp_path):
    outside = Path("/tmp") / f"not-labkit-{os.getpid()}"
    outside.mkdir()
    try:
        env.ledger.record("path", path=str(outside))
        problems = env.ledger.cleanup()
        assert problems and "refusing to delete" in problems[0]
        assert outside.exists()
        assert [e["path"] for e in env.ledger.entries()] == [str(outside)], "a failed removal must stay recorded"
    finally:
        outside.rmdir()
        env.ledger.path.unlink()


def test_links_go_with_their_recorded_namespace_and_others_are_removed_one_by_one(env):
    from labkit.netlab import add_veth, netns_path

    a, b = create_netns(env, "la"), create_netns(env, "lb")
    add_veth(env, a, "v-a", b, "v-b")
    foreign = f"{env.prefix}-foreign-links"
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        subprocess.run(["ip", "-n", foreign, "link", "add", "keep", "type", "veth", "peer", "name", "keep-peer"], check=True)
        env.ledger.record("link", netns=foreign, name="mine")
        subprocess.run(["ip", "-n", foreign, "link", "add", "mine", "type", "veth", "peer", "name", "mine-peer"], check=True)
        assert env.ledger.cleanup() == []
        assert not exists(a) and not exists(b) and env.ledger.entries() == []
        links = subprocess.run(["ip", "-n", foreign, "-o", "link"], capture_output=True, text=True).stdout
        assert "keep" in links and "mine" not in links   # a link in an unrecorded namespace: removed itself
        assert netns_path(foreign).exists()
    finally:
        drop_foreign_netns(foreign)


def test_spawn_returns_only_once_the_programs_environment_is_laid_out(env, monkeypatch):
    """Popen returns before the kernel has laid out the new program's environment; a find() in
    that window missed the process (CI, on a loaded machine). spawn() waits it out."""
    looks = []

    def laid_out(pid):
        looks.append(pid)
        return len(looks) >= 3

    monkeypatch.setattr(procs, "_environ_laid_out", laid_out)
    proc = procs.spawn(env, "runner", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert looks == [proc.pid] * 3
    finally:
        procs.kill([proc.pid])
        proc.wait()
    monkeypatch.undo()
    assert procs._environ_laid_out(os.getpid())
    assert procs._environ_laid_out(2 ** 22 + 1)     # no such process: nothing to wait for
