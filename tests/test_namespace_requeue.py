"""When the namespace controller looks at a Terminating namespace again, against upstream's formula
(pkg/controller/namespace/namespace_controller.go: enqueueNamespace adds a namespace
namespaceDeletionGracePeriod = 5 s after each change; worker requeues after estimate/2 + 1 s while
content remains and with the rate limiter's backoff, 5 ms doubling up to 60 s, after an error;
client-go's delaying queue keeps one waiting entry per item, the earliest). The controller's own
queue and `process` run on a fake clock, so every pass time is exact."""

from __future__ import annotations

import threading

from labkit.apiserver.client import ApiResource
from labkit.apiserver.server import EmbeddedServer
from labkit.controllers.decisions import DecisionLog
from labkit.controllers.informer import Informer
from labkit.controllers.namespace import DeletionError, NamespaceController, ResourcesRemaining
from labkit.controllers.workqueue import RateLimitingQueue
from support import wait_until


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Deleter:
    """Stands in for NamespacedResourcesDeleter: each pass raises what `outcome` says and may
    change the namespace (as the real deleter's status write does)."""

    def __init__(self, outcome, on_pass=None):
        self.outcome, self.on_pass, self.passes = outcome, on_pass, []

    def delete(self, name):
        self.passes.append(name)
        if self.on_pass:
            self.on_pass(len(self.passes))
        raise self.outcome(len(self.passes))


def run(controller: NamespaceController, clock: Clock, seconds: float, step: float = 0.001) -> list[float]:
    """Advance the fake clock, processing whatever the queue hands out; the pass times."""
    times = []
    while clock.now <= seconds:
        name = controller.queue.get(timeout=0)
        if name is None:
            clock.now = round(clock.now + step, 6)
            continue
        times.append(clock.now)
        controller.process(name)
    return times


def controller_on(clock: Clock, deleter: Deleter) -> NamespaceController:
    controller = NamespaceController(client=None, log=DecisionLog(None))
    controller.queue = controller.new_queue(clock)
    controller.deleter = deleter
    return controller


NS = {"metadata": {"name": "stuck", "deletionTimestamp": "2026-01-01T00:00:00Z"}}


def test_content_held_by_finalizers_is_looked_at_every_estimate_half_plus_one_seconds():
    clock = Clock()
    # the first pass writes the deletion conditions: a namespace update event, queued 5 s later
    deleter = Deleter(lambda n: ResourcesRemaining(15), on_pass=lambda n: n == 1 and controller._enqueue(NS))
    controller = controller_on(clock, deleter)
    controller._enqueue(NS)                               # the DELETE's update event at t=0
    times = run(controller, clock, 60, step=0.5)
    # 5 s after the DELETE; 5 s after the status write (sooner than 8 s: it replaces the waiting
    # entry); then every 15/2+1 = 8 s: 7.5 passes a minute
    assert times == [5, 10, 18, 26, 34, 42, 50, 58]


def test_pods_terminating_give_their_own_estimate():
    clock = Clock()
    controller = controller_on(clock, Deleter(lambda n: ResourcesRemaining(30)))
    controller._enqueue(NS)
    assert run(controller, clock, 60, step=0.5) == [5, 21, 37, 53]        # 30/2+1 = 16 s


def test_errors_back_off_exponentially_up_to_a_minute():
    clock = Clock()
    controller = controller_on(clock, Deleter(lambda n: DeletionError(["discovery failed"])))
    controller._enqueue(NS)
    step = 0.001
    times = run(controller, clock, 150, step=step)
    gaps = [b - a for a, b in zip(times, times[1:])]
    expected = [min(0.005 * 2 ** i, 60.0) for i in range(len(gaps))]
    # the clock advances in 1 ms steps: each pass comes within one step of its due time
    assert len(gaps) == 15 and all(abs(g - e) <= step * 1.5 for g, e in zip(gaps, expected)), gaps
    assert abs(gaps[-1] - 60.0) <= step * 1.5


def test_repeated_events_keep_one_waiting_entry():
    """delaying_queue.go insert: a later AddAfter of a waiting item never adds a second pass."""
    clock = Clock()
    queue = RateLimitingQueue("t", clock=clock)
    for delay in (5, 8, 6, 5):
        queue.add_after("ns", delay)
    queue.add_after("other", 7)
    clock.now = 10
    assert [queue.get(timeout=0), queue.get(timeout=0), queue.get(timeout=0)] == ["ns", "other", None]


def test_the_informer_resyncs_every_namespace_each_period(tmp_path):
    """--namespace-sync-period: the informer hands every cached namespace to the update handler
    once per period, so a Terminating one is queued again even without a change."""
    server = EmbeddedServer(tmp_path / "srv", controllers=[]).start()
    try:
        seen = []
        lock = threading.Lock()

        def on_update(old, new):
            with lock:
                seen.append((old["metadata"]["name"], old is new))

        informer = Informer(server.client(), ApiResource("", "v1", "namespaces", "Namespace", False, ()),
                            on_update=on_update, resync_period=0.2)
        informer.start()
        assert informer.wait_synced(10)
        assert wait_until(lambda: ("default", True) in seen, timeout=10)
        informer.stop()
    finally:
        server.stop()
