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
