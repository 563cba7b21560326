"""What kubelet and the container runtime write into cgroups for a Pod (Kubernetes v1.34).

* pkg/kubelet/cm/helpers_linux.go: `MilliCPUToShares` (request -> cpu.shares, 2..262144),
  `MilliCPUToQuota` (limit -> CFS quota per 100 ms period, at least 1 ms; the period is 100000 us
  because the CustomCPUCFSQuotaPeriod gate is off), `ResourceConfigForPod` (the pod cgroup).
* pkg/kubelet/cm/cgroup_manager_linux.go `getCPUWeight`: cgroup v2 cpu.weight of kubelet's own
  cgroups (kubepods, QoS, pod) = 1 + (shares - 2) * 9999 / 262142. The runtime converts the
  container cgroups: runc before 1.3.2 and crun before 1.23 with the same line (Debian 12's and
  Ubuntu 24.04's runc), newer ones with a curve that maps 1024 shares to weight 100
  (`runc_weight_new`, shown for comparison; labkit's runtime writes the line).
* pkg/kubelet/cm/qos_container_manager_linux.go `setCPUCgroupConfig`: kubepods/besteffort gets
  2 shares, kubepods/burstable the shares of the summed cpu requests of its Pods.
* pkg/kubelet/cm/node_container_manager_linux.go: kubepods is capped at capacity minus
  system- and kube-reserved (the eviction threshold is not subtracted there).
* pkg/kubelet/kuberuntime/kuberuntime_container_linux.go `calculateLinuxResources`: per
  container shares from the request (from the limit when only a limit is set), quota from the
  limit (pod-level limit when the container has none), memory limit.
* pkg/kubelet/qos/policy.go `GetContainerOOMScoreAdjust`: the container's oom_score_adj.
* pkg/kubelet/kuberuntime/kuberuntime_container_linux.go `ConfigureNoSwap` (swapBehavior NoSwap,
  the v1.34 default), where the swap controller exists (`swapControllerAvailable`): cgroup v2
  memory.swap.max = 0 on every container; cgroup v1 memory.memsw.limit_in_bytes = the memory
  limit (no swap beyond it; a container without a memory limit gets none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labkit.pods import (BEST_EFFORT, BURSTABLE, GUARANTEED, Pod, aggregate_container_requests, pod_limits,
                         pod_requests, qos_class)

MIN_SHARES, MAX_SHARES = 2, 262144
SHARES_PER_CPU, MILLI_CPU_TO_CPU = 1024, 1000
QUOTA_PERIOD, MIN_QUOTA_PERIOD = 100000, 1000
GUARANTEED_OOM_SCORE_ADJ, BEST_EFFORT_OOM_SCORE_ADJ = -997, 1000


def milli_cpu_to_shares(milli: int) -> int:
    if milli == 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, milli * SHARES_PER_CPU // MILLI_CPU_TO_CPU))


def milli_cpu_to_quota(milli: int, period: int = QUOTA_PERIOD) -> int:
    if milli == 0:
        return 0
    return max(MIN_QUOTA_PERIOD, milli * period // MILLI_CPU_TO_CPU)


def shares_to_weight(shares: int) -> int:
    """getCPUWeight (kubelet) and runc/crun before 1.3.2/1.23."""
    if shares >= MAX_SHARES:
        return 10000
    return 1 + (shares - 2) * 9999 // 262142


def runc_weight_new(shares: int) -> int:
    """ConvertCPUSharesToCgroupV2Value in runc >= 1.3.2 / crun >= 1.23 (for comparison only)."""
    if shares == 0:
        return 0
    if shares <= 2:
        return 1
    if shares >= MAX_SHARES:
        return 10000
    log = math.log2(shares)
    return math.ceil(10 ** ((log * log + 125 * log) / 612.0 - 7.0 / 34.0))


def shares_to_milli_range(lo_shares: int, hi_shares: int | None = None) -> tuple[int, int]:
    """The cpu requests (millicores) MilliCPUToShares maps into [lo_shares, hi_shares]."""
    hi_shares = lo_shares if hi_shares is None else hi_shares
    lo = 0 if lo_shares <= MIN_SHARES else -(-lo_shares * MILLI_CPU_TO_CPU // SHARES_PER_CPU)
    hi = ((hi_shares + 1) * MILLI_CPU_TO_CPU - 1) // SHARES_PER_CPU
    return lo, hi


def weight_to_milli_range(weight: int) -> tuple[int, int]:
    """The cpu requests (millicores) whose shares getCPUWeight turns into `weight`, lowest and highest."""
    if not 1 <= weight <= 10000:
        raise ValueError(f"cpu.weight {weight} is outside 1..10000")
    lo_shares = MIN_SHARES + -(-(weight - 1) * 262142 // 9999)
    hi_shares = MIN_SHARES + -(-weight * 262142 // 9999) - 1 if weight < 10000 else MAX_SHARES
    return shares_to_milli_range(lo_shares, min(hi_shares, MAX_SHARES - 1) if weight < 10000 else hi_shares)


@dataclass
class CgroupSettings:
    """One cgroup's CPU and memory settings (None: left at the kernel's default)."""
    cpu_shares: int | None = None
    cpu_quota: int | None = None     # microseconds per period; -1 or None: no quota
    cpu_period: int | None = None
    memory_limit: int | None = None  # bytes; None: no limit
    no_swap: bool = False            # kubelet's NoSwap for a container (written where the swap controller exists)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def _limits_declared(pod: Pod) -> dict[str, bool]:
    """ResourceConfigForPod's ContainerFn over AggregateContainerLimits
    (k8s.io/component-helpers/resource/helpers.go): it sees each app container's limits, each
    sidecar's limits added to those of the sidecars before it, and each regular init container's
    limits added to those of the sidecars before it. A resource is declared when none of these is
    zero; pod-level limits declare it too."""
    declared = {"cpu": True, "memory": True}
    seen = [{name: q.value for name, q in c.limits.items()} for c in pod.containers]
    sidecars: dict = {}
    for c in pod.init_containers:
        own = {name: q.value for name, q in c.limits.items()}
        if c.sidecar:
            for name, value in own.items():
                sidecars[name] = sidecars.get(name, 0) + value
            seen.append(dict(sidecars))
        else:
            seen.append({name: own.get(name, 0) + sidecars.get(name, 0) for name in {*own, *sidecars}})
    for limits in seen:
        for resource in declared:
            if not limits.get(resource, 0):
                declared[resource] = False
    if pod.pod_level_set:
        for resource in declared:
            if (pod.pod_limits or {}).get(resource) is not None and pod.pod_limits[resource].value != 0:
                declared[resource] = True
    return declared


def pod_cgroup(pod: Pod, enforce_cpu_limits: bool = True) -> CgroupSettings:
    """ResourceConfigForPod (pkg/kubelet/cm/helpers_linux.go; MemoryQoS off, the v1.34 default)."""
    declared = _limits_declared(pod)
    requests = pod_requests(pod)
    limits = pod_limits(pod)
    cpu_request = requests["cpu"].milli_value() if "cpu" in requests else 0
    cpu_limit = limits["cpu"].milli_value() if "cpu" in limits else 0
    memory_limit = limits["memory"].value_int() if "memory" in limits else 0
    shares = milli_cpu_to_shares(cpu_request)
    quota = milli_cpu_to_quota(cpu_limit) if enforce_cpu_limits else -1
    qos = qos_class(pod)
    if qos == GUARANTEED:
        return CgroupSettings(shares, quota, QUOTA_PERIOD, memory_limit)
    if qos == BURSTABLE:
        out = CgroupSettings(shares)
        if declared["cpu"]:
            out.cpu_quota, out.cpu_period = quota, QUOTA_PERIOD
        if declared["memory"]:
            out.memory_limit = memory_limit
        return out
    return CgroupSettings(MIN_SHARES)


def container_cgroup(pod: Pod, container, enforce_cpu_limits: bool = True) -> CgroupSettings:
    """calculateLinuxResources, with the pod-level limits standing in for missing container ones."""
    request = container.requests.get("cpu")
    limit = container.limits.get("cpu")
    memory = container.limits.get("memory")
    if pod.pod_level_set and pod.pod_limits:
        limit = limit if limit is not None and limit.value else pod.pod_limits.get("cpu", limit)
        memory = memory if memory is not None and memory.value else pod.pod_limits.get("memory", memory)
    if request is None and limit is not None:
        shares = milli_cpu_to_shares(limit.milli_value())
    else:
        shares = milli_cpu_to_shares(request.milli_value() if request is not None else 0)
    # kuberuntime_container_linux.go configureContainerSwapResources: memorySwap.swapBehavior
    # defaults to NoSwap in v1.34 (KubeletConfiguration), so every container gets
    # swapConfigurationHelper.ConfigureNoSwap where the swap controller exists
    out = CgroupSettings(shares, no_swap=True)
    memory_bytes = memory.value_int() if memory is not None else 0
    if memory_bytes:
        out.memory_limit = memory_bytes
    if enforce_cpu_limits:
        out.cpu_quota = milli_cpu_to_quota(limit.milli_value() if limit is not None else 0)
        out.cpu_period = QUOTA_PERIOD
    return out


def burstable_shares(pods: list[Pod]) -> int:
    """setCPUCgroupConfig: the shares of kubepods/burstable."""
    total = sum(pod_requests(p)["cpu"].milli_value() for p in pods
                if qos_class(p) == BURSTABLE and "cpu" in pod_requests(p))
    return milli_cpu_to_shares(total)


def _effective_memory_requests(pod: Pod) -> dict[str, int]:
    """Each container's memory request as policy.go counts it. With pod-level requests set
    (resourcehelper.IsPodLevelRequestsSet), remainingPodMemReqPerContainer (pkg/kubelet/qos/helpers.go):
    the pod's memory request minus the containers' *aggregate* memory request
    (AggregateContainerRequests: the larger of app+sidecar sum and the largest init container with
    the sidecars before it), divided by the number of containers, init ones included (Go integer
    division, towards zero), is added to every container's own request."""
    containers = pod.init_containers + pod.containers
    requests = {c.name: c.request("memory").value_int() for c in containers}
    pod_memory = (pod.pod_requests or {}).get("memory")
    if pod.pod_level_set and pod_memory is not None and pod_memory.value != 0:
        aggregate = aggregate_container_requests(pod).get("memory")
        remaining = pod_memory.value_int() - (aggregate.value_int() if aggregate is not None else 0)
        share = abs(remaining) // len(containers) * (1 if remaining >= 0 else -1)
        for name in requests:
            requests[name] += share
    return requests


def _burstable_adj(request: int, memory_capacity: int) -> int:
    return 1000 - (1000 * request) // memory_capacity


def oom_score_adj(pod: Pod, container, memory_capacity: int) -> int:
    """GetContainerOOMScoreAdjust (v1.34: sidecars, pod-level memory requests)."""
    if pod.is_node_critical():
        return GUARANTEED_OOM_SCORE_ADJ
    qos = qos_class(pod)
    if qos == GUARANTEED:
        return GUARANTEED_OOM_SCORE_ADJ
    if qos == BEST_EFFORT:
        return BEST_EFFORT_OOM_SCORE_ADJ
    requests = _effective_memory_requests(pod)
    adj = _burstable_adj(requests[container.name], memory_capacity)
    if container.sidecar and pod.containers:
        # a sidecar never goes before the app containers it serves: at most the score of the
        # regular container with the smallest request
        smallest = min(requests[c.name] for c in pod.containers)
        adj = min(adj, _burstable_adj(smallest, memory_capacity))
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ:
        return 1000 + GUARANTEED_OOM_SCORE_ADJ
    if adj == BEST_EFFORT_OOM_SCORE_ADJ:
        return adj - 1
    return adj
