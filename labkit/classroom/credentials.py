"""Per-student credentials, made on the instructor's machine: `labkit class credentials`.

For each student NN (student-01, student-02, ...), in the output directory:

  keys/student-NN, keys/student-NN.pub   an ed25519 SSH key pair (cryptography; OpenSSH formats,
                                         the private key unencrypted and mode 0600): the student
                                         logs in to their own machine with it, and no one else's
                                         key opens that machine's student account
  roster.csv                             student (--names: one per line, else the machine's name) ->
                                         machine -> host, port -> user -> key file, and
                                         the student's sudo password (mode 0600: hand each student
                                         their line and their private key, nothing else)
  credentials.json                       what the machines need (user, public key, sudo password
                                         hash per machine): the Vagrantfile reads it
                                         (LABKIT_CREDENTIALS=DIR)
  host_vars/student-NN.yml               the same for deploy/ansible/workshop.yml (an inventory in
                                         DIR, or -e @DIR/host_vars/student-NN.yml)

With cloud_init (`--cloud-init`), for machines booted from the cloud image (scripts/build-box
--cloud), which has no account of its own:

  cloud-init/student-NN/user-data        #cloud-config for that machine: the student's account with
                                         their public key and sudo password hash (sudo group: sudo
                                         asks for the password), the instructor's account (ADMIN,
                                         default `instructor`: key only, passwordless sudo, for
                                         `labkit class` and Ansible), no SSH passwords, no root
                                         login, and the labs' reference solutions removed unless
                                         kept (mode 0600)
  cloud-init/student-NN/meta-data        its instance-id and host name (student-NN): the two files
                                         are a NoCloud seed (a disk labelled `cidata`, or
                                         `ds=nocloud;s=URL/`), and user-data is what OpenStack,
                                         Proxmox or a public cloud takes as user data
  keys/instructor, keys/instructor.pub   the instructor's key pair, unless a public key is given

Machines are named student-NN, like the Vagrantfile's VMs. With `host`, the roster says where each
student reaches their machine: HOST, port `base_port + NN` (the Vagrantfile's forwarded SSH ports).

The sudo password is random per student (there is no shared password, and SSH password logins are
off: it only lets the student become root on their own machine, where labs run as root). Its
SHA-512 crypt(3) hash is computed in-process (`crypt_sha512`, what `openssl passwd -6` and
mkpasswd make). An existing directory's credentials are
never overwritten: a re-run refuses, so a class cannot lose its keys by accident.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from labkit.errors import LabkitError

ROSTER_COLUMNS = ("student", "machine", "host", "port", "user", "key", "public_key", "sudo_password")
ADMIN = "instructor"
# the labs' reference solutions, mistakes and mutants on the image (labkit-instructor), as the
# Vagrantfile's LABKIT_NO_SOLUTIONS=1 removes them
REMOVE_SOLUTIONS = ["/opt/labkit/venv/bin/pip", "uninstall", "-q", "-y", "labkit-instructor"]


@dataclass
class Student:
    name: str            # the machine's name: student-NN
    user: str
    key: Path            # the private key file
    public_key: str      # one OpenSSH line
    password: str
    password_hash: str
    host: str = ""
    port: int | None = None
    person: str = ""     # who the student is (--names), else the machine's name


def key_pair(comment: str) -> tuple[bytes, str]:
    """An ed25519 key pair: the private key in OpenSSH's format, the public key as one line."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return pem, f"{public.decode()} {comment}"


# SHA-crypt (Ulrich Drepper, "Unix crypt using SHA-256 and SHA-512", the $6$ scheme of glibc's
# crypt(3)), written out because Python's crypt module is deprecated and gone in 3.13 and no
# maintained library in the environment provides it; checked against the specification's test
# vector and `openssl passwd -6` (tests/test_class_access.py).
_CRYPT_ALPHABET = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_CRYPT_ROUNDS = 5000        # the scheme's default: no rounds= in the hash


