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
