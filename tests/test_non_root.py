"""labkit run by a user who is not root: commands that touch the labs run again through sudo (or
say in one line that root is needed), `labkit doctor` marks what only root can probe as not
probed instead of failing it with fixes that do not apply, and state labkit cannot read is said
to be unreadable, not shown as "not started"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from support import REPO

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def open_dir():
    """A directory any user can enter (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="labkit-nonroot-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def as_nobody(*args, env_extra=None, path_first=None):
    env = {k: v for k, v in os.environ.items() if k.startswith("LABKIT_")}
    env.update({"HOME": "/tmp", "PATH": (f"{path_first}:" if path_first else "") + "/usr/sbin:/usr/bin:/sbin:/bin"})
    env.update(env_extra or {})
    return subprocess.run([*NOBODY, sys.executable, "-m", "labkit", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, stdin=subprocess.DEVNULL, timeout=60)


def test_a_lab_command_without_root_or_sudo_says_so_in_one_line():
    out = as_nobody("run", "kube-proxy", env_extra={"LABKIT_NO_SUDO": "1"})
    assert out.returncode == 2
    assert out.stderr == "labkit: `labkit run` needs root: run it as root or with sudo\n"
    assert as_nobody("list", env_extra={"LABKIT_NO_SUDO": "1"}).stderr.startswith("labkit: `labkit list` needs root")


@pytest.fixture
def exec_dir():
    """A directory any user can enter and run programs from. Not under /tmp, which may be mounted
    noexec (then the fake sudo would not be found and labkit would rightly say root is needed):
    under the repository's virtual environment, whose programs this suite runs."""
    path = Path(tempfile.mkdtemp(prefix="nonroot-", dir=Path(sys.prefix)))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_lab_command_runs_again_through_sudo_with_the_labkit_variables(exec_dir):
    fake = exec_dir / "bin"
    fake.mkdir()
    fake.chmod(0o755)       # whatever the umask
    (fake / "sudo").write_text('#!/bin/sh\n[ "$1" = "-n" ] && exit 0\necho "sudo $*"\n')
    (fake / "sudo").chmod(0o755)
    probe = subprocess.run([*NOBODY, str(fake / "sudo"), "-n"], capture_output=True, text=True)
    assert probe.returncode == 0, f"the fake sudo cannot run as nobody from {fake}: {probe.stderr}"
    out = as_nobody("check", "demo", "-o", "json", path_first=fake)
    assert out.returncode == 0, out.stderr
    keep = sorted(k for k in os.environ if k.startswith("LABKIT_"))
    assert out.stdout == f"sudo --preserve-env={','.join(keep)} {sys.executable} -m labkit check demo -o json\n"


def test_commands_that_need_no_root_run_as_they_are():
    assert as_nobody("--version").returncode == 0
    assert as_nobody("show", "demo", "1").stdout.startswith("# Find host b's address")
    assert "Usage" in as_nobody("run", "--help").stdout


def test_doctor_without_root_says_what_it_did_not_probe():
    out = as_nobody("doctor")
    assert out.returncode == 2          # not root is a failure of its own
    assert "FAIL root: running as uid 65534" in out.stdout
    for name in ("netns", "veth", "bridge", "iptables-legacy", "iptables-extensions", "br_netfilter", "nfacct"):
        assert f"--   {name}: not probed (needs root)" in out.stdout, out.stdout
    assert "modprobe" not in out.stdout and "CONFIG_" not in out.stdout and "Linux 5.3" not in out.stdout


def test_state_labkit_cannot_read_is_not_shown_as_not_started(open_dir):
    from labkit.state import LabState

    state = LabState("demo", root=open_dir)
    state.ensure_dir()
    state.set_status(phase="up")
    state.dir.chmod(0o755)          # the directory can be entered, its status file cannot be read
    code = ("from pathlib import Path\nfrom labkit.state import LabState\nfrom labkit.errors import LabkitError\n"
            f"try: print(LabState('demo', root=Path({str(open_dir)!r})).phase)\n"
            "except LabkitError as e: print('error:', e)\n")
    out = subprocess.run([*NOBODY, sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.stdout.startswith("error: cannot read labkit's state "), out.stdout + out.stderr
    assert "permission denied (labkit keeps it as root: run labkit with sudo)" in out.stdout
