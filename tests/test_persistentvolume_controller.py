"""labkit.controllers.persistentvolume against pv_controller.go: which volume a claim gets
(FindMatchingVolume: pre-bound first, else the smallest Available one of the claim's class), what
bind writes (the annotations of bindClaimToVolume and GetBindVolumeToClaim), a claim that names a
volume that does not satisfy it (VolumeMismatch), a claim with no volume (FailedBinding), a volume
whose claim is gone (Released) and a bound claim whose volume is gone (Lost)."""

from __future__ import annotations

import pytest

from support import embedded_server, wait_until as _wait_until


def wait_until(predicate) -> bool:
    """support.wait_until with room for a loaded machine: the controllers act within moments."""
    return _wait_until(predicate, timeout=60, interval=0.1)


NS = "vols"


@pytest.fixture
def c(tmp_path):
    with embedded_server(tmp_path / "state", tmp_path, controllers=["persistentvolume-binder", "pvc-protection",
                                                                          "pv-protection"]) as server:
        client = server.client()
        client.create("v1", "namespaces", {"metadata": {"name": NS}})
        yield client


def _volume(c, name, size="1Gi", claim_ref=None, policy=None, cls="", modes=("ReadWriteOnce",)):
    spec = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
            "nfs": {"server": "nfs.example.com", "path": f"/exports/{name}"}}
    if claim_ref:
        spec["claimRef"] = claim_ref
    if policy:
        spec["persistentVolumeReclaimPolicy"] = policy
    return c.create("v1", "persistentvolumes", {"metadata": {"name": name}, "spec": spec})


def _claim(c, name, size="1Gi", volume=None, cls=""):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    return c.create("v1", "persistentvolumeclaims", {"metadata": {"name": name}, "spec": spec}, NS)


def _phase(c, resource, name, namespace=None):
    return (c.get("v1", resource, name, namespace).get("status") or {}).get("phase")


def _events(c, name):
    return [(e["type"], e["reason"], e["message"]) for e in c.list("v1", "events", NS)[0]
            if e["involvedObject"]["name"] == name]


def test_the_smallest_available_volume_of_the_claims_class_is_bound(c):
    for name, size, cls in (("big", "5Gi", ""), ("small", "500Mi", ""), ("fits", "2Gi", ""), ("other", "1Gi", "fast")):
        _volume(c, name, size, cls=cls)
    assert wait_until(lambda: all(_phase(c, "persistentvolumes", n) == "Available"
                                  for n in ("big", "small", "fits", "other")))
    claim = _claim(c, "data")
    assert wait_until(lambda: _phase(c, "persistentvolumeclaims", "data", NS) == "Bound")
    bound = c.get("v1", "persistentvolumeclaims", "data", NS)
    assert bound["spec"]["volumeName"] == "fits"
    assert bound["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes",
                                                "pv.kubernetes.io/bound-by-controller": "yes"}
    assert bound["status"]["capacity"] == {"storage": "2Gi"}
    volume = c.get("v1", "persistentvolumes", "fits")
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert volume["metadata"]["annotations"] == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert [_phase(c, "persistentvolumes", n) for n in ("big", "small", "other")] == ["Available"] * 3


def test_volumes_with_the_fewest_fitting_access_modes_are_searched_first(c):
    """index.go findByClaim: a smaller volume offering more access modes loses to a bigger one
    offering only what the claim asks; one lacking a mode the claim asks is never taken."""
    _volume(c, "many-modes", "1Gi", modes=("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"))
    _volume(c, "read-only", "1Gi", modes=("ReadOnlyMany",))
    _volume(c, "exact-modes", "3Gi", modes=("ReadWriteOnce",))
    assert wait_until(lambda: all(_phase(c, "persistentvolumes", n) == "Available"
                                  for n in ("many-modes", "read-only", "exact-modes")))
    _claim(c, "data")
    assert wait_until(lambda: _phase(c, "persistentvolumeclaims", "data", NS) == "Bound")
    assert c.get("v1", "persistentvolumeclaims", "data", NS)["spec"]["volumeName"] == "exact-modes"


