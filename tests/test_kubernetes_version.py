"""One Kubernetes version, stated and honoured: labkit is a v1.34 control plane that can emulate
1.31–1.34 as `--emulated-version` does (component-base/compatibility), each feature gate taking
the emulated release's default from its versioned spec (pkg/features/kube_features.go)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from labkit.apiserver.server import EmbeddedServer
from labkit.apiserver.version import EffectiveVersion, VersionError
from labkit.namespaces.versions import deletion_timeline
from support import labkit


@pytest.mark.parametrize("text, ordered", [(None, True), ("1.34", True), ("v1.33", True), ("1.32", False),
                                           ("1.31", False)])
def test_ordered_namespace_deletion_follows_the_versioned_gate(text, ordered):
    # OrderedNamespaceDeletion: 1.30 Beta off, 1.33 Beta on, 1.34 GA locked on
    assert EffectiveVersion.parse(text).enabled("OrderedNamespaceDeletion") is ordered


@pytest.mark.parametrize("text, message", [
    ("1.30", "emulation version 1.30 is not between [1.31, 1.34]"),
    ("1.35", "emulation version 1.35 is not between [1.31, 1.34]"),
    ("1.32.1", "illegal version string '1.32.1': expected major.minor, e.g. 1.34"),
])
def test_versions_outside_what_a_1_34_binary_emulates_are_refused(text, message):
    with pytest.raises(VersionError) as err:
        EffectiveVersion.parse(text)
    assert str(err.value) == message


def test_version_reports_the_binary_and_the_emulated_release(tmp_path):
    server = EmbeddedServer(tmp_path / "srv", controllers=["serviceaccount"], emulated_version="1.32").start()
    try:
        code, body = server.http_client().request("GET", "/version")
        assert code == 200
        assert (body["gitVersion"], body["major"], body["minor"]) == ("v1.34.1-labkit", "1", "34")
        assert (body["emulationMajor"], body["emulationMinor"]) == ("1", "32")
        assert (body["minCompatibilityMajor"], body["minCompatibilityMinor"]) == ("1", "31")
        controller = server.controllers.start("namespace")
        assert controller.deleter.ordered is False
        if shutil.which("kubectl"):
            out = subprocess.run(["kubectl", "version", "-o", "json"], capture_output=True, text=True, timeout=60,
                                 env={**os.environ, "KUBECONFIG": str(server.kubeconfig), "HOME": str(tmp_path)})
            # kubectl 1.32's version.Info predates the emulation fields: it shows the binary's version
            assert json.loads(out.stdout)["serverVersion"]["gitVersion"] == "v1.34.1-labkit"
    finally:
        server.stop()


def test_the_apiserver_command_refuses_a_version_it_cannot_emulate(tmp_path):
    out = labkit("apiserver", "--state", str(tmp_path / "s"), "--emulated-version", "1.29", check=2)
    assert out.stderr.strip().splitlines()[-1].endswith(
        "--emulated-version: emulation version 1.29 is not between [1.31, 1.34]")


def test_before_1_33_a_namespace_loses_everything_in_one_pass():
    """`labkit ns versions`: emulating 1.32 the ConfigMap and Service go in the controller's first
    pass, while the pod is still stopping (1.34's order: ns-pods-first-kubelet-gone)."""
    timeline = deletion_timeline("1.32", grace=2)
    assert timeline.version == "1.32" and timeline.ordered is False
    when = {what: at for at, what in timeline.events}
    pod_gone = next(at for what, at in when.items() if what.startswith("pod/") and what.endswith("gone"))
    assert when["configmap/settings gone"] < pod_gone and when["service/web gone"] < pod_gone
    assert timeline.events[-1][1] == "namespace demo gone"


@pytest.mark.parametrize("emulated, header, pods_first", [
    ("1.32", "Kubernetes 1.32: OrderedNamespaceDeletion off — every resource is deleted in the same pass", False),
    (None, "Kubernetes 1.34: OrderedNamespaceDeletion on — pods are deleted first, the rest once they are gone", True),
])
def test_ns_explain_names_the_version_and_its_order(tmp_path, emulated, header, pods_first):
    from labkit.namespaces.explain import explain, render
    server = EmbeddedServer(tmp_path / "srv", controllers=["serviceaccount"], emulated_version=emulated).start()
    try:
        c = server.client()
        c.create("v1", "namespaces", {"metadata": {"name": "old"}})
        c.create("v1", "pods", {"metadata": {"name": "p"}, "spec": {"nodeName": "gone", "containers": [
            {"name": "c", "image": "busybox"}]}}, "old")
        c.create("v1", "configmaps", {"metadata": {"name": "cm"}}, "old")
        c.delete("v1", "namespaces", "old")
        out = explain(server.http_client(), "old")
        assert header in render(out).splitlines()[2]
        pods = next(cause for cause in out.causes if cause.kind == "pods")
        assert ("pods go first" in pods.message) is pods_first
    finally:
        server.stop()
