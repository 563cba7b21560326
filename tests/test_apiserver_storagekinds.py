"""storage.k8s.io/v1 StorageClass, CSIDriver and VolumeAttachment served.

Expected values from kubernetes v1.34: pkg/apis/storage/validation/validation.go
(ValidateStorageClass(Update), ValidateCSIDriver(Update), ValidateVolumeAttachment(Update),
ValidateVolumeAttachmentV1); pkg/apis/storage/v1/defaults.go; pkg/printers/internalversion/
printers.go (storageClass, csiDriver and volumeAttachment column definitions and printers).
"""

from __future__ import annotations

import json
import shutil

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store

S = "storage.k8s.io/v1"


@pytest.fixture
def client(tmp_path):
    api = Api(Registry(Store(tmp_path / "objects.db")))
    admin = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    admin.registry = api.registry
    return admin


def refused(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as info:
        fn(*args)
    return info.value


def attachment(name="va", **spec):
    return {"metadata": {"name": name}, "spec": {"attacher": "csi.example.com", "nodeName": "node-a",
                                                 "source": {"persistentVolumeName": "pv-1"}, **spec}}


def test_storage_class_defaults_and_required_provisioner(client):
    sc = client.create(S, "storageclasses", {"metadata": {"name": "fast"}, "provisioner": "csi.example.com"})
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    err = refused(client.create, S, "storageclasses", {"metadata": {"name": "none"}})
    assert err.code == 422
    assert err.message == 'StorageClass.storage.k8s.io "none" is invalid: provisioner: Required value'
    err = refused(client.create, S, "storageclasses", {"metadata": {"name": "bad"}, "provisioner": "x",
                                                        "reclaimPolicy": "Recycle"})
    assert err.message == ('StorageClass.storage.k8s.io "bad" is invalid: reclaimPolicy: Unsupported value: '
                           '"Recycle": supported values: "Delete", "Retain"')


def test_storage_class_update_forbids_what_upstream_forbids(client):
    client.create(S, "storageclasses", {"metadata": {"name": "fast"}, "provisioner": "csi.example.com",
                                        "parameters": {"type": "ssd"}})
    sc = client.get(S, "storageclasses", "fast")
    sc["parameters"] = {"type": "hdd"}
    sc["provisioner"] = "other.example.com"
    sc["volumeBindingMode"] = "WaitForFirstConsumer"
    err = refused(client.update, S, "storageclasses", sc)
    assert err.message == (
        'StorageClass.storage.k8s.io "fast" is invalid: [parameters: Forbidden: updates to parameters are '
        'forbidden., provisioner: Forbidden: updates to provisioner are forbidden., volumeBindingMode: '
        'Invalid value: "WaitForFirstConsumer": field is immutable]')
    sc = client.get(S, "storageclasses", "fast")
    sc["allowVolumeExpansion"] = True          # mutable
    assert client.update(S, "storageclasses", sc)["allowVolumeExpansion"] is True


def test_csi_driver_defaults_and_immutable_fields(client):
    d = client.create(S, "csidrivers", {"metadata": {"name": "csi.example.com"}, "spec": {}})
    assert d["spec"] == {"attachRequired": True, "podInfoOnMount": False, "storageCapacity": False,
                         "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": False,
                         "seLinuxMount": False, "volumeLifecycleModes": ["Persistent"]}
    d["spec"]["attachRequired"] = False
    d["spec"]["podInfoOnMount"] = True         # mutable since 1.30
    err = refused(client.update, S, "csidrivers", d)
    assert err.message == ('CSIDriver.storage.k8s.io "csi.example.com" is invalid: spec.attachedRequired: '
                           'Invalid value: false: field is immutable')
    err = refused(client.create, S, "csidrivers", {"metadata": {"name": "x.example.com"},
                                                    "spec": {"volumeLifecycleModes": ["Forever"]}})
    assert err.message == ('CSIDriver.storage.k8s.io "x.example.com" is invalid: spec.volumeLifecycleModes: '
                           'Unsupported value: "Forever": supported values: "Persistent", "Ephemeral"')


def test_volume_attachment_validation_status_and_read_only_spec(client):
    err = refused(client.create, S, "volumeattachments", {"metadata": {"name": "va"},
                                                           "spec": {"nodeName": "node-a", "source": {}}})
    assert err.message == ('VolumeAttachment.storage.k8s.io "va" is invalid: [spec.attacher: Required value, '
                           'spec.source: Required value: must specify exactly one of inlineVolumeSpec and '
                           'persistentVolumeName]')
    va = client.create(S, "volumeattachments", {**attachment(), "status": {"attached": True}})
    assert "status" not in va                   # the attacher reports it through the status subresource
    va["status"] = {"attached": True}
    va = client.update(S, "volumeattachments", va, subresource="status")
    assert va["status"] == {"attached": True}
    va["spec"]["nodeName"] = "node-b"
    err = refused(client.update, S, "volumeattachments", va)
    assert err.code == 422 and err.message.endswith("spec: Invalid value: storage.VolumeAttachmentSpec{"
                                                    'Attacher:"csi.example.com", Source:storage.VolumeAttachmentSource'
                                                    '{PersistentVolumeName:&"pv-1", InlineVolumeSpec:'
                                                    '(*core.PersistentVolumeSpec)(nil)}, NodeName:"node-b"}: '
                                                    'field is immutable')


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_and_describe_as_on_a_real_cluster(tmp_path):
    from support import embedded_server, kubectl as run_kubectl
    with embedded_server(tmp_path / "apiserver", tmp_path) as srv:
        def kubectl(*args, input=None):
            return run_kubectl(srv, *args, input=input, check=True).stdout
        docs = [{"apiVersion": S, "kind": "StorageClass", "provisioner": "csi.example.com",
                 "metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}},
                {"apiVersion": S, "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}},
                {"apiVersion": S, "kind": "VolumeAttachment", **attachment("csi-123")}]
        kubectl("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))
        table = kubectl("get", "storageclass").splitlines()
        assert table[0].split() == ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                                    "ALLOWVOLUMEEXPANSION", "AGE"]
        assert table[1].split()[:6] == ["std", "(default)", "csi.example.com", "Delete", "Immediate", "false"]
        table = kubectl("get", "csidrivers").splitlines()
        assert table[0].split() == ["NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY",
                                    "TOKENREQUESTS", "REQUIRESREPUBLISH", "MODES", "AGE"]
        assert table[1].split()[:7] == ["csi.example.com", "true", "false", "false", "<unset>", "false",
                                        "Persistent"]
        table = kubectl("get", "volumeattachments").splitlines()
        assert table[0].split() == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
        assert table[1].split()[:5] == ["csi-123", "csi.example.com", "pv-1", "node-a", "false"]
        described = kubectl("describe", "storageclass", "std")
        fields = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in described.splitlines()
                  if ":" in line and not line.startswith(" ")}
        assert (fields["IsDefaultClass"], fields["Provisioner"], fields["ReclaimPolicy"]) == \
            ("Yes", "csi.example.com", "Delete")
        described = kubectl("describe", "volumeattachment", "csi-123")
        assert "node-a" in described and "csi.example.com" in described
