"""`labkit class prepare LAB` and `labkit class status` over real SSH, on fake class machines
(tests/class_machines.py):
  ann   labkit as here
  ben   a labkit that says it is another version (a machine left behind at an upgrade)
  cal   unreachable: nothing listens on its port
  dee   broken for the demo lab: its labkit knows no lab of that name
"""

import os
import sys
from pathlib import Path

import pytest

from class_machines import FakeMachine, free_port, keygen
from conftest import fresh_environment
from labkit import __version__
from support import host_lock, labkit

LABKIT = Path(sys.executable).parent / "labkit"


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    base = tmp_path_factory.mktemp("ops")
    key = keygen(base / "client_key")
    (base / "no-labs").mkdir()
    machines = {}
    with host_lock(False):
        try:
            for name in ("ann", "ben", "dee"):
                env = {**os.environ, **fresh_environment(base / name)}
                bin_dir = base / f"{name}-bin"
                bin_dir.mkdir()
                if name == "ben":
                    (bin_dir / "labkit").write_text(
                        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "labkit 0.0.9"; exit 0; }}\nexec {LABKIT} "$@"\n')
                    (bin_dir / "labkit").chmod(0o755)
                else:
                    (bin_dir / "labkit").symlink_to(LABKIT)
                env["PATH"] = f"{bin_dir}:{env['PATH']}"
                if name == "dee":
                    env["LABKIT_LABS_PATH"] = str(base / "no-labs")
                machines[name] = FakeMachine(name, base / f"{name}-sshd", env)
                machines[name].start(key)
            inventory = base / "class.csv"
            inventory.write_text("name,host,port,key\n" + "".join(
                f"{n},127.0.0.1,{machines[n].port if n in machines else free_port()},{key}\n"
                for n in ("ann", "ben", "cal", "dee")))
            yield base, inventory, machines, {**os.environ, **fresh_environment(base / "instructor")}
        finally:
            for m in machines.values():
                try:
                    labkit("cleanup", "--all", env=m.env, check=0)
                finally:
                    m.stop()


def run(klass, *args):
    base, inventory, _machines, env = klass
    return labkit("class", *args, "--inventory", str(inventory), "--out", str(base / "out"), "--retries", "0",
                  "--connect-timeout", "5", env=env, timeout=600)


def test_status_prepare_status(klass):
    before = run(klass, "status", "--labs", "demo")
    assert before.returncode == 1, before.stderr             # cal does not answer
    lines = before.stdout.splitlines()
    assert lines[0] == f"ann: labkit {__version__}; demo: not running"
    assert lines[1] == f"ben: labkit 0.0.9 (WARNING: the instructor's labkit is {__version__}); demo: not running"
    assert lines[2].startswith("cal: unreachable: ssh: ") and "Connection refused" in lines[2]
    assert lines[3].startswith(f"dee: labkit {__version__}; demo: broken: labkit check exited 2")
    assert f"3 of 4 machines answered; labkit version differs from {__version__} on: ben; demo running on 0" in before.stderr
    assert "[4/4]" in before.stderr and "Traceback" not in before.stderr

    prepared = run(klass, "prepare", "demo")
    assert prepared.returncode == 1, prepared.stderr
    err = prepared.stderr
    assert "starting demo on 4 machines" in err
    assert "ann: up" in err and "ben: up" in err and "cal: unreachable" in err
    assert "dee: broken: labkit run exited 2" in err and "no lab named 'demo'" in err
    assert "demo is up on 2 of 4 machines; not on: cal, dee" in err

    after = run(klass, "status", "--labs", "demo")
    lines = after.stdout.splitlines()
    assert lines[0] == f"ann: labkit {__version__}; demo: running, 0 of 3 passing now"
    assert lines[1].endswith("demo: running, 0 of 3 passing now")
    assert "demo running on 2" in after.stderr

    # a lab that is up stays up (labkit run is idempotent); a solved exercise shows in the status
    labkit("solve", "demo", "find-address", env=klass[2]["ann"].env, check=0)
    again = run(klass, "prepare", "demo")
    assert "demo is up on 2 of 4 machines" in again.stderr, again.stderr
    assert run(klass, "status", "--labs", "demo").stdout.splitlines()[0].endswith("demo: running, 1 of 3 passing now")


def test_a_bad_lab_or_inventory_is_a_usage_error(klass, tmp_path):
    base, inventory, _machines, env = klass
    unknown = labkit("class", "prepare", "no-such-lab", "--inventory", str(inventory), env=env)
    assert unknown.returncode == 2 and "no-such-lab" in unknown.stderr and "Traceback" not in unknown.stderr
    missing = labkit("class", "status", "--inventory", str(tmp_path / "nope.csv"), env=env)
    assert (missing.returncode, missing.stderr) == (2, f"labkit: {tmp_path / 'nope.csv'}: no such file\n")
