"""Students' access to their machines: per-student credentials (`labkit class credentials`), real
SSH logins with them, and the Vagrantfile that puts them on the VMs (forwarded SSH ports, bridged
network, several libvirt hosts)."""

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from class_machines import FakeMachine
from conftest import fresh_environment
from support import REPO, labkit


def roster(out):
    with open(out / "roster.csv", newline="") as f:
        return list(csv.DictReader(f))



@pytest.mark.parametrize("password", ["Hello world!", "x", "a" * 63, "b" * 64, "c" * 65, "pässwörd " * 20])
def test_sudo_password_hash_is_sha512_crypt(password):
    """The in-process $6$ hash equals what `openssl passwd -6` makes of the same password and
    salt, at the lengths the algorithm treats apart (below, at and above 64 bytes; openssl reads
    at most 256 characters and no empty password)."""
    from labkit.classroom.credentials import crypt_sha512, sha512_crypt
    # the test vector of the SHA-crypt specification
    assert sha512_crypt(b"Hello world!", b"saltstring") == ("$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3u"
                                                          "BnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1")
    digest = crypt_sha512(password)
    salt = digest.split("$")[2]
    assert re.fullmatch(r"[./0-9A-Za-z]{16}", salt)
    again = subprocess.run(["openssl", "passwd", "-6", "-salt", salt, "-stdin"], input=password + "\n",
                           capture_output=True, text=True, check=True).stdout.strip()
    assert digest == again

def test_credentials_are_a_key_pair_and_a_password_per_student(tmp_path):
    out = tmp_path / "creds"
    run = labkit("class", "credentials", "--students", "3", "--out", str(out), "--host", "192.0.2.5")
    assert run.returncode == 0, run.stderr
    rows = roster(out)
    assert [r["student"] for r in rows] == [r["machine"] for r in rows] == ["student-01", "student-02", "student-03"]
    assert [(r["host"], r["port"], r["user"]) for r in rows] == [("192.0.2.5", str(22000 + i), "student") for i in (1, 2, 3)]
    assert stat.S_IMODE((out / "roster.csv").stat().st_mode) == 0o600
    machines = json.loads((out / "credentials.json").read_text())
    publics, passwords = set(), set()
    for r in rows:
        key = Path(r["key"])
        assert key == out.resolve() / "keys" / r["student"] and stat.S_IMODE(key.stat().st_mode) == 0o600
        # OpenSSH reads the private key and derives the very public key of the roster and the .pub file
        derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], capture_output=True, text=True, check=True).stdout
        assert derived.split()[:2] == r["public_key"].split()[:2] == (key.parent / f"{key.name}.pub").read_text().split()[:2]
        assert r["public_key"].startswith("ssh-ed25519 ") and r["public_key"].endswith(f" {r['student']}@labkit")
        # the machine gets the hash of the student's password (SHA-512 crypt), never the password
        entry = machines[r["machine"]]
        assert (entry["user"], entry["public_key"]) == ("student", r["public_key"])
        salt = entry["password_hash"].split("$")[2]
        again = subprocess.run(["openssl", "passwd", "-6", "-salt", salt, "-stdin"], input=r["sudo_password"] + "\n",
                               capture_output=True, text=True, check=True).stdout.strip()
        assert again == entry["password_hash"] and r["sudo_password"] not in json.dumps(machines)
        assert re.fullmatch(r"[A-Za-z0-9]{16}", r["sudo_password"])
        host_vars = (out / "host_vars" / f"{r['machine']}.yml").read_text()
        assert f'labkit_student_key: "{key}.pub"' in host_vars and entry["password_hash"] in host_vars
        publics.add(r["public_key"].split()[1])
        passwords.add(r["sudo_password"])
    assert len(publics) == 3 and len(passwords) == 3          # nothing shared between students

    before = (out / "roster.csv").read_bytes()
    again = labkit("class", "credentials", "--students", "3", "--out", str(out))
    assert again.returncode == 2 and "never overwritten" in again.stderr
    assert (out / "roster.csv").read_bytes() == before
    bad = labkit("class", "credentials", "--students", "2", "--out", str(tmp_path / "x"), "--user", "root")
    assert bad.returncode == 2 and "--user" in bad.stderr and not (tmp_path / "x").exists()


