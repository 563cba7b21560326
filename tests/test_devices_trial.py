"""`labkit devices try` (labkit/devices/trial.py) waits for what each step is about and stops
waiting once it is there: a session that records every wait shows each one ended by its
condition, none run out for nothing (a fixed pause would be a wait whose condition never holds)."""

from __future__ import annotations

from types import SimpleNamespace

from labkit.devices import trial

RESOURCE = "example.com/widget"


class _Session:
    """What trial.run reads of a session, with a plugin that answers at once: each health change
    is one new list, a restart is answered by a registration and the list of before."""

    def __init__(self):
        self.healthy = {f"widget-{i}": "Healthy" for i in range(4)}
        self.messages = 1
        self.regs = [{"error": None, "kubelet": 1}]
        self.waits: list[tuple[float, bool]] = []
        self.exited = None
        self.kubelet = SimpleNamespace(restart=self._restart, directory=SimpleNamespace(iterdir=lambda: []),
                                       manager=SimpleNamespace(pod_devices={}, calls=[]), events=[])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _restart(self):
        self.regs.append({"error": None, "kubelet": 2})
        self.messages += 1

    def wait(self, condition, seconds):
        held = bool(condition())
        self.waits.append((seconds, held))
        return held

    wait_for_plugin = wait

    def lists(self, resource):
        return self.messages

    def registrations(self):
        return list(self.regs)

    def registrations_shown(self, first=0):
        return self.regs[first:]

    def devices(self, resource):
        return [{"ID": d, "health": h, "numa": [int(d[-1]) // 2]} for d, h in self.healthy.items()]

    def set_health(self, changes):
        self.healthy.update(changes)
        self.messages += 1

    def options(self, resource):
        return {}

    def node(self):
        n = sum(h == "Healthy" for h in self.healthy.values())
        return {"capacity": {RESOURCE: n}, "allocatable": {RESOURCE: n}}

    def plugin_log(self):
        return ""


def test_every_wait_ends_with_what_it_waits_for():
    s = _Session()
    steps = trial.run(s, RESOURCE, broken="widget-2", restart=True)
    assert [step["step"] for step in steps] == ["plugin started", "health file: widget-2: Unhealthy",
                                                "health file: widget-2: Healthy", "kubelet restarted",
                                                "after the restart"]
    assert steps[1]["node"]["capacity"][RESOURCE] == 3 and steps[2]["node"]["capacity"][RESOURCE] == 4
    assert steps[-1]["registered_again"] and steps[-1]["listed_again"]
    assert s.waits and all(held for _, held in s.waits), s.waits
