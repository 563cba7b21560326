"""NUMA figures: the Topology Manager merge at its worst, and admitting 100 Pods on a big machine.

* merge: 8 NUMA nodes, 4 providers that each offer every possible mask (255 hints each, a cross
  product of 255^4 > 4 billion permutations kubelet would enumerate); once with realistic
  preferred flags (single-node masks preferred) and once with no preferred hint at all, which makes
  the merger rank non-preferred masks. Target: under 50 ms.
* admission: 100 Pods (90 Guaranteed with 2 CPUs and 2Gi each, 10 Burstable) on the 4-socket,
  4-way-SMT fixture with the static CPU Manager, the Static Memory Manager and the restricted
  Topology Manager policy, including starting the managers. Target: under 1 s.
"""

from __future__ import annotations

import statistics
import time

from figures import Figure

from labkit.numa import bitmask
from labkit.numa.admission import Node
from labkit.numa.config import config_from_dict
from labkit.numa.machine import load_machine
from labkit.numa.merge import NUMAInfo, Policy, TopologyHint
from labkit.numa.pods import pod_from_dict

REPEATS = 5


def _median_ms(run) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 2)


def _merge_figures() -> list[Figure]:
    nodes = list(range(8))
    masks = list(bitmask.iterate_bitmasks(nodes))
    figures = []
    for label, preferred in (("single-node masks preferred", lambda m: bitmask.count(m) == 1),
                             ("no hint preferred", lambda m: False)):
        providers = [{f"resource{i}": [TopologyHint(m, preferred(m)) for m in masks]} for i in range(4)]
        policy = Policy("best-effort", NUMAInfo(nodes))
        ms = _median_ms(lambda: policy.merge(providers))
        figures.append(Figure("numa", f"merge 8 NUMA nodes x 4 providers x 255 hints ({label}), median of {REPEATS}",
                              ms, "ms", "< 50 ms", ms < 50))
    return figures


def _pods() -> list:
    pods = []
    for i in range(100):
        if i % 10 == 9:
            resources = {"requests": {"cpu": "500m", "memory": "1Gi"}}
        else:
            resources = {"limits": {"cpu": "2", "memory": "2Gi"}}
        pods.append(pod_from_dict({"kind": "Pod", "metadata": {"name": f"pod-{i}"},
                                   "spec": {"containers": [{"name": "app", "resources": resources}]}}))
    return pods


def _admission_figure() -> Figure:
    machine = load_machine("quad-socket-four-way-ht")
    config = config_from_dict({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,1,2,3", "topologyManagerPolicy": "restricted",
        "memoryManagerPolicy": "Static", "systemReserved": {"memory": "924Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]})
    pods = _pods()
    admitted = []

    def run():
        results = Node(machine, config).admit_all(pods)
        admitted[:] = [r for r in results if r.admitted]

    ms = _median_ms(run)
    return Figure("numa", f"admit 100 Pods on quad-socket-four-way-ht (288 CPUs), median of {REPEATS}",
                  round(ms / 1000, 3), "s", "< 1 s", ms < 1000, note=f"{len(admitted)} admitted")


def run() -> list[Figure]:
    return _merge_figures() + [_admission_figure()]