def test_a_volume_pre_bound_to_the_claim_is_bound_without_the_volumes_annotation(c):
    _volume(c, "reserved", "5Gi", claim_ref={"namespace": NS, "name": "data"})
    _volume(c, "exact", "1Gi")
    claim = _claim(c, "data")
    assert wait_until(lambda: _phase(c, "persistentvolumeclaims", "data", NS) == "Bound")
    assert c.get("v1", "persistentvolumeclaims", "data", NS)["spec"]["volumeName"] == "reserved"
    volume = c.get("v1", "persistentvolumes", "reserved")
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert not volume["metadata"].get("annotations")        # the binding was the user's (pre-bound)


def test_a_claim_naming_a_volume_too_small_stays_pending_with_a_warning(c):
    _volume(c, "tiny", "100Mi")
    _claim(c, "data", volume="tiny")
    assert wait_until(lambda: _events(c, "data"))
    assert _events(c, "data") == [("Warning", "VolumeMismatch",
                                   'Cannot bind to requested volume "tiny": requested PV is too small')]
    assert _phase(c, "persistentvolumeclaims", "data", NS) == "Pending"
    assert not c.get("v1", "persistentvolumes", "tiny")["spec"].get("claimRef")


def test_a_claim_without_class_and_volume_waits_with_failed_binding(c):
    _claim(c, "data")
    assert wait_until(lambda: _events(c, "data"))
    assert _events(c, "data") == [("Normal", "FailedBinding",
                                   "no persistent volumes available for this claim and no storage class is set")]
    assert _phase(c, "persistentvolumeclaims", "data", NS) == "Pending"


def test_a_waiting_claim_is_bound_on_the_resync_after_a_volume_appears(c):
    """pv_controller_base.go resync: every claim is synced again each --pvclaimbinder-sync-period
    (15 s), so a claim that found no volume gets one made after it (nothing else wakes it: the new
    volume names no claim). Without the resync it would stay Pending for ever."""
    _claim(c, "late")
    assert wait_until(lambda: _events(c, "late"))
    assert _phase(c, "persistentvolumeclaims", "late", NS) == "Pending"
    _volume(c, "arrives")
    assert wait_until(lambda: _phase(c, "persistentvolumeclaims", "late", NS) == "Bound")
    assert c.get("v1", "persistentvolumeclaims", "late", NS)["spec"]["volumeName"] == "arrives"


def test_a_volume_is_released_when_its_claim_goes_and_a_claim_is_lost_when_its_volume_goes(c):
    for name in ("kept", "gone"):
        _volume(c, name, claim_ref={"namespace": NS, "name": f"claim-{name}"})
        _claim(c, f"claim-{name}", volume=name)
    assert wait_until(lambda: all(_phase(c, "persistentvolumeclaims", f"claim-{n}", NS) == "Bound"
                                  for n in ("kept", "gone")))
    c.delete("v1", "persistentvolumeclaims", "claim-kept", NS)
    assert wait_until(lambda: _phase(c, "persistentvolumes", "kept") == "Released")
    kept = c.get("v1", "persistentvolumes", "kept")
    assert kept["spec"]["claimRef"]["name"] == "claim-kept" and kept["metadata"]["finalizers"] == [
        "kubernetes.io/pv-protection"]

    # a Bound volume being deleted is kept by kubernetes.io/pv-protection: without it, it goes
    c.delete("v1", "persistentvolumes", "gone")
    c.patch("v1", "persistentvolumes", "gone", {"metadata": {"finalizers": None}}, "merge")
    assert wait_until(lambda: _phase(c, "persistentvolumeclaims", "claim-gone", NS) == "Lost")
    lost = ("Warning", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
    assert wait_until(lambda: lost in _events(c, "claim-gone")), _events(c, "claim-gone")
