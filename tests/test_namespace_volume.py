"""The namespace lab's claim archive/data as a v1.34 cluster shows it, with real kubectl: Bound to
the statically provisioned PersistentVolume archive-data by the PV controller (labkit.controllers.
persistentvolume, as pv_controller.go bind writes it) before the Pod uploader ran; Released, its
claimRef and kubernetes.io/pv-protection kept, once the claim is gone (syncVolume, Retain); and
made again by the exercise's reset so that a new claim `data` binds to it."""

from __future__ import annotations

import json

import pytest

from labkit.labs import load_lab
from support import REPO, embedded_server, kubectl, wait_until as _wait_until
from test_namespace_dead_node import _Target


def wait_until(predicate) -> bool:
    """support.wait_until with room for a loaded machine: the controllers act within moments."""
    return _wait_until(predicate, timeout=60, interval=0.1)


CONTROLLERS = ["persistentvolume-binder", "pv-protection", "pvc-protection", "serviceaccount"]


@pytest.fixture
def archive(tmp_path):
    """The archive namespace as labs/namespace/lab.py builds it (up / _rebuild): node-b, the volume,
    the claim and the Pod, stranded on node-b."""
    module = load_lab(REPO / "labs" / "namespace").environment_module()
    with embedded_server(tmp_path / "state", tmp_path, controllers=CONTROLLERS) as server:
        target = _Target(server)
        module._dead_node(None, target)
        module._volume(None, target)
        module._build_namespace(None, target, "archive")
        module._strand_uploader(target)
        yield server, target, module


def _get(server, *args) -> dict:
    return json.loads(kubectl(server, "get", *args, "-o", "json", check=True).stdout)


def test_the_claim_is_bound_to_its_volume_as_the_pv_controller_binds_it(archive):
    server, _, _ = archive
    table = kubectl(server, "get", "pv,pvc", "-n", "archive", check=True).stdout.splitlines()
    pv_row = next(line.split() for line in table if line.startswith("persistentvolume/archive-data"))
    assert pv_row[1:6] == ["1Gi", "RWO", "Retain", "Bound", "archive/data"], table
    pvc_row = next(line.split() for line in table if line.startswith("persistentvolumeclaim/data"))
    assert pvc_row[1:5] == ["Bound", "archive-data", "1Gi", "RWO"], table

    claim, volume = _get(server, "pvc", "data", "-n", "archive"), _get(server, "pv", "archive-data")
    # bindClaimToVolume: the controller chose the volume, so both annotations
    assert claim["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes",
                                                "pv.kubernetes.io/bound-by-controller": "yes"}
    assert claim["spec"]["volumeName"] == "archive-data"
    assert claim["status"] == {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}
    assert claim["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    # GetBindVolumeToClaim: a reference to the claim, and bound-by-controller (not pre-bound)
    ref = volume["spec"]["claimRef"]
    assert {k: ref[k] for k in ("kind", "apiVersion", "namespace", "name", "uid")} == {
        "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "archive", "name": "data",
        "uid": claim["metadata"]["uid"]}
    assert int(ref["resourceVersion"]) < int(claim["metadata"]["resourceVersion"])
    assert volume["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert volume["status"]["phase"] == "Bound" and volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"

    described = kubectl(server, "describe", "pvc", "data", "-n", "archive", check=True).stdout
    for line in ("Status:        Bound", "Volume:        archive-data", "Used By:       uploader",
                 "Capacity:      1Gi", "Access Modes:  RWO"):
        assert line in described, described
    described = kubectl(server, "describe", "pv", "archive-data", check=True).stdout
    for line in ("Status:          Bound", "Claim:           archive/data", "Reclaim Policy:  Retain",
                 "Finalizers:      [kubernetes.io/pv-protection]", "Server:    nfs.example.com"):
        assert line in described, described


def test_the_volume_is_released_and_kept_when_the_claim_goes_and_the_reset_binds_a_new_claim(archive):
    server, target, module = archive
    client = server.client()
    old_uid = client.get("v1", "persistentvolumeclaims", "data", "archive")["metadata"]["uid"]
    client.delete("v1", "pods", "uploader", "archive", options={"gracePeriodSeconds": 0})
    client.delete("v1", "persistentvolumeclaims", "data", "archive")
    assert wait_until(lambda: client.get_or_none("v1", "persistentvolumeclaims", "data", "archive") is None)
    assert wait_until(lambda: client.get("v1", "persistentvolumes", "archive-data")["status"]["phase"] == "Released")
    row = next(line.split() for line in kubectl(server, "get", "pv", check=True).stdout.splitlines()
               if line.startswith("archive-data"))
    assert row[1:6] == ["1Gi", "RWO", "Retain", "Released", "archive/data"], row
    volume = client.get("v1", "persistentvolumes", "archive-data")
    # Retain: nothing more happens; the claimRef still names the claim that is gone
    assert volume["spec"]["claimRef"]["uid"] == old_uid
    assert volume["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]

    # what the exercise's reset does after emptying the namespace: the volume is made again, and a
    # new claim `data` binds to it (the Released one, claimed by the old uid, would never take it)
    module._volume(None, target)
    client.create("v1", "persistentvolumeclaims", module.CONTENT["archive"][0][2], "archive")
    # bound at once, or on the PV controller's next resync (every 15 s) when it met the claim first
    assert wait_until(lambda: (client.get("v1", "persistentvolumeclaims", "data", "archive").get("status") or {})
                      .get("phase") == "Bound")
    claim = client.get("v1", "persistentvolumeclaims", "data", "archive")
    volume = client.get("v1", "persistentvolumes", "archive-data")
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"] != old_uid
    assert volume["status"]["phase"] == "Bound"
