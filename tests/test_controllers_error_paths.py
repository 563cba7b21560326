"""Controllers' error paths against client-go's workqueue: a sync that fails is requeued
rate-limited (DefaultTypedControllerRateLimiter: per-item 5 ms doubling to 1000 s, and an
overall 10 qps / burst 100 bucket) and its backoff is kept until a sync succeeds. In-process,
on stubs; no waiting."""

from __future__ import annotations

import pytest

from labkit.apiserver.errors import ApiError, conflict
from labkit.controllers.resourcequota import ResourceQuotaController


class _Informer:
    def __init__(self, objects):
        self.objects = objects

    def list(self, namespace=None):
        return [o for o in self.objects if namespace is None or o["metadata"].get("namespace") == namespace]


class _Client:
    """Status writes: the first quota's conflicts (the admission plugin wrote it meanwhile)."""

    def __init__(self, refuse: set[str]):
        self.refuse, self.written = refuse, []

    def update(self, api_version, resource, obj, namespace, subresource=""):
        if obj["metadata"]["name"] in self.refuse:
            raise conflict(resource, "", obj["metadata"]["name"], "the object has been modified; please apply "
                           "your changes to the latest version and try again")
        self.written.append(obj["metadata"]["name"])
        return obj


class _Log:
    def record(self, *args, **kwargs):
        pass


def _quota(name):
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": {"pods": "2"}}}


def test_a_quota_status_conflict_fails_the_sync_after_the_other_quotas():
    """resource_quota_controller.go worker: AddRateLimited on the sync's error (a conflict too),
    so the key's backoff grows; before, labkit re-added the key at once (no backoff) and the
    sync succeeded, forgetting it."""
    client = _Client(refuse={"a"})
    controller = ResourceQuotaController(client, _Log())
    controller.informers = {"resourcequotas": _Informer([_quota("a"), _quota("b")]), "pods": _Informer([])}
    with pytest.raises(ApiError) as e:
        controller.sync("ns")
    assert e.value.code == 409
    assert client.written == ["b"]          # the namespace's other quota was still written
    client.refuse.clear()
    controller.sync("ns")                   # the retry writes it
    assert client.written == ["b", "a", "b"]


# -- PodGC: a pod that cannot be deleted does not stop the pass (gc_controller.go) ------------------

class _PodClient:
    """Pods' status writes and deletes; `broken` names fail with a 500."""

    def __init__(self, broken: set[str]):
        self.broken, self.deleted = broken, []

    def update(self, api_version, resource, obj, namespace, subresource=""):
        return obj

    def delete(self, api_version, resource, name, namespace, options=None):
        if name in self.broken:
            from labkit.apiserver.errors import internal
            raise internal("etcdserver: request timed out")
        self.deleted.append(name)

    def get(self, api_version, resource, name, namespace=None):
        raise AssertionError("no node is looked up here")


class _Decisions:
    def __init__(self):
        self.records = []

    def record(self, controller, action, obj, message, **kwargs):
        self.records.append((action, message))


def _pod(name, created, phase="Running", terminating=False, node="", reason=None):
    meta = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if terminating:
        meta["deletionTimestamp"] = created
    status = {"phase": phase, **({"reason": reason} if reason else {})}
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def test_podgc_logs_a_failed_deletion_and_goes_on_with_the_other_pods():
    """gcUnscheduledTerminating: markFailedAndDeletePod's error goes to utilruntime.HandleError and
    the loop continues; before, labkit's pass stopped at the first failure and `b` stayed."""
    from labkit.controllers.podgc import PodGCController
    client, log = _PodClient(broken={"a"}), _Decisions()
    gc = PodGCController(client, log)
    gc.pods = _Informer([_pod("a", "2026-01-01T00:00:00Z", terminating=True),
                         _pod("b", "2026-01-01T00:00:01Z", terminating=True)])
    gc.nodes = _Informer([])
    gc.gc()
    assert client.deleted == ["b"]
    assert [action for action, _ in log.records] == ["error", "delete-pod"]
    assert "pod ns/a" in log.records[0][1] and "etcdserver: request timed out" in log.records[0][1]
    client.broken.clear()
    gc.gc()                                 # the next period's pass deletes it
    assert client.deleted[1:] == ["a", "b"]


