"""Class inventories: YAML, CSV and `vagrant ssh-config` output as is; bad ones are one clear line
(exit 2) naming the file and the field. And the remote command line is always quoted."""

import shlex

import pytest

from labkit.classroom import inventory, remote
from labkit.errors import ConfigError
from support import labkit

# what `vagrant ssh-config` prints for two VMs (keys replaced by the test's files)
VAGRANT = """\
Host student-01
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile {key1}
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa

Host student-02
  HostName 127.0.0.1
  User vagrant
  Port 2200
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile "{key2}"
  IdentitiesOnly yes
  LogLevel FATAL
"""


@pytest.fixture
def keys(tmp_path):
    (tmp_path / "keys").mkdir()
    k1, k2 = tmp_path / "keys" / "private_key", tmp_path / "keys" / "private key 2"
    k1.write_text("key\n")
    k2.write_text("key\n")
    return k1, k2


def test_vagrant_ssh_config_is_read_as_is(tmp_path, keys):
    path = tmp_path / "inventory"
    path.write_text(VAGRANT.format(key1=keys[0], key2=keys[1]))
    one, two = inventory.load(path)
    assert (one.name, one.host, one.port, one.user, one.key) == ("student-01", "127.0.0.1", 2222, "vagrant", str(keys[0]))
    assert one.options == (("PubkeyAcceptedKeyTypes", "+ssh-rsa"), ("HostKeyAlgorithms", "+ssh-rsa"))
    assert (two.name, two.port, two.key, two.options) == ("student-02", 2200, str(keys[1]), ())
    argv = remote.ssh_argv(one, "demo", remote.Settings(known_hosts=tmp_path / "known_hosts"))
    assert "StrictHostKeyChecking=accept-new" in argv and f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in argv
    assert "PubkeyAcceptedKeyTypes=+ssh-rsa" in argv and "BatchMode=yes" in argv
    assert argv[-3:] == ["--", "127.0.0.1", "sudo -n -- labkit check demo --format json"]


def test_yaml_with_defaults_and_csv(tmp_path, keys):
    (tmp_path / "class.yaml").write_text(
        "defaults: {user: root, key: keys/private_key}\n"
        "machines:\n  - {name: alice, host: 10.0.0.11}\n  - {name: bob, host: vm-bob.example, port: 2222, user: admin}\n")
    alice, bob = inventory.load(tmp_path / "class.yaml")
    assert (alice.host, alice.port, alice.user, alice.key) == ("10.0.0.11", 22, "root", str(keys[0]))
    assert (bob.host, bob.port, bob.user) == ("vm-bob.example", 2222, "admin")
    (tmp_path / "class.csv").write_text("# name,host\nname,host,port\nalice,10.0.0.11,22\nbob,10.0.0.12,\n")
    assert [(m.name, m.port, m.key) for m in inventory.load(tmp_path / "class.csv")] == [("alice", 22, None), ("bob", 22, None)]


BAD = [
    ("class.yaml", "machines:\n  - {name: alice, host: h, port: http}\n", "machines[0].port: expected a number 1-65535, got 'http'"),
    ("class.yaml", "machines:\n  - {name: alice, host: h, port: 70000}\n", "machines[0].port: expected a number 1-65535, got 70000"),
    ("class.yaml", "machines:\n  - {name: alice}\n", "machines[0].host: missing"),
    ("class.yaml", "machines:\n  - {name: ../etc, host: h}\n", "machines[0].name: '../etc': expected"),
    ("class.yaml", "machines:\n  - {name: report.html, host: h}\n", "machines[0].name: 'report.html': expected"),
    ("class.yaml", "machines:\n  - {name: a, host: -oProxyCommand=sh}\n", "machines[0].host: '-oProxyCommand=sh' is not a host name"),
    ("class.yaml", "machines:\n  - {name: a, host: h, user: '-lroot'}\n", "machines[0].user: '-lroot' is not a user name"),
    ("class.yaml", "machines:\n  - {name: a, host: h, key: nope}\n", "machines[0].key: "),
    ("class.yaml", "machines:\n  - {name: a, host: h, pasword: x}\n", "machines[0].pasword: unknown field"),
    ("class.yaml", "machines:\n  - {name: a, host: h}\n  - {name: a, host: g}\n", "machines[1].name: 'a' is listed twice"),
    ("class.yaml", "machines: [\n", "line 2: not valid YAML"),
    ("class.yaml", "machines: []\n", "lists no machines"),
    ("class.yaml", "students: []\n", "students: unknown key"),
    ("class.yaml", "defaults: {prot: 22}\nmachines: [{name: a, host: h}]\n", "defaults.prot: unknown field"),
    ("class.csv", "name,host\nalice\n", "line 2: expected 2 columns (name, host), got 1"),
    ("class.csv", "name,address\nalice,h\n", "header.address: unknown column"),
    ("inventory", "Host *\n  User root\n", "line 1: Host: '*': patterns are not supported"),
    ("inventory", "Host alice\n  HostName h\n  Port x\n", "Host alice: port: expected a number 1-65535, got 'x'"),
    ("inventory", "Host alice\n  HostKeyAlgorithms +ssh-rsa;id\n", "Host alice: HostKeyAlgorithms: unexpected value"),
]


@pytest.mark.parametrize("filename,text,message", BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_inventories_are_one_line_naming_file_and_field(tmp_path, filename, text, message):
    path = tmp_path / filename
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        inventory.load(path)
    assert str(caught.value).startswith(f"{path}: "), str(caught.value)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_cli_reports_a_bad_inventory_with_exit_2(tmp_path):
    path = tmp_path / "class.csv"
    path.write_text("name,host,port\nalice,10.0.0.11,ssh\n")
    result = labkit("class", "grade", "--inventory", str(path), "--labs", "demo", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr == f"labkit: {path}: line 2: port: expected a number 1-65535, got 'ssh'\n"
    missing = labkit("class", "grade", "--inventory", str(tmp_path / "nope.yaml"), "--labs", "demo")
    assert (missing.returncode, missing.stderr) == (2, f"labkit: {tmp_path / 'nope.yaml'}: no such file\n")
    (tmp_path / "ok.yaml").write_text("- {name: a, host: h}\n")
    unknown = labkit("class", "grade", "--inventory", str(tmp_path / "ok.yaml"), "--labs", "no-such-lab")
    assert unknown.returncode == 2 and "no-such-lab" in unknown.stderr and "Traceback" not in unknown.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("lab,command", [
    ("demo; touch /tmp/x", "labkit"),
    ("$(reboot)", "/opt/my labkit/bin/labkit"),
    ("a'b\"c`d`", "labkit && id"),
])
def test_the_remote_command_line_is_quoted(tmp_path, lab, command):
    settings = remote.Settings(known_hosts=tmp_path / "kh", labkit=command)
    for user, prefix in (("root", []), ("vagrant", ["sudo", "-n", "--"])):
        machine = inventory.Machine("a", "h", user=user)
        assert shlex.split(remote.remote_command(machine, lab, settings)) == \
            prefix + [command, "check", lab, "--format", "json"]