def sha512_crypt(password: bytes, salt: bytes) -> str:
    """The $6$ hash of `password` with `salt` (up to 16 characters of ./0-9A-Za-z)."""
    h = hashlib.sha512
    n = len(password)
    b = h(password + salt + password).digest()
    a = h(password + salt)
    for i in range(0, n, 64):                   # B for each 64 bytes of the password, then the rest
        a.update(b[:min(64, n - i)])
    i = n
    while i:                                    # each bit of the length: B for 1, the password for 0
        a.update(b if i & 1 else password)
        i >>= 1
    c = a.digest()
    p = (h(password * n).digest() * (n // 64 + 1))[:n]
    s = (h(salt * (16 + c[0])).digest() * (len(salt) // 64 + 1))[:len(salt)]
    for r in range(_CRYPT_ROUNDS):
        d = h(p if r & 1 else c)
        if r % 3:
            d.update(s)
        if r % 7:
            d.update(p)
        d.update(c if r & 1 else p)
        c = d.digest()
    out = []
    for k in range(21):                         # the scheme's byte order, 3 bytes to 4 characters
        x, y, z = c[k], c[k + 21], c[k + 42]
        word = ((x << 16) | (y << 8) | z, (y << 16) | (z << 8) | x, (z << 16) | (x << 8) | y)[k % 3]
        out += [_CRYPT_ALPHABET[(word >> (6 * j)) & 63] for j in range(4)]
    out += [_CRYPT_ALPHABET[(c[63] >> (6 * j)) & 63] for j in range(2)]
    return f"$6${salt.decode()}${''.join(out)}"


def crypt_sha512(password: str) -> str:
    """The password's SHA-512 crypt(3) hash ($6$...) with a random 16-character salt, as /etc/shadow holds it."""
    salt = "".join(secrets.choice(_CRYPT_ALPHABET) for _ in range(16))
    return sha512_crypt(password.encode(), salt.encode())


def _write(path: Path, data: str | bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, mode)
    with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.chmod(path, mode)


def make(out: Path, students: int, user: str = "student", host: str = "", base_port: int = 22000,
         names: list[str] | None = None, cloud_init: bool = False, admin: str = ADMIN,
         admin_key: str | None = None, keep_solutions: bool = False) -> list[Student]:
    out = Path(out)
    if names is not None and len(names) != students:
        raise LabkitError(f"--names: {len(names)} names for {students} students")
    if (out / "roster.csv").exists() or (out / "keys").exists():
        raise LabkitError(f"--out {out}: holds credentials already; they are never overwritten "
                          "(choose another directory, or remove this one yourself)")
    try:
        (out / "keys").mkdir(parents=True, mode=0o700)
        (out / "host_vars").mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise LabkitError(f"--out {out}: cannot create the directory: {exc.strerror or exc}")
    made = []
    for number in range(1, students + 1):
        name = f"student-{number:02d}"
        private, public = key_pair(f"{name}@labkit")
        key = (out / "keys" / name).resolve()
        _write(key, private, 0o600)
        _write(key.with_name(name + ".pub"), public + "\n", 0o644)
        password = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(16))
        made.append(Student(name, user, key, public, password, crypt_sha512(password), host,
                            base_port + number if host else None, names[number - 1] if names else name))
    _write(out / "roster.csv", roster_csv(made), 0o600)
    _write(out / "credentials.json", json.dumps(
        {s.name: {"user": s.user, "public_key": s.public_key, "password_hash": s.password_hash} for s in made},
        indent=2) + "\n", 0o600)
    for s in made:
        _write(out / "host_vars" / f"{s.name}.yml",
               f"labkit_student_user: {json.dumps(s.user)}\nlabkit_student_key: {json.dumps(str(s.key) + '.pub')}\n"
               f"labkit_student_password_hash: {json.dumps(s.password_hash)}\n", 0o600)
    if cloud_init:
        if admin_key is None:
            private, admin_key = key_pair(f"{admin}@labkit")
            _write(out / "keys" / ADMIN, private, 0o600)
            _write(out / "keys" / f"{ADMIN}.pub", admin_key + "\n", 0o644)
        (out / "cloud-init").mkdir(mode=0o700, exist_ok=True)
        for s in made:
            (out / "cloud-init" / s.name).mkdir(mode=0o700)
            _write(out / "cloud-init" / s.name / "user-data",
                   user_data(s, admin, admin_key, keep_solutions), 0o600)
            _write(out / "cloud-init" / s.name / "meta-data", meta_data(s), 0o644)
    return made


def user_data(student: Student, admin: str, admin_key: str, keep_solutions: bool = False) -> str:
    """The #cloud-config of a student's machine (cloud-init's users, ssh_pwauth, disable_root and
    runcmd modules): their account and the instructor's, and nothing that lets anyone else in."""
    config = {
        "hostname": student.name,
        "users": [
            {"name": admin, "gecos": "instructor (labkit class, Ansible)", "shell": "/bin/bash",
             "lock_passwd": True, "sudo": "ALL=(ALL) NOPASSWD:ALL", "ssh_authorized_keys": [admin_key]},
            {"name": student.user, "gecos": student.person, "shell": "/bin/bash", "lock_passwd": False,
             "hashed_passwd": student.password_hash, "groups": ["sudo"],
             "ssh_authorized_keys": [student.public_key]},
        ],
        "ssh_pwauth": False,
        "disable_root": True,
    }
    if not keep_solutions:
        config["runcmd"] = [REMOVE_SOLUTIONS]
    header = (f"#cloud-config\n# {student.name}'s machine (labkit class credentials --cloud-init): {student.user} logs "
              f"in with their key and sudoes with their password; {admin} is the instructor's\n")
    return header + yaml.safe_dump(config, sort_keys=False, width=200)


def meta_data(student: Student) -> str:
    return yaml.safe_dump({"instance-id": f"labkit-{student.name}", "local-hostname": student.name}, sort_keys=False)


def roster_csv(students: list[Student]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(ROSTER_COLUMNS)
    for s in students:
        writer.writerow([_spreadsheet_safe(s.person or s.name), s.name, s.host, s.port or "", s.user, str(s.key),
                         s.public_key, s.password])
    return buf.getvalue()


def _spreadsheet_safe(value: str) -> str:
    """A name must not turn into a formula in a spreadsheet."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def read_names(path: Path) -> list[str]:
    """One student per line (blank lines and # comments left out), each name once."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise LabkitError(f"--names {path}: cannot read it: {exc}")
    names = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    seen = set()
    for name in names:
        if name in seen:
            raise LabkitError(f"--names {path}: {name!r} is listed twice")
        seen.add(name)
    return names