def test_podgc_deletes_evicted_pods_first_over_the_threshold():
    """gcTerminated sorts byEvictionAndCreationTimestamp: evicted pods, then the oldest."""
    from labkit.controllers.podgc import PodGCController
    client = _PodClient(broken=set())
    gc = PodGCController(client, _Decisions(), threshold=1)
    gc.pods = _Informer([_pod("old", "2026-01-01T00:00:00Z", phase="Succeeded"),
                         _pod("evicted", "2026-01-02T00:00:00Z", phase="Failed", reason="Evicted"),
                         _pod("new", "2026-01-03T00:00:00Z", phase="Failed")])
    gc.nodes = _Informer([])
    gc.gc()
    assert client.deleted == ["evicted", "old"]


# -- the work queue's token bucket reads the queue's clock ------------------------------------------

class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_the_overall_bucket_refills_on_the_queues_clock():
    """BucketRateLimiter (10 qps, burst 100) on the queue's clock: time a SkippingClock skips
    refills the bucket; before, the bucket read real time, so a skipped second left it empty."""
    from labkit.controllers.workqueue import RateLimitingQueue
    clock = _Clock()
    queue = RateLimitingQueue("t", clock=clock)
    assert [queue.bucket.reserve() for _ in range(100)] == [0.0] * 100
    assert queue.bucket.reserve() == pytest.approx(0.1)     # the 101st waits for a token
    clock.now += 1.1                                        # 11 tokens' worth of the queue's time
    assert [queue.bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert queue.bucket.reserve() == pytest.approx(0.1)


# -- keyed controllers: a failed sync is requeued rate-limited, a good one forgotten ---------------
# (processNextWorkItem in pkg/controller/clusterroleaggregation, volume/pvcprotection,
# volume/pvprotection, certificates/certificate_controller.go; the node stand-in as a kubelet's
# status writes would be retried). Each controller runs one worker step on a queue whose clock
# the test moves.

class _KeyedInformer:
    def __init__(self, objects):
        self.objects = {self.key(o): o for o in objects}

    @staticmethod
    def key(obj):
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]

    def get(self, key):
        return self.objects.get(key)

    def list(self, namespace=None):
        return [o for o in self.objects.values() if namespace is None or o["metadata"].get("namespace") == namespace]


class _FailingClient:
    """Every write fails with `error` while `failures` lasts; `writes` records the others."""

    def __init__(self, error, failures=1):
        self.error, self.failures, self.writes = error, failures, []

    def _write(self, *what):
        if self.failures:
            self.failures -= 1
            raise self.error
        self.writes.append(what)
        return {}

    def update(self, api_version, resource, obj, namespace=None, subresource=""):
        return self._write("update", resource, obj["metadata"]["name"], subresource)

    def patch(self, api_version, resource, name, patch, patch_type="merge", namespace=None, query=None):
        return self._write("patch", resource, name, patch_type)

    def create(self, api_version, resource, obj, namespace=None, subresource="", name=None):
        return self._write("create", resource, name or obj["metadata"]["name"], subresource)

    def list(self, api_version, resource, namespace=None):
        return [], "1"


def _run_step(controller, key, clock):
    """One processNextWorkItem for `key`, then whether the key is waiting to come back."""
    controller.queue.add(key)
    assert controller.process_next_work_item(timeout=1)
    return controller.queue._failures.get(key, 0), controller.queue.next_due()


def _assert_requeued_then_forgotten(controller, key, client, clock):
    from labkit.controllers.workqueue import RateLimitingQueue
    controller.queue = RateLimitingQueue(controller.name, clock=clock)
    failures, due = _run_step(controller, key, clock)
    assert failures == 1 and due == pytest.approx(clock() + 0.005)      # AddRateLimited: 5 ms, not forgotten
    assert client.writes == []
    clock.now += 0.005
    assert controller.process_next_work_item(timeout=1)                  # the key came back: this sync writes
    assert len(client.writes) == 1
    assert controller.queue._failures.get(key) is None                  # Forget on success


def _conflict():
    return conflict("things", "", "x", "the object has been modified; please apply your changes to the latest "
                    "version and try again")


def test_clusterrole_aggregation_requeues_a_failed_apply():
    from labkit.apiserver.errors import internal
    from labkit.controllers.clusterroleaggregation import ClusterRoleAggregationController
    client, clock = _FailingClient(internal("etcdserver: request timed out")), _Clock()
    controller = ClusterRoleAggregationController(client, _Decisions())
    controller.informers = {"clusterroles": _KeyedInformer([
        {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}},
        {"metadata": {"name": "part", "labels": {"a": "b"}}, "rules": [{"verbs": ["get"], "resources": ["pods"],
                                                                        "apiGroups": [""]}]}])}
    _assert_requeued_then_forgotten(controller, "agg", client, clock)
    assert client.writes == [("patch", "clusterroles", "agg", "apply")]


