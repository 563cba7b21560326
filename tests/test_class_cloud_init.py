"""Machines from the cloud image (scripts/build-box --cloud): the per-student cloud-init user-data
`labkit class credentials --cloud-init` writes, beside the roster, and the image recipe itself."""

import csv
import json
import re
import stat
import subprocess

import pytest
import yaml

from labkit.classroom import credentials as creds
from labkit.errors import LabkitError
from support import REPO, labkit


def roster(out):
    with open(out / "roster.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_each_student_gets_a_user_data_with_their_account_and_the_instructors(tmp_path):
    out = tmp_path / "creds"
    made = creds.make(out, 2, names=["Ada Lovelace", "Grace Hopper"], cloud_init=True)
    rows = roster(out)
    hashes = json.loads((out / "credentials.json").read_text())
    admin_key = (out / "keys" / "instructor.pub").read_text().strip()
    assert stat.S_IMODE((out / "keys" / "instructor").stat().st_mode) == 0o600
    assert admin_key.startswith("ssh-ed25519 ") and admin_key.endswith(" instructor@labkit")
    for student, row in zip(made, rows):
        seed = out / "cloud-init" / row["machine"]
        text = (seed / "user-data").read_text()
        assert text.startswith("#cloud-config\n")          # cloud-init reads it as cloud-config only so
        assert stat.S_IMODE((seed / "user-data").stat().st_mode) == 0o600
        config = yaml.safe_load(text)
        admin, user = config["users"]
        assert admin == {"name": "instructor", "gecos": "instructor (labkit class, Ansible)", "shell": "/bin/bash",
                         "lock_passwd": True, "sudo": "ALL=(ALL) NOPASSWD:ALL", "ssh_authorized_keys": [admin_key]}
        # the student's own key and password hash (sudo asks for the password: no sudo rule of theirs)
        assert user == {"name": "student", "gecos": row["student"], "shell": "/bin/bash", "lock_passwd": False,
                        "hashed_passwd": hashes[row["machine"]]["password_hash"], "groups": ["sudo"],
                        "ssh_authorized_keys": [row["public_key"]]}
        assert creds.sha512_crypt(row["sudo_password"].encode(), user["hashed_passwd"].split("$")[2].encode()) \
            == user["hashed_passwd"]
        assert row["sudo_password"] not in text
        assert (config["hostname"], config["ssh_pwauth"], config["disable_root"]) == (row["machine"], False, True)
        assert config["runcmd"] == [creds.REMOVE_SOLUTIONS]
        assert yaml.safe_load((seed / "meta-data").read_text()) == {"instance-id": f"labkit-{row['machine']}",
                                                                    "local-hostname": row["machine"]}
    one, two = (yaml.safe_load((out / "cloud-init" / m / "user-data").read_text()) for m in ("student-01", "student-02"))
    assert one["users"][1]["ssh_authorized_keys"] != two["users"][1]["ssh_authorized_keys"]
    assert one["users"][1]["hashed_passwd"] != two["users"][1]["hashed_passwd"]


def test_the_instructors_own_key_and_the_solutions_kept(tmp_path):
    creds.make(tmp_path / "c", 1, cloud_init=True, admin="teach", admin_key="ssh-ed25519 AAAAC3Nz mine", keep_solutions=True)
    config = yaml.safe_load((tmp_path / "c" / "cloud-init" / "student-01" / "user-data").read_text())
    assert config["users"][0]["name"] == "teach" and config["users"][0]["ssh_authorized_keys"] == ["ssh-ed25519 AAAAC3Nz mine"]
    assert "runcmd" not in config and not (tmp_path / "c" / "keys" / "instructor").exists()
    plain = creds.make(tmp_path / "p", 1)
    assert plain and not (tmp_path / "p" / "cloud-init").exists() and not (tmp_path / "p" / "keys" / "instructor").exists()
    with pytest.raises(LabkitError, match="never overwritten"):
        creds.make(tmp_path / "c", 1, cloud_init=True)


def test_the_cli_writes_the_seeds_and_refuses_cloud_options_without_cloud_init(tmp_path):
    key = tmp_path / "me.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGF+FYsfRA/UlOgpJLvLgTAvZJvwG6e9jDy1KhLbkX+l me@host\n")
    run = labkit("class", "credentials", "--students", "2", "--out", str(tmp_path / "a"), "--cloud-init", "--admin-key", str(key))
    assert run.returncode == 0, run.stderr
    assert f"cloud-init user-data in {tmp_path / 'a' / 'cloud-init'}" in run.stderr + run.stdout
    assert sorted(p.name for p in (tmp_path / "a" / "cloud-init").iterdir()) == ["student-01", "student-02"]
    alone = labkit("class", "credentials", "--students", "1", "--out", str(tmp_path / "b"), "--admin-key", str(key))
    assert alone.returncode == 2 and "go with --cloud-init" in alone.stderr and not (tmp_path / "b").exists()
    key.write_text("not a key\n")
    bad = labkit("class", "credentials", "--students", "1", "--out", str(tmp_path / "c"), "--cloud-init", "--admin-key", str(key))
    assert bad.returncode == 2 and "not one OpenSSH public key line" in bad.stderr and not (tmp_path / "c").exists()


def test_the_cloud_image_is_the_boxs_recipe_with_cloud_init_and_no_account():
    """scripts/build-box --cloud: the same customize step as the box (the same lock, kubectl and
    labkit wheel), then cloud-init and GRUB for BIOS and UEFI on GPT; no vagrant account."""
    text = (REPO / "scripts" / "build-box").read_text()
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / "build-box")]).returncode == 0
    cloud = text.split("customize_cloud() {")[1].split("\n}\n")[0]
    assert "vagrant" not in cloud and "NOPASSWD" not in cloud and "passwd" not in cloud
    assert "datasource_list: [NoCloud, ConfigDrive, OpenStack, Ec2, GCE, None]" in cloud
    assert "users: []" in cloud and "ssh_pwauth: false" in cloud and "disable_root: true" in cloud
    assert "-O i386-pc" in cloud and "-O x86_64-efi" in cloud and "::/EFI/BOOT/BOOTX64.EFI" in cloud
    # both kinds go through the one customize step: the locked Python packages, then the kind's own part
    shared = text.split("\ncustomize() {")[1].split("\n}\n")[0]
    assert "--require-hashes -r /tmp/labkit/box-requirements.txt" in shared
    assert 'customize_cloud "$root"' in shared and 'customize_vagrant "$root"' in shared
    assert "packages+=,cloud-init,cloud-guest-utils,gdisk,grub-efi-amd64-bin,dosfstools,mtools" in text
    # GPT: BIOS boot, EFI system and Linux partitions, with identifiers that follow from the sources
    image = text.split("cloud_image() {")[1].split("\n}\n")[0]
    assert re.search(r"type=21686148-6E6F-7420-4565-6B6E65656445.*\n.*type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B.*\n"
                     r".*type=0FC63DAF-8483-4772-8E79-3D69D8477DE4", image)
    assert "label-id: $disk_id" in image and "uuid.uuid5" in text and 'SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git' in text


def test_the_booted_cloud_proof_boots_nothing_unless_asked(tmp_path):
    """deploy/prove-cloud boots VMs only with --boot (it is not part of the suite)."""
    import os
    import sys
    run = subprocess.run([sys.executable, str(REPO / "deploy" / "prove-cloud")], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PATH": str(tmp_path)})      # no qemu, no ssh to be found
    assert run.returncode == 2 and "say --boot to do it" in run.stderr, run.stderr
    assert not list(tmp_path.iterdir())