def test_the_roster_names_the_students(tmp_path):
    names = tmp_path / "names.txt"
    names.write_text("Ada Lovelace\n\n# late enrolment below\n=HYPERLINK(1)\nGrace Hopper\n")
    run = labkit("class", "credentials", "--names", str(names), "--out", str(tmp_path / "creds"))
    assert run.returncode == 0, run.stderr
    rows = roster(tmp_path / "creds")
    assert [(r["student"], r["machine"]) for r in rows] == [
        ("Ada Lovelace", "student-01"), ("'=HYPERLINK(1)", "student-02"), ("Grace Hopper", "student-03")]
    assert sorted(json.loads((tmp_path / "creds" / "credentials.json").read_text())) == ["student-01", "student-02", "student-03"]
    mismatch = labkit("class", "credentials", "--names", str(names), "--students", "2", "--out", str(tmp_path / "x"))
    assert (mismatch.returncode, mismatch.stderr) == (2, "labkit: --names: 3 names for 2 students\n")
    names.write_text("Ada\nAda\n")
    twice = labkit("class", "credentials", "--names", str(names), "--out", str(tmp_path / "y"))
    assert twice.returncode == 2 and "'Ada' is listed twice" in twice.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_each_students_key_opens_their_machine_only(tmp_path):
    """A real sshd that lets student-01's key in: her key logs in, student-02's is refused."""
    out = tmp_path / "creds"
    labkit("class", "credentials", "--students", "2", "--out", str(out), check=0)
    mine, theirs = out / "keys" / "student-01", out / "keys" / "student-02"
    machine = FakeMachine("student-01", tmp_path / "sshd", {**os.environ, **fresh_environment(tmp_path / "m")})
    machine.start(mine)
    try:
        def login(key):
            return subprocess.run(["ssh", "-T", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                                   "-o", f"UserKnownHostsFile={tmp_path / 'kh'}", "-o", "IdentitiesOnly=yes",
                                   "-i", str(key), "-p", str(machine.port), "root@127.0.0.1", "echo in"],
                                  capture_output=True, text=True, timeout=60)
        ok = login(mine)
        assert (ok.returncode, ok.stdout) == (0, "in\n"), ok.stderr
        refused = login(theirs)
        assert refused.returncode == 255 and "Permission denied" in refused.stderr
    finally:
        machine.stop()


# -- the Vagrantfile ---------------------------------------------------------------------------

# A stand-in for Vagrant that loads the Vagrantfile and prints, per VM, its networks and
# provisioners, and the libvirt provider's settings (vagrant validate says only "valid").
RUBY = r'''
require "json"
$vms = {}
$provider = {}
$synced = []
class Recorder
  def initialize(into) @into = into end
  def method_missing(name, *args, **kw, &blk)
    case name
    when :define then vm = {"networks" => [], "provisions" => []}; $vms[args[0]] = vm; blk.call(Recorder.new(vm))
    when :provider then blk.call(Recorder.new($provider)) if args[0] == "libvirt"
    when :network then @into["networks"] << [args[0], kw]
    when :synced_folder then $synced << [args[1], kw]
    when :provision then @into["provisions"] << kw.merge("type" => args[0])
    when :vm then Recorder.new(@into)
    else
      @into[name.to_s.chomp("=")] = args[0] if name.to_s.end_with?("=") && @into.equal?($provider)
      Recorder.new(@into)
    end
  end
  def respond_to_missing?(*) true end
end
module Vagrant
  def self.configure(_version) yield Recorder.new({}) end
end
load ARGV[0]
puts JSON.generate({"vms" => $vms, "libvirt" => $provider, "synced" => $synced})
'''