def test_pvc_protection_requeues_a_failed_finalizer_removal():
    from labkit.apiserver.storageprotection import PVC_PROTECTION
    from labkit.controllers.volumeprotection import PVCProtectionController
    client, clock = _FailingClient(_conflict()), _Clock()
    controller = PVCProtectionController(client, _Decisions())
    claim = {"kind": "PersistentVolumeClaim", "metadata": {
        "name": "data", "namespace": "ns", "resourceVersion": "7", "deletionTimestamp": "2026-01-01T00:00:00Z",
        "finalizers": [PVC_PROTECTION]}}
    controller.informers = {"claims": _KeyedInformer([claim]), "pods": _KeyedInformer([])}
    _assert_requeued_then_forgotten(controller, "ns/data", client, clock)


def test_pv_protection_requeues_a_failed_finalizer_addition():
    from labkit.apiserver.errors import internal
    from labkit.controllers.volumeprotection import PVProtectionController
    client, clock = _FailingClient(internal("etcdserver: leader changed")), _Clock()
    controller = PVProtectionController(client, _Decisions())
    volume = {"kind": "PersistentVolume", "metadata": {"name": "pv1", "resourceVersion": "3"},
              "status": {"phase": "Available"}}
    controller.informers = {"volumes": _KeyedInformer([volume])}
    _assert_requeued_then_forgotten(controller, "pv1", client, clock)


def test_csr_signing_requeues_a_conflicting_status_write(tmp_path):
    """signer.handle: a conflict on UpdateStatus is an ignorableError, requeued all the same."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    from labkit.apiserver import certificates, certs
    from labkit.controllers.csrsigning import CSRSigningController
    ca_cert, ca_key = certs.self_signed_ca("test-ca")
    (tmp_path / "ca.crt").write_bytes(ca_cert)
    (tmp_path / "ca.key").write_bytes(ca_key)
    key = ec.generate_private_key(ec.SECP256R1())
    request = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")])).sign(key, hashes.SHA256())
    import base64
    csr = {"metadata": {"name": "alice"}, "spec": {
        "signerName": certificates.KUBE_APISERVER_CLIENT, "usages": ["client auth"],
        "request": base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()},
        "status": {"conditions": [{"type": certificates.APPROVED, "status": "True"}]}}
    client, clock = _FailingClient(_conflict()), _Clock()
    controller = CSRSigningController(client, _Decisions(), tmp_path)
    controller.informers = {"csrs": _KeyedInformer([csr])}
    _assert_requeued_then_forgotten(controller, "alice", client, clock)
    assert client.writes == [("update", "certificatesigningrequests", "alice", "status")]


def test_the_node_stand_in_keeps_the_backoff_of_a_conflicting_status_write():
    """Before, a conflict re-added the key itself and the sync returned normally, so the worker
    forgot the key's failures at once: its backoff never grew."""
    from labkit.controllers.node import NODE_NAME, NodeController

    class _Events:
        def event(self, *args, **kwargs):
            pass

    client, clock = _FailingClient(_conflict(), failures=2), _Clock()
    controller = NodeController(client, _Decisions(), clock=clock)
    controller.kubelet_events = controller.scheduler_events = _Events()
    pod = {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
           "spec": {"nodeName": NODE_NAME, "containers": [{"name": "c", "image": "nginx"}]},
           "status": {"phase": "Pending"}}
    controller.informers = {"pods": _KeyedInformer([pod])}
    from labkit.controllers.workqueue import RateLimitingQueue
    controller.queue = RateLimitingQueue(controller.name, clock=clock)
    assert _run_step(controller, "ns/web", clock) == (1, pytest.approx(clock() + 0.005))
    clock.now += 0.005
    assert controller.process_next_work_item(timeout=1)
    assert controller.queue._failures["ns/web"] == 2 and controller.queue.next_due() == pytest.approx(clock() + 0.01)
    clock.now += 0.01
    assert controller.process_next_work_item(timeout=1)
    assert client.writes == [("update", "pods", "web", "status")] and "ns/web" not in controller.queue._failures
