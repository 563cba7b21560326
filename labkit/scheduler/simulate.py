"""Scheduling many Pods one after another on a generated cluster, as the scheduler's cache sees
it (each bound Pod is assumed on its node before the next cycle): the throughput figure of
`scripts/bench scheduler`, and a way to watch the default profile spread or pack a workload."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from labkit.scheduler import framework as fw
from labkit.scheduler.objects import Node, NodeInfo, Pod
from labkit.scheduler.profiles import make_profile


@dataclass
class Simulation:
    nodes: int
    pods: int
    bound: int
    unschedulable: int
    seconds: float

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds else 0.0


def cluster(nodes: int, zones: int = 3) -> list[NodeInfo]:
    return [NodeInfo(Node({"name": f"node-{i:04d}",
                           "labels": {"topology.kubernetes.io/zone": f"zone-{i % zones}",
                                      "kubernetes.io/hostname": f"node-{i:04d}"},
                           "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}))
            for i in range(nodes)]


def workload(pods: int) -> list[Pod]:
    """Pods of a few shapes, as a Deployment rollout would bring them."""
    shapes = [{"cpu": "100m", "memory": "128Mi"}, {"cpu": "500m", "memory": "512Mi"}, {"cpu": "1", "memory": "1Gi"}]
    return [Pod({"name": f"pod-{i:05d}", "namespace": "default", "labels": {"app": f"app-{i % 10}"},
                 "containers": [{"name": "c", "image": "registry.example/app:1", "requests": shapes[i % len(shapes)]}]})
            for i in range(pods)]


def run(nodes: int, pods: int, seed: int = 0, config="default") -> Simulation:
    profile = make_profile(config)
    infos = cluster(nodes)
    by_name = {n.name: n for n in infos}
    rng = random.Random(seed)
    bound = unschedulable = 0
    start_index = 0
    started = time.perf_counter()
    for pod in workload(pods):
        cycle = fw.schedule(profile, infos, pod, rng=rng, start=start_index)
        start_index = (start_index + len(cycle.evaluated)) % len(infos)      # nextStartNodeIndex
        if cycle.chosen is None:
            unschedulable += 1
            continue
        pod.spec["nodeName"] = cycle.chosen
        by_name[cycle.chosen].add(pod)
        bound += 1
    return Simulation(nodes, pods, bound, unschedulable, time.perf_counter() - started)