def vagrantfile(tmp_path, env):
    (tmp_path / "load.rb").write_text(RUBY)
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    run = subprocess.run(["ruby", str(tmp_path / "load.rb"), str(tmp_path / "Vagrantfile")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LABKIT_BOX_DIR": str(tmp_path / "no-box"), **env})
    return run


def test_the_vagrantfile_gives_each_student_their_account_and_port(tmp_path):
    out = tmp_path / "creds"
    labkit("class", "credentials", "--students", "4", "--out", str(out), check=0)
    run = vagrantfile(tmp_path, {"LABKIT_CREDENTIALS": str(out), "LABKIT_FIRST_STUDENT": "3", "LABKIT_STUDENTS": "2"})
    assert run.returncode == 0, run.stderr
    vms = json.loads(run.stdout)["vms"]
    assert list(vms) == ["student-03", "student-04"]
    creds = json.loads((out / "credentials.json").read_text())
    for name, vm in vms.items():
        number = int(name[-2:])
        assert vm["networks"] == [["forwarded_port", {"id": "student-ssh", "guest": 22, "host": 22000 + number,
                                                      "host_ip": "0.0.0.0"}]]
        names = [p["name"] for p in vm["provisions"]]
        assert names == ["labkit", "access", "student"]
        access = vm["provisions"][1]["inline"]
        assert "usermod -p '*' vagrant" in access and "PasswordAuthentication no" in access
        assert "NOPASSWD" not in vm["provisions"][2]["inline"]
        # the shell sees the student's values exactly ($ signs of the hash included)
        first_line = vm["provisions"][2]["inline"].splitlines()[0]
        echoed = subprocess.run(["bash", "-c", first_line + '\nprintf "%s\\n" "$1" "$2" "$3"'],
                                capture_output=True, text=True, check=True).stdout.splitlines()
        assert echoed == [creds[name]["user"], creds[name]["public_key"], creds[name]["password_hash"]]


def test_the_vagrantfile_bridges_keeps_passwords_and_spans_libvirt_hosts(tmp_path):
    run = vagrantfile(tmp_path, {"LABKIT_BRIDGE": "eno1", "LABKIT_SSH_PORT_BASE": "0", "LABKIT_PASSWORD_LOGIN": "1",
                                 "LABKIT_LIBVIRT_HOST": "hv2.example", "LABKIT_LIBVIRT_USER": "virt",
                                 "LABKIT_LIBVIRT_KEY": "/keys/hv2", "LABKIT_LIBVIRT_POOL": "fast"})
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    vm = result["vms"]["student-01"]
    assert vm["networks"] == [["public_network", {"dev": "eno1", "mode": "bridge", "type": "direct", "bridge": "eno1"}]]
    assert [p["name"] for p in vm["provisions"]] == ["labkit", "access"]       # no credentials: no student account
    assert "PasswordAuthentication yes" in vm["provisions"][1]["inline"]
    libvirt = result["libvirt"]
    assert (libvirt["host"], libvirt["connect_via_ssh"], libvirt["username"], libvirt["id_ssh_key_file"],
            libvirt["storage_pool_name"]) == ("hv2.example", True, "virt", "/keys/hv2", "fast")
    uri = vagrantfile(tmp_path, {"LABKIT_LIBVIRT_URI": "qemu+ssh://a@hv3/system"})
    assert json.loads(uri.stdout)["libvirt"]["uri"] == "qemu+ssh://a@hv3/system"
    assert "host" not in json.loads(uri.stdout)["libvirt"]


@pytest.mark.parametrize("env, message", [
    ({"LABKIT_CREDENTIALS": "/nonexistent"}, "/nonexistent/credentials.json not found"),
    ({"LABKIT_FIRST_STUDENT": "0"}, "LABKIT_FIRST_STUDENT must be between 1 and 500"),
    ({"LABKIT_FIRST_STUDENT": "500", "LABKIT_STUDENTS": "2"}, "must be at most 500"),
    ({"LABKIT_SSH_PORT_BASE": "80"}, "LABKIT_SSH_PORT_BASE must be 0 (none) or between 1024 and 65000"),
])
def test_the_vagrantfile_rejects_bad_access_settings(tmp_path, env, message):
    run = vagrantfile(tmp_path, env)
    assert run.returncode != 0 and message in run.stderr, run.stderr


def test_credentials_inside_the_checkout_are_not_synced_to_the_vms(tmp_path):
    """Without the box, the checkout is rsynced to each VM: never the credentials kept in it."""
    copy = tmp_path / "checkout"
    copy.mkdir()
    labkit("class", "credentials", "--students", "1", "--out", str(copy / "creds"), check=0)
    (copy / "load.rb").write_text(RUBY)
    shutil.copy(REPO / "Vagrantfile", copy / "Vagrantfile")
    run = subprocess.run(["ruby", "load.rb", "Vagrantfile"], cwd=copy, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "LABKIT_BOX_DIR": str(tmp_path / "no-box"), "LABKIT_CREDENTIALS": "creds"})
    assert run.returncode == 0, run.stderr
    synced = [kw for path, kw in json.loads(run.stdout)["synced"] if path == "/opt/labkit"]
    assert len(synced) == 1 and "/creds/" in synced[0]["rsync__exclude"] and ".git/" in synced[0]["rsync__exclude"]
    other = tmp_path / "other"                  # another checkout, with the credentials outside it
    other.mkdir()
    outside = vagrantfile(other, {"LABKIT_CREDENTIALS": str(copy / "creds")})
    excludes = [kw for path, kw in json.loads(outside.stdout)["synced"] if path == "/opt/labkit"][0]["rsync__exclude"]
    assert not [e for e in excludes if "creds" in e]


def test_credentials_for_too_few_students_are_refused(tmp_path):
    out = tmp_path / "creds"
    labkit("class", "credentials", "--students", "1", "--out", str(out), check=0)
    run = vagrantfile(tmp_path, {"LABKIT_CREDENTIALS": str(out), "LABKIT_STUDENTS": "2"})
    assert run.returncode != 0 and "has no credentials for student-02" in run.stderr, run.stderr


def test_vagrant_validates_the_class_settings(tmp_path):
    """Vagrant itself accepts the Vagrantfile with credentials, a slice of the class and a bridge."""
    out = tmp_path / "creds"
    labkit("class", "credentials", "--students", "3", "--out", str(out), check=0)
    shutil.copy(REPO / "Vagrantfile", tmp_path / "Vagrantfile")
    run = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "VAGRANT_HOME": str(tmp_path / ".vagrant.d"),
                                           "LABKIT_BOX_DIR": str(tmp_path / "box"), "LABKIT_CREDENTIALS": str(out),
                                           "LABKIT_FIRST_STUDENT": "2", "LABKIT_STUDENTS": "2", "LABKIT_BRIDGE": "eno1"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.findall(r"^==> (student-\d+):", run.stdout, re.M) == ["student-02", "student-03"]


def test_the_box_has_no_password_logins():
    text = (REPO / "scripts" / "build-box").read_text()
    assert "chpasswd" not in text and "echo vagrant:" not in text
    assert "usermod -p '*' vagrant" in text and '"PasswordAuthentication no"' in text
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / "build-box")]).returncode == 0


def test_the_booted_proof_boots_nothing_unless_asked(tmp_path):
    """deploy/prove-class boots VMs only with --boot (it is not part of the suite)."""
    script = REPO / "deploy" / "prove-class"
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": str(tmp_path)})       # no vagrant, no ssh to be found
    assert run.returncode == 2 and "say --boot to do it" in run.stderr, run.stderr
    assert not list(tmp_path.iterdir())
