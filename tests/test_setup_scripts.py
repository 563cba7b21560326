"""The two README commands, .ci/run, idempotent setup, and the workshop Vagrantfile."""

import json
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


def vagrant_validate(tmp_path, env: dict, box: bool = False) -> subprocess.CompletedProcess:
    """`vagrant validate` of the Vagrantfile, with (box=True) or without an offline workshop box."""
    vagrant = shutil.which("vagrant")
    assert vagrant, "vagrant is installed by scripts/setup test"
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    box_dir = tmp_path / "box"
    box_dir.mkdir(exist_ok=True)
    if box:     # what scripts/build-box writes beside the box
        (box_dir / "labkit-workshop.json").write_text(json.dumps({"name": "labkit-workshop", "versions": [
            {"version": "20250101.120000", "providers": [{"name": "libvirt", "url": f"file://{box_dir}/x.box"}]}]}))
    # Test machines have no hypervisor, and plain `vagrant validate` refuses to run without a usable
    # provider; --ignore-provider validates everything but the provider blocks (CPUs, memory).
    return subprocess.run([vagrant, "validate", "--ignore-provider"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env, "VAGRANT_HOME": str(tmp_path / ".vagrant.d"),
                                            "LABKIT_BOX_DIR": str(box_dir)})


@pytest.mark.parametrize("box", [False, True], ids=["network", "offline-box"])
@pytest.mark.parametrize("env", [{}, {"LABKIT_STUDENTS": "3", "LABKIT_NO_SOLUTIONS": "1", "LABKIT_VM_CPUS": "2",
                                      "LABKIT_VM_DRIVER": "qemu"}])
def test_vagrantfile_validates(tmp_path, env, box):
    out = vagrant_validate(tmp_path, env, box)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validated successfully" in out.stdout
    machines = re.findall(r"^==> (student-\d+):", out.stdout, re.M)
    assert machines == [f"student-{i:02d}" for i in range(1, int(env.get("LABKIT_STUDENTS", "1")) + 1)]


@pytest.mark.parametrize("env, message", [
    ({"LABKIT_STUDENTS": "0"}, "LABKIT_STUDENTS must be between 1 and 500"),
    ({"LABKIT_VM_CPUS": "1"}, "LABKIT_VM_CPUS must be at least 2: the numa lab pins CPUs"),
    ({"LABKIT_VM_DRIVER": "xen"}, "LABKIT_VM_DRIVER must be kvm or qemu"),
    ({"LABKIT_BOX": "labkit-workshop"}, "build the workshop box with `sudo scripts/build-box`"),
])
def test_vagrantfile_rejects_bad_settings(tmp_path, env, message):
    out = vagrant_validate(tmp_path, env)
    assert out.returncode != 0 and message in out.stdout + out.stderr


def test_vagrant_provisioning_uses_the_setup_script():
    text = (REPO / "Vagrantfile").read_text()
    assert "/opt/labkit/scripts/setup lab" in text
    assert '"labs/*/solutions/"' in text


def setup_packages(mode: str) -> set[str]:
    """The apt packages scripts/setup adds for `mode` (its `packages+=(...)` under that mode)."""
    text = (REPO / "scripts" / "setup").read_text()
    block = re.search(rf'if \[ "\$mode" = {mode} \]; then\n\s*packages\+=\((.*?)\)\nfi', text, re.S)
    assert block, f"scripts/setup has no package list for {mode}"
    return set(block.group(1).split())


def test_setup_workshop_installs_what_the_booted_proofs_run():
    """deploy/prove-cloud boots student-02 by UEFI with Debian's OVMF (without it, by BIOS like
    student-01: the UEFI path would go unproven), QEMU and qemu-img; scripts/build-box needs
    mmdebstrap; scripts/test-workshop vagrant-libvirt. scripts/setup workshop installs them all."""
    prove_cloud = (REPO / "deploy" / "prove-cloud").read_text()
    # the firmware files prove-cloud looks for are those of Debian's ovmf package
    assert 'Path("/usr/share/OVMF/OVMF_CODE.fd"), Path("/usr/share/OVMF/OVMF_VARS.fd")' in prove_cloud
    assert {"ovmf", "qemu-system-x86", "qemu-utils", "mmdebstrap", "vagrant", "vagrant-libvirt",
            "libvirt-daemon-system"} <= setup_packages("workshop")
