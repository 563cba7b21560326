"""The lab framework end to end through the real CLI, with the demo lab in tests/labs/demo.

run -> check (fails on a fresh lab, in every format) -> hint -> solve -> check (passes) ->
reset (fails again) -> cleanup, and the host is exactly as before.
"""

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from support import labkit

EXERCISES = ["find-address", "serve-greeting", "container-mount"]


def statuses(result):
    return {r["exercise"]: r["status"] for r in json.loads(result.stdout)["results"]}


@pytest.mark.host_compared
def test_demo_lab_end_to_end(host_unchanged, tmp_path):
    assert "not started" in labkit("list", check=0).stdout

    run = labkit("run", "demo", check=0)
    assert "Demo lab" in run.stdout and "find-address" in run.stdout
    assert "labkit shell demo HOST" in run.stdout
    assert "running: 0 of 3" in labkit("list", check=0).stdout
    again = labkit("run", "demo", check=0)
    assert "already running" in again.stderr

    # a fresh lab fails every check, in every format, with exit code 1
    fresh = labkit("check", "demo", "-o", "json", check=1)
    assert statuses(fresh) == {e: "fail" for e in EXERCISES}
    junit = labkit("check", "demo", "-o", "junit", check=1)
    suite = ET.fromstring(junit.stdout.encode()).find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")] == EXERCISES
    assert len(suite.findall("testcase/failure")) == 3
    out = tmp_path / "results.json"
    labkit("check", "demo", "-o", "gradescope", "--output-file", str(out), check=1)
    gs = json.loads(out.read_text())
    assert gs["score"] == 0 and [t["status"] for t in gs["tests"]] == ["failed"] * 3
    assert [t["max_score"] for t in gs["tests"]] == [2, 3, 5]
    table = labkit("check", "demo", check=1)
    assert "no answer yet" in table.stdout and "score 0/10" in table.stdout

    # the answer check reads the student's file; a wrong answer fails with what was observed
    answers = Path(os.environ["LABKIT_ANSWERS_DIR"]) / "demo"
    answers.mkdir(parents=True, exist_ok=True)
    (answers / "find-address.yaml").write_text("address: 192.0.2.1\n")
    wrong = labkit("check", "demo", "find-address", "-o", "json", check=1)
    assert json.loads(wrong.stdout)["results"][0]["observed"] == "192.0.2.1"
    (answers / "find-address.yaml").write_text("address: [unclosed\n")
    broken = json.loads(labkit("check", "demo", "find-address", "-o", "json", check=1).stdout)
    assert "not valid YAML" in broken["results"][0]["message"]

    # hints come one at a time and are remembered
    assert "hint 1 of 2" in labkit("hint", "demo", "find-address", check=0).stdout
    assert "hint 2 of 2" in labkit("hint", "demo", "find-address", check=0).stdout
    assert "hint 2 of 2" in labkit("hint", "demo", "find-address", check=0).stdout

    # the reference solutions make every check pass
    for ex in EXERCISES:
        labkit("solve", "demo", ex, check=0)
    solved = labkit("check", "demo", "-o", "json", check=0)
    assert statuses(solved) == {e: "pass" for e in EXERCISES}
    assert json.loads(solved.stdout)["score"] == 10
    assert "running: 3 of 3" in labkit("list", check=0).stdout
    # one exercise at a time, and the answer really came from the live address
    address = yaml.safe_load((answers / "find-address.yaml").read_text())["address"]
    shell = labkit("shell", "demo", "b", "--", "ip", "-4", "-brief", "addr", "show", "eth0", check=0)
    assert address in shell.stdout

    # reset rebuilds: the environment is fresh, the answer file is kept
    labkit("reset", "demo", check=0)
    after_reset = statuses(labkit("check", "demo", "-o", "json", check=1))
    assert after_reset["serve-greeting"] == "fail" and after_reset["container-mount"] == "fail"
    assert (answers / "find-address.yaml").exists()

    labkit("cleanup", "demo", check=0)
    gone = json.loads(labkit("check", "demo", "-o", "json", check=1).stdout)
    assert all(r["status"] == "error" and "labkit run demo" in r["message"] for r in gone["results"])


def test_shell_enters_hosts_with_legacy_iptables_and_named_prompt():
    labkit("run", "demo", check=0)
    try:
        which = labkit("shell", "demo", "b", "--", "sh", "-c", "readlink -f $(command -v iptables); echo $PS1", check=0)
        assert which.stdout.splitlines()[0].endswith("xtables-legacy-multi")
        assert "[demo:b]" in which.stdout
        ns = labkit("shell", "demo", "a", "--", "ip", "-o", "link", check=0)
        assert "eth0" in ns.stdout
        mounts = labkit("shell", "demo", "c", "--", "cat", "/proc/self/mountinfo", check=0)
        assert mounts.stdout != Path("/proc/self/mountinfo").read_text()
        unknown = labkit("shell", "demo", "zz", check=2)
        assert "no host 'zz'" in unknown.stderr and "a, b, c" in unknown.stderr
    finally:
        labkit("cleanup", "demo", check=0)


def test_run_repairs_a_damaged_lab():
    labkit("run", "demo", check=0)
    try:
        state = Path(os.environ["LABKIT_STATE_DIR"]) / "demo"
        prefix = os.environ["LABKIT_PREFIX"]
        subprocess.run(["ip", "netns", "del", f"{prefix}-demo-a"], check=True)   # damage it
        check = json.loads(labkit("check", "demo", "serve-greeting", "-o", "json", check=1).stdout)
        assert "damaged" in check["results"][0]["message"]
        rebuilt = labkit("run", "demo", check=0)
        assert "rebuilding" in rebuilt.stderr
        assert (state / "status.json").exists()
        labkit("solve", "demo", "serve-greeting", check=0)
        labkit("check", "demo", "serve-greeting", check=0)
    finally:
        labkit("cleanup", "demo", check=0)


@pytest.mark.host_compared
def test_a_failing_build_removes_what_it_created(host_unchanged):
    env = {**os.environ, "LABKIT_DEMO_FAIL_AT": "cgroup"}
    failed = labkit("run", "demo", env=env, check=2)
    assert "building lab demo failed: RuntimeError: demo build failed on purpose" in failed.stderr
    assert "Everything it had created was removed" in failed.stderr and "Traceback" not in failed.stderr
    state = Path(os.environ["LABKIT_STATE_DIR"]) / "demo"
    assert not (state / "ledger.jsonl").exists()
    assert not (state / "status.json").exists()
    assert "not started" in labkit("list", check=0).stdout
