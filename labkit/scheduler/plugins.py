"""The default profile's plugins, each at the extension points it implements in v1.34.1. Upstream:
pkg/scheduler/framework/plugins/<plugin>/ (named beside each class). Reason strings are upstream's
constants; scores are 0..100 (MaxNodeScore).

A plugin here is a class with any of: pre_filter(cycle, pod) -> (Status, node names or None),
filter(cycle, pod, node) -> Status, post_filter(cycle, pod) -> (nominated node or None, Status),
pre_score(cycle, pod, nodes) -> Status, score(cycle, pod, node) -> int,
normalize(cycle, pod, scores) (in place).
"""

from __future__ import annotations

import math

from labkit.scheduler import framework as fw
from labkit.scheduler.preemption import DefaultPreemption
from labkit.scheduler.objects import (CPU, EPHEMERAL, MEMORY, PODS, UNSCHEDULABLE_TAINT, NodeInfo, Pod,
                                      label_selector_matches, node_selector_term_matches, tolerates, untolerated)

# -- NodeUnschedulable, NodeName ------------------------------------------------------------------


class NodeUnschedulable:
    """nodeunschedulable/node_unschedulable.go Filter: a cordoned node (spec.unschedulable)
    unless the pod tolerates node.kubernetes.io/unschedulable:NoSchedule."""
    name = "NodeUnschedulable"
    REASON = "node(s) were unschedulable"

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        if not node.node.unschedulable:
            return fw.OK
        taint = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
        if any(tolerates(t, taint) for t in pod.tolerations):
            return fw.OK
        return fw.status(fw.UNRESOLVABLE, self.REASON)


class NodeName:
    """nodename/node_name.go Filter: spec.nodeName, when set, names the only node that fits."""
    name = "NodeName"
    REASON = "node(s) didn't match the requested node name"

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        if pod.node_name and pod.node_name != node.name:
            return fw.status(fw.UNRESOLVABLE, self.REASON)
        return fw.OK


# -- TaintToleration ------------------------------------------------------------------------------


class TaintToleration:
    """tainttoleration/taint_toleration.go. Filter: the first NoSchedule or NoExecute taint the pod
    does not tolerate; v1.34.1 names it in the reason (`{key: value}`; PR #135023 dropped that
    from v1.34.2 on). Score: how many PreferNoSchedule taints the pod does not tolerate (only
    tolerations with effect PreferNoSchedule or none count), normalised in reverse."""
    name = "TaintToleration"

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        taint = untolerated(node.node.taints, pod.tolerations, ("NoSchedule", "NoExecute"))
        if taint is None:
            return fw.OK
        return fw.status(fw.UNRESOLVABLE, f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}")

    def pre_score(self, cycle, pod, nodes) -> fw.Status:
        cycle.state[self.name] = [t for t in pod.tolerations if (t.get("effect") or "") in ("", "PreferNoSchedule")]
        return fw.OK

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        tolerations = cycle.state[self.name]
        return sum(1 for taint in node.node.taints if taint.get("effect") == "PreferNoSchedule"
                   and not any(tolerates(t, taint) for t in tolerations))

    def normalize(self, cycle, pod, scores: dict) -> None:
        fw.default_normalize(scores, reverse=True)


# -- NodeAffinity ---------------------------------------------------------------------------------


def _required_terms(pod: Pod) -> list[dict] | None:
    affinity = ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if required is None else (required.get("nodeSelectorTerms") or [])


def _preferred_terms(pod: Pod) -> list[dict]:
    affinity = ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {})
    return affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []


