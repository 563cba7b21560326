"""The reliability harness in the suite, kept short: scripts/reliability crash with a few kill
points per lab (the long run is `scripts/reliability crash`, 25 points per lab by default), the
harness's own ability to notice debris, bad command-line input, and hostile names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from support import REPO, labkit, labkit_in_process

HARNESS = REPO / "scripts" / "harness" / "reliability.py"
sys.path.insert(0, str(HARNESS.parent))
import reliability  # noqa: E402


@pytest.mark.host_compared
def test_crash_harness_over_every_lab(host_unchanged):
    out = subprocess.run([sys.executable, str(HARNESS), "crash", "--points", "2", "--rebuild-every", "2",
                          "--no-lock", "-q"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line and not line.startswith("PROBLEM")}
    assert set(rows) == set(reliability.discover_labs()) and rows
    for lab, row in rows.items():
        kills, clean, problems = int(row[1]), int(row[8]), int(row[9])
        assert kills == 2 and clean == 2 and problems == 0, row


@pytest.mark.host_compared
def test_the_harness_notices_what_cleanup_does_not_remove(host_unchanged):
    prefix = os.environ["LABKIT_PREFIX"]
    result = reliability.LabResult("numa")
    stray = Path("/sys/fs/cgroup/pids") / f"labkit-{prefix}-stray"
    stray.mkdir()   # a cgroup nobody recorded: cleanup leaves it, the harness must say so
    try:
        reliability.verify_clean("numa", host_unchanged, "a stray cgroup", result)
    finally:
        stray.rmdir()
    assert result.clean == 0 and len(result.problems) == 1 and "cgroups" in result.problems[0]


HOSTILE = "x; touch /tmp/labkit-pwned"


@pytest.mark.parametrize("args", [
    ["run", HOSTILE], ["check", HOSTILE], ["show", "numa", HOSTILE], ["hint", "numa", HOSTILE],
    ["cleanup", HOSTILE], ["shell", "kube-proxy", HOSTILE], ["check", "numa", "--format", HOSTILE],
    ["numa", "admit", "-f", HOSTILE, "--machine", "lab-two-node"], ["numa", "admit", "-f", "{pods}", "--machine", HOSTILE],
    ["numa", "merge", "-f", "{garbage}"], ["kube-proxy", "render", "-f", "{garbage}"],
    ["kube-proxy", "render", "-f", "{empty}", "--config", "{garbage}"], ["mounts", "play", "-f", "{garbage}"],
    ["numa", "admit", "-f", "{garbage}", "--machine", "lab-two-node"],
    ["numa", "admit", "-f", "{pods}", "--machine", "lab-two-node", "--config", "{binary}"],
    ["kube-proxy", "render", "-f", "{binary}"], ["mounts", "play", "-f", "{directory}"],
])
def test_bad_command_line_input_is_one_clear_line_with_exit_2(args, tmp_path):
    files = {"garbage": "key: [unclosed\n  - {x", "binary": b"\xff\xfe\x00\x80", "empty": "", "directory": None,
             "pods": (REPO / "labs" / "numa" / "scenarios" / "qos-pods.yaml").read_text()}
    for name, content in files.items():
        path = tmp_path / name
        if content is None:
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    argv = [a.format(**{n: str(tmp_path / n) for n in files}) for a in args]
    state = Path(os.environ["LABKIT_STATE_DIR"])
    before = sorted(state.rglob("*")) if state.exists() else []
    result = labkit_in_process(*argv)
    assert result.returncode == 2, (argv, result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(("labkit: ", "Usage:", "Error:")) or "Invalid value" in lines[0], result.stderr
    mentioned = [a for a in argv if a.startswith(str(tmp_path))]
    if mentioned and lines[0].startswith("labkit: "):
        assert HOSTILE in lines[0] or any(m in lines[0] for m in mentioned), result.stderr
    assert not Path("/tmp/labkit-pwned").exists()
    after = sorted(state.rglob("*")) if state.exists() else []
    assert [p for p in after if p not in before and p.is_file() and p.name != "lock"] == [], "partial state left behind"


@pytest.mark.parametrize("args", [["check", HOSTILE], ["numa", "merge", "-f", "/"], ["show"], ["list", "--nosuch"]])
def test_in_process_runs_answer_as_the_labkit_process_does(args):
    """The tests above run labkit.cli.main in the test's process (support.labkit_in_process): for
    a refusal, a usage error and a success, it answers exactly as `python -m labkit` does."""
    process, in_process = labkit(*args), labkit_in_process(*args)
    assert (in_process.returncode, in_process.stdout, in_process.stderr) == \
        (process.returncode, process.stdout, process.stderr)


@pytest.mark.host_free     # reads source files
def test_no_shell_is_ever_asked_to_run_a_command():
    offenders = []
    for path in [*(REPO / "labkit").rglob("*.py"), *(REPO / "labs").rglob("*.py")]:
        text = path.read_text()
        for needle in ("shell=True", "os.system(", "os.popen(", "commands.getoutput"):
            if needle in text:
                offenders.append(f"{path.relative_to(REPO)}: {needle}")
    assert offenders == []


# Commands that only read (or refuse): random arguments must never produce a traceback.
SAFE_COMMANDS = [["show"], ["hint"], ["check"], ["solve"], ["cleanup"], ["list"], ["numa", "merge"],
                 ["numa", "admit"], ["kube-proxy", "render"], ["mounts", "get"], ["trace"]]
ARGUMENT = st.one_of(st.sampled_from(["numa", "kube-proxy", "mount-propagation", "qos", "--format", "json",
                                      "-f", "--machine", "--config", "--all", "--json", "-o", "/", "/dev/null",
                                      "..", "../..", "", "-", "--", "x; touch /tmp/labkit-pwned", "$(id)", "`id`",
                                      "lab-two-node", "--output"]),
                     st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                             max_size=12))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(command=st.sampled_from(SAFE_COMMANDS), args=st.lists(ARGUMENT, max_size=4))
def test_random_arguments_never_crash(command, args):
    result = labkit_in_process(*command, *args)
    assert result.returncode in (0, 1, 2), (command, args, result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout, (command, args, result.stderr)
    if result.returncode == 2 and result.stderr.startswith("labkit: "):
        assert len(result.stderr.strip().splitlines()) == 1, (command, args, result.stderr)
    assert not Path("/tmp/labkit-pwned").exists()
