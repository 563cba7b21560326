"""The EndpointSlice controller does not sync a Service on a slice cache that has not yet seen the
slices it created itself (endpointslice_controller.go syncService: the endpointSliceTracker's
StaleSlices check): otherwise a slow informer makes it create a second slice and then delete one,
so a slice a client has found disappears."""

from __future__ import annotations

from labkit.controllers.endpointslice import EndpointSliceController


class Cache:
    def __init__(self, items=()):
        self.items = list(items)

    def get(self, key):
        return next((o for o in self.items if f"{o['metadata']['namespace']}/{o['metadata']['name']}" == key), None)

    def list(self, namespace):
        return [o for o in self.items if o["metadata"]["namespace"] == namespace]


class Client:
    def __init__(self):
        self.created = []

    def create(self, api_version, resource, obj, namespace):
        made = dict(obj, metadata=dict(obj["metadata"], name=f"web-{len(self.created)}", namespace=namespace))
        self.created.append(made)
        return made

    def update(self, *args):
        raise AssertionError("nothing to update")

    def delete(self, *args):
        raise AssertionError("nothing to delete")


class Queue:
    def __init__(self):
        self.later = []

    def add_after(self, key, delay):
        self.later.append(key)


class Log:
    def record(self, *args, **kwargs):
        pass


def test_a_created_slice_the_cache_has_not_seen_makes_the_service_wait():
    service = {"metadata": {"namespace": "shop", "name": "web", "uid": "u1"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    controller = EndpointSliceController(Client(), Log())
    controller.queue = Queue()
    controller.informers = {"services": Cache([service]), "pods": Cache(), "slices": Cache()}
    controller.sync("shop/web")
    assert [s["metadata"]["name"] for s in controller.client.created] == ["web-0"]      # the placeholder
    controller.sync("shop/web")            # the slice informer has not seen web-0 yet
    assert len(controller.client.created) == 1 and controller.queue.later == ["shop/web"]
    controller.informers["slices"].items.append(controller.client.created[0])
    controller.sync("shop/web")            # now it has: the placeholder is up to date, nothing to do
    assert len(controller.client.created) == 1 and controller.queue.later == ["shop/web"]