def required_node_affinity_matches(pod: Pod, node) -> bool:
    """component-helpers nodeaffinity.GetRequiredNodeAffinity(pod).Match: every nodeSelector label
    and, when given, at least one required term (terms ORed)."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in (pod.spec.get("nodeSelector") or {}).items()):
        return False
    terms = _required_terms(pod)
    return terms is None or any(node_selector_term_matches(t, node) for t in terms)


class NodeAffinity:
    """nodeaffinity/node_affinity.go. PreFilter: required terms that all name nodes by
    matchFields metadata.name In restrict the nodes to those names. Filter: nodeSelector and the
    required terms. Score: the sum of the weights of the preferred terms the node matches,
    normalised (not reversed); PreScore skips pods without preferred terms."""
    name = "NodeAffinity"
    REASON = "node(s) didn't match Pod's node affinity/selector"

    def pre_filter(self, cycle, pod: Pod):
        terms = _required_terms(pod)
        if not pod.spec.get("nodeSelector") and terms is None:
            return fw.Status(fw.SKIP), None
        names: set | None = None
        if terms:
            for term in terms:
                fields = [f for f in term.get("matchFields") or []
                          if f.get("key") == "metadata.name" and f.get("operator") == "In"]
                if not fields or term.get("matchExpressions"):
                    return fw.OK, None        # a term that is not only node names: no restriction
                term_names = set(fields[0].get("values") or [])
                for f in fields[1:]:
                    term_names &= set(f.get("values") or [])
                names = term_names if names is None else names | term_names
        if names is not None and not names:
            return fw.status(fw.UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector"), None
        return fw.OK, names

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        return fw.OK if required_node_affinity_matches(pod, node.node) else fw.status(fw.UNRESOLVABLE, self.REASON)

    def pre_score(self, cycle, pod, nodes) -> fw.Status:
        return fw.OK if _preferred_terms(pod) else fw.Status(fw.SKIP)

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        return sum(int(t.get("weight") or 0) for t in _preferred_terms(pod)
                   if node_selector_term_matches(t.get("preference") or {}, node.node))

    def normalize(self, cycle, pod, scores: dict) -> None:
        fw.default_normalize(scores)


# -- NodePorts ------------------------------------------------------------------------------------


class NodePorts:
    """nodeports/node_ports.go: a host port (protocol, hostIP; 0.0.0.0 overlaps every IP) that a
    Pod on the node already uses."""
    name = "NodePorts"
    REASON = "node(s) didn't have free ports for the requested pod ports"

    def pre_filter(self, cycle, pod: Pod):
        return (fw.OK if pod.host_ports() else fw.Status(fw.SKIP)), None

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        used = [port for other in node.pods for port in other.host_ports()]
        for ip, proto, port in pod.host_ports():
            for uip, uproto, uport in used:
                if port == uport and proto == uproto and (ip == uip or "0.0.0.0" in (ip, uip)):
                    return fw.status(fw.UNSCHEDULABLE, self.REASON)
        return fw.OK


# -- NodeResourcesFit -----------------------------------------------------------------------------


def _is_scalar(name: str) -> bool:
    return name not in (CPU, MEMORY, EPHEMERAL, PODS)


class NodeResourcesFit:
    """noderesources/fit.go Filter (fitsRequest): `Too many pods`, then one `Insufficient <r>` for
    each of cpu, memory, ephemeral-storage and every requested extended resource that does not
    fit (actual requests; a resource the node lacks has 0). Score: the scoring strategy over the
    configured resources (resource_allocation.go; least_allocated.go, most_allocated.go,
    requested_to_capacity_ratio.go), cpu and memory counted with non-zero defaults."""
    name = "NodeResourcesFit"

    def __init__(self, args: dict | None = None):
        args = args or {}
        strategy = args.get("scoringStrategy") or {}
        self.strategy = strategy.get("type") or "LeastAllocated"
        self.resources = [(r["name"], int(r.get("weight") or 1))
                          for r in (strategy.get("resources") or [{"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1}])]
        shape = ((strategy.get("requestedToCapacityRatio") or {}).get("shape")) or []
        self.shape = [(int(p["utilization"]), int(p["score"]) * 10) for p in shape]   # score 0..10 scaled by 10
        self.ignored = set(args.get("ignoredResources") or [])
        self.ignored_groups = set(args.get("ignoredResourceGroups") or [])

    def pre_filter(self, cycle, pod: Pod):
        cycle.state[self.name] = pod.requests()
        return fw.OK, None

    def insufficient(self, request: dict, node: NodeInfo) -> list[str]:
        allocatable, used = node.node.allocatable, node.requested()
        reasons = []
        if len(node.pods) + 1 > allocatable.get(PODS, 0):
            reasons.append("Too many pods")
        if not any(v for v in request.values()):
            return reasons
        for name in (CPU, MEMORY, EPHEMERAL):
            want = request.get(name, 0)
            if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
                reasons.append(f"Insufficient {name}")
        for name in sorted(n for n in request if _is_scalar(n)):
            if name in self.ignored or name.split("/", 1)[0] in self.ignored_groups:
                continue
            want = request[name]
            if want > 0 and want > allocatable.get(name, 0) - used.get(name, 0):
                reasons.append(f"Insufficient {name}")
        return reasons

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        request = cycle.state.get(self.name) or pod.requests()
        reasons = self.insufficient(request, node)
        return fw.status(fw.UNSCHEDULABLE, *reasons) if reasons else fw.OK

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        use_requested = False            # LeastAllocated, MostAllocated, RequestedToCapacityRatio alike
        return allocation_score(pod, node, self.resources, use_requested, self._resource_score)

    def _resource_score(self, requested: int, allocatable: int) -> int:
        if self.strategy == "MostAllocated":
            return requested * fw.MAX_NODE_SCORE // allocatable if requested <= allocatable else fw.MAX_NODE_SCORE
        if self.strategy == "RequestedToCapacityRatio":
            utilization = min(requested * fw.MAX_NODE_SCORE // allocatable, fw.MAX_NODE_SCORE)
            return shape_score(self.shape, utilization)
        return (allocatable - requested) * fw.MAX_NODE_SCORE // allocatable if requested <= allocatable else 0


def shape_score(shape: list[tuple[int, int]], utilization: int) -> int:
    """helper.BuildBrokenLinearFunction: the shape's points, linear (integer) between them."""
    if not shape:
        return 0
    for i, (x, y) in enumerate(shape):
        if utilization <= x:
            if i == 0:
                return y
            x0, y0 = shape[i - 1]
            return y0 + (y - y0) * (utilization - x0) // (x - x0)
    return shape[-1][1]


