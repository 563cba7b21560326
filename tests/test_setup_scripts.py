"""The two README commands, .ci/run, idempotent setup, and the workshop Vagrantfile."""

import os
import re
import shutil
import subprocess
import time

import pytest

from support import REPO


def readme_commands():
    text = (REPO / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.strip().splitlines()]


def test_readme_opens_with_exactly_two_commands():
    text = (REPO / "README.md").read_text()
    assert text.index("```sh") < 20, "the commands must come first"
    commands = readme_commands()
    assert len(commands) == 2
    assert commands[0].startswith("./scripts/labkit ")
    assert commands[1] == "./scripts/test"


def test_ci_runs_exactly_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert os.access(REPO / ".ci" / "run", os.X_OK)
    assert re.search(r"^exec \./scripts/test$", ci, re.M)
    assert "set -e" in ci


def test_setup_rerun_is_fast_and_changes_nothing():
    stamp = REPO / ".venv" / ".labkit-stamp"
    before = (stamp.read_text(), stamp.stat().st_mtime_ns, (REPO / ".venv" / "bin" / "python").stat().st_mtime_ns)
    start = time.monotonic()
    out = subprocess.run([str(REPO / "scripts" / "setup"), "test"], capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == "", "a re-run must have nothing to do"
    after = (stamp.read_text(), stamp.stat().st_mtime_ns, (REPO / ".venv" / "bin" / "python").stat().st_mtime_ns)
    assert before == after
    print(f"setup re-run took {elapsed:.2f}s")


def test_scripts_pass_arguments_through():
    # scripts/labkit runs setup (a no-op here) and then the real CLI
    out = subprocess.run([str(REPO / "scripts" / "labkit"), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("labkit ")


@pytest.mark.parametrize("env", [{}, {"LABKIT_STUDENTS": "3", "LABKIT_NO_SOLUTIONS": "1", "LABKIT_VM_CPUS": "2"}])
def test_vagrantfile_validates(tmp_path, env):
    vagrant = shutil.which("vagrant")
    assert vagrant, "vagrant is installed by scripts/setup test"
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    # Test machines have no hypervisor, and plain `vagrant validate` refuses to run without a usable
    # provider; --ignore-provider validates everything but the provider blocks (CPUs, memory).
    out = subprocess.run([vagrant, "validate", "--ignore-provider"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, **env, "VAGRANT_HOME": str(tmp_path / ".vagrant.d")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validated successfully" in out.stdout
    machines = re.findall(r"^==> (student-\d+):", out.stdout, re.M)
    assert machines == [f"student-{i:02d}" for i in range(1, int(env.get("LABKIT_STUDENTS", "1")) + 1)]


def test_vagrantfile_rejects_a_bad_student_count(tmp_path):
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    out = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "LABKIT_STUDENTS": "0", "VAGRANT_HOME": str(tmp_path / ".vagrant.d")})
    assert out.returncode != 0 and "LABKIT_STUDENTS must be between 1 and 500" in out.stdout + out.stderr


def test_vagrant_provisioning_uses_the_setup_script():
    text = (REPO / "Vagrantfile").read_text()
    assert "/opt/labkit/scripts/setup lab" in text
    assert '"labs/*/solutions/"' in text
