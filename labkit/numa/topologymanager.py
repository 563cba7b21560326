"""The Topology Manager: policy options, NewManager's checks, scopes and Pod admission.

Follows kubernetes/kubernetes `pkg/kubelet/cm/topologymanager/` (v1.34; the policies, scopes and
merge are v1.32's, max-allowable-numa-nodes is still beta in v1.34, GA in v1.35):
* `policy_options.go` NewPolicyOptions: prefer-closest-numa-nodes (bool; GA), max-allowable-numa-nodes
  (int >= 8, default 8; beta, behind TopologyManagerPolicyBetaOptions which is on by default);
* `topology_manager.go` NewManager: policy none short-circuits to the none scope; otherwise the
  options, NUMA distances (needed only with prefer-closest-numa-nodes), the NUMA node limit, the
  policy and the scope are checked in that order, with kubelet's messages;
* `scope_container.go` (default): per init and app container in order, ask every hint provider,
  merge, reject with TopologyAffinityError or store the hint and let every provider Allocate;
* `scope_pod.go`: one merge over the providers' pod-level hints, the same hint for every container;
* `scope_none.go` / `scope.go` admitPolicyNone: no hints, every provider just Allocates.

Hint providers are registered in kubelet's order: Device Manager, CPU Manager, Memory Manager.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol

from labkit.numa.admit_result import AdmitResult, TopologyAffinityError, pod_admit_result
from labkit.numa.machine import Machine
from labkit.numa.merge import POLICIES, POLICY_NONE, NUMAInfo, Policy, TopologyHint, new_numa_info
from labkit.numa.pods import Container, Pod

PREFER_CLOSEST_NUMA_NODES = "prefer-closest-numa-nodes"
MAX_ALLOWABLE_NUMA_NODES = "max-allowable-numa-nodes"
DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8
SCOPE_CONTAINER = "container"
SCOPE_POD = "pod"
SCOPES = (SCOPE_CONTAINER, SCOPE_POD)
_BETA_OPTIONS = {MAX_ALLOWABLE_NUMA_NODES}
_STABLE_OPTIONS = {PREFER_CLOSEST_NUMA_NODES}


class TopologyManagerError(Exception):
    """NewManager's errors, with kubelet's messages."""


class HintProvider(Protocol):
    def get_topology_hints(self, pod: Pod, container: Container): ...
    def get_pod_topology_hints(self, pod: Pod): ...
    def allocate(self, pod: Pod, container: Container) -> None: ...


@dataclass(frozen=True)
class PolicyOptions:
    prefer_closest_numa: bool = False
    max_allowable_numa_nodes: int = DEFAULT_MAX_ALLOWABLE_NUMA_NODES

    @classmethod
    def parse(cls, options: Mapping[str, str] | None, beta_enabled: bool = True) -> "PolicyOptions":
        prefer_closest, max_nodes = False, DEFAULT_MAX_ALLOWABLE_NUMA_NODES
        for name in sorted(options or {}):
            value = str((options or {})[name])
            if name not in _BETA_OPTIONS | _STABLE_OPTIONS:
                raise TopologyManagerError(f'unknown Topology Manager Policy option: "{name}"')
            if name in _BETA_OPTIONS and not beta_enabled:
                raise TopologyManagerError(f'Topology Manager Policy Beta-level Options not enabled, but option "{name}" provided')
            if name == PREFER_CLOSEST_NUMA_NODES:
                from labkit.numa.cpumanager import parse_bool
                try:
                    prefer_closest = parse_bool(value)
                except ValueError as exc:
                    raise TopologyManagerError(f'bad value for option "{name}": {exc}') from None
            else:
                try:
                    max_nodes = int(value, 10)
                except ValueError:
                    raise TopologyManagerError(f'unable to convert policy option to integer "{name}": strconv.Atoi: '
                                               f'parsing "{value}": invalid syntax') from None
                if max_nodes < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:
                    raise TopologyManagerError(f'the minimum value of "{name}" should not be less than '
                                               f'{DEFAULT_MAX_ALLOWABLE_NUMA_NODES}')
        return cls(prefer_closest, max_nodes)


@dataclass
class ContainerDecision:
    """What the Topology Manager saw and decided for one container (or, in pod scope, the Pod)."""

    container: str
    hints: list = field(default_factory=list)   # per provider: None | {resource: None | [TopologyHint]}
    best: TopologyHint | None = None
    admit: bool = True


@dataclass
class PodDecision:
    result: AdmitResult
    decisions: list[ContainerDecision]


class TopologyManager:
    """NewManager + the scope it selects."""

    def __init__(self, machine: Machine, policy_name: str, scope_name: str = SCOPE_CONTAINER,
                 options: Mapping[str, str] | None = None, beta_options_enabled: bool = True):
        self.providers: list[HintProvider] = []
        self.hints: dict[str, dict[str, TopologyHint]] = {}
        self.policy_name = policy_name
        self.scope_name = "none" if policy_name == POLICY_NONE else scope_name
        if policy_name == POLICY_NONE:
            self.options = PolicyOptions()
            self.policy = Policy(POLICY_NONE, NUMAInfo(machine.node_ids))
            return
        self.options = PolicyOptions.parse(options, beta_options_enabled)
        try:
            numa_info = new_numa_info([(node.node_id, node.distances) for node in machine.nodes],
                                      self.options.prefer_closest_numa)
        except ValueError as exc:
            raise TopologyManagerError(f"cannot discover NUMA topology: {exc}") from None
        if len(numa_info.nodes) > self.options.max_allowable_numa_nodes:
            raise TopologyManagerError(f"unsupported on machines with more than "
                                       f"{self.options.max_allowable_numa_nodes} NUMA Nodes")
        if policy_name not in POLICIES:
            raise TopologyManagerError(f'unknown policy: "{policy_name}"')
        if scope_name not in SCOPES:
            raise TopologyManagerError(f'unknown scope: "{scope_name}"')
        self.policy = Policy(policy_name, numa_info, self.options.prefer_closest_numa)

    def add_hint_provider(self, provider: HintProvider) -> None:
        self.providers.append(provider)

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return self.hints.get(pod_uid, {}).get(container, TopologyHint(None, False))

    def forget_pod(self, pod_uid: str) -> None:
        self.hints.pop(pod_uid, None)

    def admit(self, pod: Pod) -> PodDecision:
        if self.scope_name == "none":
            return self._admit_policy_none(pod)
        if self.scope_name == SCOPE_POD:
            return self._admit_pod_scope(pod)
        return self._admit_container_scope(pod)

    def _allocate(self, pod: Pod, container: Container) -> Exception | None:
        for provider in self.providers:
            try:
                provider.allocate(pod, container)
            except Exception as exc:  # every provider error becomes an admission result
                return exc
        return None

    def _admit_policy_none(self, pod: Pod) -> PodDecision:
        decisions = []
        for container in pod.all_containers():
            decisions.append(ContainerDecision(container.name, [], None, True))
            error = self._allocate(pod, container)
            if error is not None:
                return PodDecision(pod_admit_result(error), decisions)
        return PodDecision(pod_admit_result(None), decisions)

    def _admit_container_scope(self, pod: Pod) -> PodDecision:
        decisions = []
        for container in pod.all_containers():
            provided = [p.get_topology_hints(pod, container) for p in self.providers]
            merged = self.policy.merge(provided)
            decisions.append(ContainerDecision(container.name, provided, merged.hint, merged.admit))
            if not merged.admit:
                return PodDecision(pod_admit_result(TopologyAffinityError()), decisions)
            self.hints.setdefault(pod.uid, {})[container.name] = merged.hint
            error = self._allocate(pod, container)
            if error is not None:
                return PodDecision(pod_admit_result(error), decisions)
        return PodDecision(pod_admit_result(None), decisions)

    def _admit_pod_scope(self, pod: Pod) -> PodDecision:
        provided = [p.get_pod_topology_hints(pod) for p in self.providers]
        merged = self.policy.merge(provided)
        decision = ContainerDecision("", provided, merged.hint, merged.admit)
        if not merged.admit:
            return PodDecision(pod_admit_result(TopologyAffinityError()), [decision])
        for container in pod.all_containers():
            self.hints.setdefault(pod.uid, {})[container.name] = merged.hint
            error = self._allocate(pod, container)
            if error is not None:
                return PodDecision(pod_admit_result(error), [decision])
        return PodDecision(pod_admit_result(None), [decision])