def allocation_score(pod: Pod, node: NodeInfo, resources, use_requested: bool, resource_score) -> int:
    """resource_allocation.go score: per configured resource, the node's requests plus the pod's
    (non-zero for cpu and memory unless `use_requested`) against allocatable; a resource the node
    has none of, or an extended resource the pod does not ask for, is left out; the weighted
    average, integer."""
    pod_requests = pod.requests(non_zero=not use_requested)
    node_requests = node.requested(non_zero=not use_requested)
    allocatable = node.node.allocatable
    total = weights = 0
    for name, weight in resources:
        alloc = allocatable.get(name, 0)
        want = pod_requests.get(name, 0)
        if alloc == 0 or (_is_scalar(name) and want == 0):
            continue
        total += resource_score(node_requests.get(name, 0) + want, alloc) * weight
        weights += weight
    return total // weights if weights else 0


class NodeResourcesBalancedAllocation:
    """noderesources/balanced_allocation.go: 1 - the standard deviation of the fractions
    requested/allocatable (capped at 1) of cpu and memory (actual requests), times 100;
    PreScore skips a pod that requests none of them."""
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: dict | None = None):
        self.resources = [(r["name"], int(r.get("weight") or 1))
                          for r in ((args or {}).get("resources") or [{"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1}])]

    def pre_score(self, cycle, pod: Pod, nodes) -> fw.Status:
        request = pod.requests()
        return fw.OK if any(request.get(name, 0) for name, _w in self.resources) else fw.Status(fw.SKIP)

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        pod_requests, node_requests = pod.requests(), node.requested()
        allocatable = node.node.allocatable
        fractions = []
        for name, _weight in self.resources:
            alloc = allocatable.get(name, 0)
            want = pod_requests.get(name, 0)
            if alloc == 0 or (_is_scalar(name) and want == 0):
                continue
            fractions.append(min((node_requests.get(name, 0) + want) / alloc, 1.0))
        if len(fractions) == 2:
            std = abs((fractions[0] - fractions[1]) / 2)
        elif len(fractions) > 2:
            mean = sum(fractions) / len(fractions)
            std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
        else:
            std = 0.0
        return int((1 - std) * fw.MAX_NODE_SCORE)


# -- PodTopologySpread ----------------------------------------------------------------------------

SPREAD_REASON = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


# podtopologyspread/plugin.go systemDefaultConstraints: what a Pod without constraints of its own
# is spread by when the plugin's args have defaultingType System (v1 defaults.go
# SetDefaults_PodTopologySpreadArgs: the default), both ScheduleAnyway: they only score
SYSTEM_DEFAULT_CONSTRAINTS = (
    {"topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 3},
    {"topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "maxSkew": 5},
)
HOSTNAME_KEY = "kubernetes.io/hostname"
# the kinds whose selectors make a Pod's default selector (helper/spread.go DefaultSelector), as
# Cycle.workloads holds them: resource -> objects
WORKLOAD_RESOURCES = ("services", "replicationcontrollers", "replicasets", "statefulsets")


def _selector_requirements(selector: dict) -> list[dict]:
    """A metav1.LabelSelector as a list of requirements (matchLabels as `key In (value)`)."""
    return [{"key": k, "operator": "In", "values": [v]} for k, v in sorted((selector.get("matchLabels") or {}).items())] \
        + list(selector.get("matchExpressions") or [])


def default_selector(pod: Pod, workloads: dict | None) -> dict:
    """helper/spread.go DefaultSelector: the selectors of the Services of the Pod's namespace that
    select it (a Service without a selector selects nothing), merged; then, when the Pod's
    controller (the ownerReference with controller true) is a ReplicationController, its selector
    merged in too, or when it is a ReplicaSet or a StatefulSet that exists, its selector's
    requirements added. {} (empty: no default constraints) for a Pod none of them select."""
    workloads = workloads or {}
    labels: dict = {}
    for service in workloads.get("services") or []:
        meta, spec = service.get("metadata") or {}, service.get("spec") or {}
        chosen = spec.get("selector")
        if meta.get("namespace") != pod.namespace or chosen is None:
            continue
        if all(pod.labels.get(k) == v for k, v in chosen.items()):
            labels.update(chosen)
    expressions: list[dict] = []
    owner = next((r for r in pod.meta.get("ownerReferences") or [] if r.get("controller")), None)
    kinds = {("v1", "ReplicationController"): "replicationcontrollers", ("apps/v1", "ReplicaSet"): "replicasets",
             ("apps/v1", "StatefulSet"): "statefulsets"}
    resource = kinds.get(((owner or {}).get("apiVersion"), (owner or {}).get("kind")))
    if resource:
        found = next((o for o in workloads.get(resource) or []
                      if (o.get("metadata") or {}).get("name") == owner.get("name")
                      and (o.get("metadata") or {}).get("namespace") == pod.namespace), None)
        chosen = ((found or {}).get("spec") or {}).get("selector")
        if chosen is not None and resource == "replicationcontrollers":
            labels.update(chosen)
        elif chosen is not None:
            expressions = _selector_requirements(chosen)
    selector: dict = {}
    if labels:
        selector["matchLabels"] = labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


def _constraints(plugin, cycle, pod: Pod, mode: str) -> list[dict]:
    """The Pod's constraints of this whenUnsatisfiable (filterTopologySpreadConstraints); for a Pod
    with none, the plugin's default constraints of this mode with the Pod's default selector
    (common.go buildDefaultConstraints), none when that selector is empty."""
    own = pod.spec.get("topologySpreadConstraints") or []
    if own:
        return [c for c in own if c.get("whenUnsatisfiable", "DoNotSchedule") == mode]
    defaults = [c for c in plugin.default_constraints if c.get("whenUnsatisfiable", "DoNotSchedule") == mode]
    if not defaults:
        return []
    selector = default_selector(pod, getattr(cycle, "workloads", None))
    if not selector:
        return []
    # the default selector replaces whatever selector the constraint had (matchLabelKeys included)
    return [dict({k: v for k, v in c.items() if k not in ("labelSelector", "matchLabelKeys")},
                 labelSelector=selector) for c in defaults]


def _selector_of(pod: Pod, c: dict) -> dict | None:
    """The constraint's labelSelector, with matchLabelKeys folded in as `key In (pod's value)`;
    None for a constraint without one (metav1.LabelSelectorAsSelector(nil) is labels.Nothing():
    it matches no Pod, not even the incoming one)."""
    if c.get("labelSelector") is None:
        return None
    selector = dict(c["labelSelector"])
    keys = [k for k in c.get("matchLabelKeys") or [] if k in pod.labels]
    if keys:
        selector["matchExpressions"] = list(selector.get("matchExpressions") or []) + \
            [{"key": k, "operator": "In", "values": [pod.labels[k]]} for k in keys]
    return selector


def _eligible(pod: Pod, c: dict, node: NodeInfo) -> bool:
    """nodeAffinityPolicy Honor (default): the node must match the pod's required affinity;
    nodeTaintsPolicy Ignore (default): taints do not matter; Honor: tolerated NoSchedule/NoExecute."""
    if c.get("nodeAffinityPolicy", "Honor") == "Honor" and not required_node_affinity_matches(pod, node.node):
        return False
    if c.get("nodeTaintsPolicy", "Ignore") == "Honor" and \
            untolerated(node.node.taints, pod.tolerations, ("NoSchedule", "NoExecute")):
        return False
    return True


def _count(pod: Pod, c: dict, node: NodeInfo) -> int:
    """common.go countPodsMatchSelector: the Pods of the node in the incoming Pod's namespace that
    the selector matches, terminating ones aside; an empty selector ({}: labels.Everything())
    counts none, though the incoming Pod still matches it itself (Filter's selfMatchNum)."""
    selector = _selector_of(pod, c)
    if selector is None or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return 0
    return sum(1 for p in node.pods if p.namespace == pod.namespace and label_selector_matches(selector, p.labels)
               and not (p.obj.get("metadata") or {}).get("deletionTimestamp"))


class PodTopologySpread:
    """podtopologyspread/filtering.go and scoring.go. Filter, per DoNotSchedule constraint: the
    matching pods per topology domain among eligible nodes that carry every constraint's key;
    skew = the node's domain count + 1 (if the pod matches its own selector) - the global
    minimum (0 when fewer domains than minDomains); fail when skew > maxSkew, or when the node
    lacks a key. Score, for ScheduleAnyway constraints: count x log(domains + 2) + (maxSkew - 1)
    summed, normalised as (max + min - s) x 100 / max.

    A Pod with no constraints of its own gets the plugin's default constraints (plugin.go New:
    args.defaultingType System, the default, means systemDefaultConstraints; List means
    args.defaultConstraints), each with the Pod's default selector (helper.DefaultSelector: its
    Services, ReplicationController, ReplicaSet or StatefulSet), when it has one. With the system
    defaults, nodes that lack a topology key are still scored (scoring.go PreScore:
    requireAllTopologies only for the Pod's own constraints or List defaults), so hostname
    spreading works on nodes without a zone label.

    matchLabelKeys: in v1.34.1 kube-apiserver merges `key In (the Pod's value)` into the
    labelSelector when it creates the Pod (registry/core/pod/strategy.go
    mutateTopologySpreadConstraints, gates MatchLabelKeysInPodTopologySpread and
    MatchLabelKeysInPodTopologySpreadSelectorMerge, both beta and on by default in
    pkg/features/kube_features.go); the scheduler merges them again (common.go
    filterTopologySpreadConstraints), which changes nothing for a selector that has them already.
    labkit's API server merges them into the stored Pod as v1.34's does
    (labkit/apiserver/registry/pod.py merge_label_keys); the plugin merges them again here, as the
    scheduler does, for a Pod stored without them (a case file's)."""
    name = "PodTopologySpread"

    def __init__(self, args: dict | None = None):
        args = args or {}
        self.system_defaulted = (args.get("defaultingType") or "System") == "System"
        self.default_constraints = list(SYSTEM_DEFAULT_CONSTRAINTS) if self.system_defaulted \
            else list(args.get("defaultConstraints") or [])

    def pre_filter(self, cycle, pod: Pod):
        constraints = _constraints(self, cycle, pod, "DoNotSchedule")
        if not constraints:
            return fw.Status(fw.SKIP), None
        counts = []
        for c in constraints:
            key, domains = c["topologyKey"], {}
            for node in cycle.nodes:
                labels = node.node.labels
                if not all(k["topologyKey"] in labels for k in constraints) or not _eligible(pod, c, node):
                    continue
                domains[labels[key]] = domains.get(labels[key], 0) + _count(pod, c, node)
            counts.append(domains)
        cycle.state[self.name] = (constraints, counts)
        return fw.OK, None

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        constraints, counts = cycle.state[self.name]
        labels = node.node.labels
        for c, domains in zip(constraints, counts):
            if c["topologyKey"] not in labels:
                return fw.status(fw.UNRESOLVABLE, SPREAD_MISSING)
            min_count = min(domains.values()) if domains else 0
            min_domains = c.get("minDomains")
            if min_domains and len(domains) < int(min_domains):
                min_count = 0
            self_match = 1 if label_selector_matches(_selector_of(pod, c), pod.labels) else 0
            skew = domains.get(labels[c["topologyKey"]], 0) + self_match - min_count
            if skew > int(c.get("maxSkew") or 1):
                return fw.status(fw.UNSCHEDULABLE, SPREAD_REASON)
        return fw.OK

    def pre_score(self, cycle, pod: Pod, nodes) -> fw.Status:
        """scoring.go PreScore and initPreScoreState: the feasible nodes that lack a topology key
        are ignored (only when requireAllTopologies); each zone-like constraint counts, over every
        node of the snapshot that its inclusion policies admit, the matching Pods of the domains
        the feasible nodes have; a hostname constraint counts each node's own Pods at Score. The
        normalising weight is log(number of domains + 2), the domains of the feasible nodes (for
        hostname, the feasible nodes not ignored)."""
        constraints = _constraints(self, cycle, pod, "ScheduleAnyway")
        if not cycle.nodes or not constraints:
            return fw.Status(fw.SKIP)
        require_all = bool(pod.spec.get("topologySpreadConstraints")) or not self.system_defaulted

        def has_keys(node: NodeInfo) -> bool:
            return all(c["topologyKey"] in node.node.labels for c in constraints)
        ignored = {n.name for n in nodes if require_all and not has_keys(n)}
        counts: list[dict] = []
        weights: list[float] = []
        for c in constraints:
            key = c["topologyKey"]
            domains: dict = {}
            if key != HOSTNAME_KEY:
                for n in nodes:
                    if n.name not in ignored:
                        domains.setdefault(n.node.labels.get(key, ""), 0)
            size = len(nodes) - len(ignored) if key == HOSTNAME_KEY else len(domains)
            weights.append(math.log(size + 2))
            if key != HOSTNAME_KEY:
                for node in cycle.nodes:
                    if require_all and not has_keys(node):
                        continue
                    value = node.node.labels.get(key, "")
                    if value in domains and _eligible(pod, c, node):
                        domains[value] += _count(pod, c, node)
            counts.append(domains)
        cycle.state[self.name + "/score"] = (constraints, weights, counts, ignored)
        return fw.OK

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        constraints, weights, counts, ignored = cycle.state[self.name + "/score"]
        if node.name in ignored:
            return 0
        total = 0.0
        for c, weight, domains in zip(constraints, weights, counts):
            value = node.node.labels.get(c["topologyKey"])
            if value is None:
                continue
            count = _count(pod, c, node) if c["topologyKey"] == HOSTNAME_KEY else domains.get(value, 0)
            total += count * weight + (int(c.get("maxSkew") or 1) - 1)
        return int(math.floor(total + 0.5))        # Go's math.Round: halves away from zero

    def normalize(self, cycle, pod, scores: dict) -> None:
        ignored = cycle.state[self.name + "/score"][3]
        valid = [v for n, v in scores.items() if n not in ignored]
        low, high = (min(valid), max(valid)) if valid else (0, 0)
        for name, value in scores.items():
            if name in ignored:
                scores[name] = 0
            elif high == 0:
                scores[name] = fw.MAX_NODE_SCORE
            else:
                scores[name] = fw.MAX_NODE_SCORE * (high + low - value) // high


# -- InterPodAffinity -----------------------------------------------------------------------------


def _affinity(pod: Pod, kind: str) -> dict:
    return ((pod.spec.get("affinity") or {}).get(kind) or {})


def _required(pod: Pod, kind: str) -> list[dict]:
    return _affinity(pod, kind).get("requiredDuringSchedulingIgnoredDuringExecution") or []


def _preferred(pod: Pod, kind: str) -> list[dict]:
    return _affinity(pod, kind).get("preferredDuringSchedulingIgnoredDuringExecution") or []


def term_matches(owner: Pod, term: dict, other: Pod) -> bool:
    """An affinity term of `owner` matches `other`: its namespaces (default: the owner's; a
    namespaceSelector {} means all) and its labelSelector."""
    namespaces = set(term.get("namespaces") or [])
    selector = term.get("namespaceSelector")
    if selector == {}:
        in_namespace = True
    elif not namespaces and selector is None:
        in_namespace = other.namespace == owner.namespace
    else:
        in_namespace = other.namespace in namespaces
    return in_namespace and label_selector_matches(term.get("labelSelector"), other.labels)


class InterPodAffinity:
    """interpodaffinity/filtering.go and scoring.go. Filter, in this order: the pod's required
    affinity (each term's topology domain must hold a matching pod, unless no pod anywhere
    matches and the pod matches its own terms), its required anti-affinity, and the existing
    pods' required anti-affinity against it. Score: preferred terms both ways, and existing pods'
    required affinity weighted hardPodAffinityWeight, summed per domain; normalised to 0..100
    between the lowest and highest."""
    name = "InterPodAffinity"
    AFFINITY = "node(s) didn't match pod affinity rules"
    ANTI = "node(s) didn't match pod anti-affinity rules"
    EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"

    def __init__(self, args: dict | None = None):
        self.hard_weight = int((args or {}).get("hardPodAffinityWeight", 1))

    def _pairs(self, cycle, owner: Pod, term: dict, pods_of) -> dict:
        key, counts = term.get("topologyKey"), {}
        for node in cycle.nodes:
            if key not in node.node.labels:
                continue
            n = sum(1 for p in pods_of(node) if term_matches(owner, term, p))
            if n:
                counts[node.node.labels[key]] = counts.get(node.node.labels[key], 0) + n
        return counts

    def pre_filter(self, cycle, pod: Pod):
        affinity, anti = _required(pod, "podAffinity"), _required(pod, "podAntiAffinity")
        existing = []                                   # (topologyKey, value) the incoming pod must avoid
        for node in cycle.nodes:
            for other in node.pods:
                for term in _required(other, "podAntiAffinity"):
                    key = term.get("topologyKey")
                    if key in node.node.labels and term_matches(other, term, pod):
                        existing.append((key, node.node.labels[key]))
        if not affinity and not anti and not existing:
            return fw.Status(fw.SKIP), None
        cycle.state[self.name] = {
            "affinity": [(t, self._pairs(cycle, pod, t, lambda n: n.pods)) for t in affinity],
            "anti": [(t, self._pairs(cycle, pod, t, lambda n: n.pods)) for t in anti],
            "existing": set(existing),
        }
        return fw.OK, None

    def filter(self, cycle, pod: Pod, node: NodeInfo) -> fw.Status:
        state, labels = cycle.state[self.name], node.node.labels
        affinity = state["affinity"]
        if affinity:
            if any(t.get("topologyKey") not in labels for t, _c in affinity):
                return fw.status(fw.UNRESOLVABLE, self.AFFINITY)
            if not all(counts.get(labels[t["topologyKey"]], 0) > 0 for t, counts in affinity):
                nobody = all(not counts for _t, counts in affinity)
                if not (nobody and all(term_matches(pod, t, pod) for t, _c in affinity)):
                    return fw.status(fw.UNRESOLVABLE, self.AFFINITY)
        for t, counts in state["anti"]:
            key = t.get("topologyKey")
            if key in labels and counts.get(labels[key], 0) > 0:
                return fw.status(fw.UNSCHEDULABLE, self.ANTI)
        if any((key, value) in state["existing"] for key, value in labels.items()):
            return fw.status(fw.UNSCHEDULABLE, self.EXISTING)
        return fw.OK

    def pre_score(self, cycle, pod: Pod, nodes) -> fw.Status:
        scores: dict = {}

        def add(key, value, weight):
            scores[(key, value)] = scores.get((key, value), 0) + weight

        for node in cycle.nodes:
            labels = node.node.labels
            for other in node.pods:
                for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1)):
                    for weighted in _preferred(pod, kind):       # the incoming pod's preferences
                        term = weighted.get("podAffinityTerm") or {}
                        key = term.get("topologyKey")
                        if key in labels and term_matches(pod, term, other):
                            add(key, labels[key], sign * int(weighted.get("weight") or 0))
                    for weighted in _preferred(other, kind):     # the existing pod's, towards it
                        term = weighted.get("podAffinityTerm") or {}
                        key = term.get("topologyKey")
                        if key in labels and term_matches(other, term, pod):
                            add(key, labels[key], sign * int(weighted.get("weight") or 0))
                if self.hard_weight:
                    for term in _required(other, "podAffinity"):
                        key = term.get("topologyKey")
                        if key in labels and term_matches(other, term, pod):
                            add(key, labels[key], self.hard_weight)
        if not scores and not (_preferred(pod, "podAffinity") or _preferred(pod, "podAntiAffinity")):
            return fw.Status(fw.SKIP)
        cycle.state[self.name + "/score"] = scores
        return fw.OK

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        scores = cycle.state[self.name + "/score"]
        return sum(v for (key, value), v in scores.items() if node.node.labels.get(key) == value)

    def normalize(self, cycle, pod, scores: dict) -> None:
        if not scores:
            return
        low, high = min(scores.values()), max(scores.values())
        for name, value in scores.items():
            scores[name] = int(fw.MAX_NODE_SCORE * ((value - low) / (high - low))) if high > low else 0


# -- ImageLocality --------------------------------------------------------------------------------

MB = 1024 * 1024
MIN_THRESHOLD, MAX_CONTAINER_THRESHOLD = 23 * MB, 1000 * MB


def _image_name(name: str) -> str:
    """normalizedImageName: an image without a tag or digest is `:latest`."""
    return name if (":" in name.rsplit("/", 1)[-1] or "@" in name) else name + ":latest"


class ImageLocality:
    """imagelocality/image_locality.go: the sizes of the pod's images already on the node, each
    scaled by the share of nodes that have it, clamped to [23 MB, 1000 MB x containers] and
    mapped onto 0..100."""
    name = "ImageLocality"

    def pre_score(self, cycle, pod: Pod, nodes) -> fw.Status:
        """Which node has which of the pod's images, and how large (the scheduler cache's image
        states: the node count per image is over all nodes)."""
        wanted = {_image_name(c.get("image") or "") for c in pod.init_containers + pod.containers}
        have: dict = {}
        for n in cycle.nodes:
            for image in n.node.images:
                for name in image.get("names") or []:
                    if _image_name(name) in wanted:
                        have.setdefault(_image_name(name), {})[n.name] = int(image.get("sizeBytes") or 0)
        cycle.state[self.name] = have
        return fw.OK

    def score(self, cycle, pod: Pod, node: NodeInfo) -> int:
        total_nodes = len(cycle.nodes) or 1
        have = cycle.state[self.name]
        containers = pod.init_containers + pod.containers
        total = 0
        for c in containers:
            sizes = have.get(_image_name(c.get("image") or ""), {})
            if node.name in sizes:
                total += int(sizes[node.name] * (len(sizes) / total_nodes))
        top = MAX_CONTAINER_THRESHOLD * max(len(containers), 1)
        total = min(max(total, MIN_THRESHOLD), top)
        return fw.MAX_NODE_SCORE * (total - MIN_THRESHOLD) // (top - MIN_THRESHOLD)


# -- DynamicResources, volumes: what the lab's Pods reach of them -----------------------------------


class DynamicResources:
    """dynamicresources/dynamicresources.go: labkit's Pods have no ResourceClaims, so PreFilter
    skips them, and PostFilter answers, as upstream does for such a pod, that there are `no new
    claims to deallocate` (Unschedulable: the next PostFilter plugin, preemption, runs)."""
    name = "DynamicResources"

    def pre_filter(self, cycle, pod: Pod):
        return fw.Status(fw.SKIP), None

    def post_filter(self, cycle, pod: Pod):
        return None, fw.status(fw.UNSCHEDULABLE, "no new claims to deallocate")


class VolumePlugin:
    """VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone: each skips a pod without
    PersistentVolumeClaim volumes at PreFilter, which is every pod labkit schedules (the lab's
    objects have no volumes; they are not reconstructed beyond that)."""

    def __init__(self, name: str):
        self.name = name

    def pre_filter(self, cycle, pod: Pod):
        claims = [v for v in pod.spec.get("volumes") or [] if v.get("persistentVolumeClaim") or v.get("ephemeral")]
        if claims:
            return fw.status(fw.UNRESOLVABLE, f"{self.name}: PersistentVolumeClaims are not reconstructed by labkit"), None
        return fw.Status(fw.SKIP), None


# -- the registry ---------------------------------------------------------------------------------


def build(name: str, args: dict):
    """A plugin by its name, with its pluginConfig args; None for plugins outside the cycle
    (queue sort, scheduling gates, binding)."""
    simple = {"NodeUnschedulable": NodeUnschedulable, "NodeName": NodeName, "TaintToleration": TaintToleration,
              "NodeAffinity": NodeAffinity, "NodePorts": NodePorts, "ImageLocality": ImageLocality,
              "DynamicResources": DynamicResources}
    configured = {"NodeResourcesFit": NodeResourcesFit, "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocation,
                  "PodTopologySpread": PodTopologySpread, "InterPodAffinity": InterPodAffinity,
                  "DefaultPreemption": DefaultPreemption}
    if name in simple:
        return simple[name]()
    if name in configured:
        return configured[name](args)
    if name in ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"):
        return VolumePlugin(name)
    if name in ("SchedulingGates", "PrioritySort", "DefaultBinder"):
        return None
    raise ValueError(f"unknown plugin {name!r}")
