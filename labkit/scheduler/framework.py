"""The scheduling framework of kube-scheduler v1.34.1: statuses, a profile's plugins in order, one
scheduling cycle (PreFilter, Filter, PostFilter, PreScore, Score, NormalizeScore, selectHost) and
FitError's message. Upstream: pkg/scheduler/framework/runtime/framework.go (running the
extension points), pkg/scheduler/schedule_one.go (schedulePod, findNodesThatFitPod,
prioritizeNodes, selectHost, numFeasibleNodesToFind), pkg/scheduler/framework/types.go
(FitError.Error), pkg/scheduler/apis/config/v1/default_plugins.go (the default profile).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from labkit.scheduler.objects import NodeInfo, Pod

SUCCESS, UNSCHEDULABLE, UNRESOLVABLE, SKIP, ERROR = (
    "Success", "Unschedulable", "UnschedulableAndUnresolvable", "Skip", "Error")
MAX_NODE_SCORE = 100
DEFAULT_SCHEDULER = "default-scheduler"
NO_NODE_AVAILABLE = "0/{} nodes are available"


@dataclass
class Status:
    code: str = SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str | None = None

    @property
    def ok(self) -> bool:
        return self.code == SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in (UNSCHEDULABLE, UNRESOLVABLE)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def to_dict(self) -> dict:
        return {"code": self.code, "reasons": list(self.reasons), "plugin": self.plugin}


def status(code: str, *reasons: str) -> Status:
    return Status(code, list(reasons))


OK = Status()


# The default profile, in its order (every extension point runs its plugins in this order), with
# the Score weights: default_plugins.go getDefaultPlugins, with DynamicResources inserted before
# DefaultPreemption because DynamicResourceAllocation is GA and on in v1.34 (applyFeatureGates).
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 0), ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0),
)


@dataclass
class Profile:
    """One KubeSchedulerConfiguration profile: its plugins (instances, in order) and weights."""
    name: str
    plugins: list
    weights: dict[str, int]
    percentage_of_nodes_to_score: int = 0
    disabled: dict[str, set] = field(default_factory=dict)   # method (pre_filter, score, ...) -> plugin names

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.plugins)

    def runs(self, plugin, point: str) -> bool:
        """Whether `plugin` runs at the extension point `point` (its method) in this profile."""
        return callable(getattr(plugin, point, None)) and plugin.name not in self.disabled.get(point, ())

    def at(self, point: str) -> list:
        return [p for p in self.plugins if self.runs(p, point)]


# -- the cycle's state and its record ---------------------------------------------------------------


@dataclass
class Cycle:
    """Everything one scheduling attempt decided, as it decided it (explain reads this)."""
    pod: Pod
    profile: Profile
    nodes: list[NodeInfo]                      # the snapshot's nodes, in order
    pdbs: list[dict] = field(default_factory=list)
    # the Services, ReplicationControllers, ReplicaSets and StatefulSets the cycle's listers hold
    # (resource -> objects): PodTopologySpread's default constraints take a Pod's selector from them
    workloads: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)  # CycleState: plugin name -> its PreFilter/PreScore data
    pre_filter_msg: str = ""
    pre_filter_skipped: set = field(default_factory=set)
    pre_filter_nodes: set | None = None       # PreFilterResult.NodeNames (None: all nodes)
    absent_status: Status | None = None
    statuses: dict[str, Status] = field(default_factory=dict)   # failed nodes: the first failing plugin
    feasible: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # plugin -> node -> (raw, normalised)
    score_skipped: set = field(default_factory=set)
    totals: dict[str, int] = field(default_factory=dict)
    chosen: str | None = None
    post_filter: Status | None = None
    post_filter_msg: str = ""
    nominated_node: str | None = None
    victims: list[Pod] = field(default_factory=list)
    _by_name: dict = field(default_factory=dict, repr=False)

    def node(self, name: str) -> NodeInfo:
        if len(self._by_name) != len(self.nodes):
            self._by_name = {n.name: n for n in self.nodes}
        return self._by_name[name]

    @property
    def fit_error(self) -> str | None:
        if self.chosen is not None:
            return None
        return fit_error_message(len(self.nodes), self.statuses, self.absent_status, self.pre_filter_msg,
                                 self.post_filter_msg)


def fit_error_message(num_all_nodes: int, statuses: dict[str, Status], absent: Status | None,
                      pre_filter_msg: str = "", post_filter_msg: str = "") -> str:
    """FitError.Error (framework/types.go): `0/N nodes are available:`, then the PreFilter message,
    or else the histogram of every node's reasons (nodes without an explicit status counted with
    the absent nodes' status), `<count> <reason>` sorted as strings and joined by `, `, with a
    period; then the PostFilter message."""
    text = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if pre_filter_msg:
        text += f" {pre_filter_msg}."
    else:
        reasons: Counter = Counter()
        for st in statuses.values():
            for reason in st.reasons:
                reasons[reason] += 1
        if len(statuses) < num_all_nodes and absent is not None:
            for reason in absent.reasons:
                reasons[reason] += num_all_nodes - len(statuses)
        listed = sorted(f"{count} {reason}" for reason, count in reasons.items())
        if listed:
            text += f" {', '.join(listed)}."
    if post_filter_msg:
        text += f" {post_filter_msg}"
    return text


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """schedule_one.go numFeasibleNodesToFind: every node below 100 nodes; else the profile's
    percentage, or adaptively 50 - n/125 percent (at least 5), and never fewer than 100."""
    min_feasible, min_percentage = 100, 5
    if num_all_nodes < min_feasible:
        return num_all_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50 - num_all_nodes // 125, min_percentage)
    if adaptive >= 100:
        return num_all_nodes
    found = num_all_nodes * adaptive // 100
    return max(found, min_feasible)


# -- running the extension points -----------------------------------------------------------------


def run_filters(cycle: Cycle, pod: Pod, node: NodeInfo) -> Status:
    """RunFilterPlugins: the profile's Filter plugins in order, stopping at the first that fails
    (its status, with its name)."""
    for plugin in cycle.profile.at("filter"):
        if plugin.name in cycle.pre_filter_skipped:
            continue
        st = plugin.filter(cycle, pod, node)
        if not st.ok:
            st.plugin = plugin.name
            if st.code == ERROR:
                raise RuntimeError(f"{plugin.name}: {st.message}")
            return st
    return OK


def run_pre_filters(cycle: Cycle, pod: Pod) -> Status:
    """RunPreFilterPlugins: each plugin may skip its Filter for this pod, restrict the nodes
    (PreFilterResult), or reject the pod outright (its message becomes PreFilterMsg)."""
    restricting = []
    for plugin in cycle.profile.at("pre_filter"):
        st, nodes = plugin.pre_filter(cycle, pod)
        if st.code == SKIP:
            cycle.pre_filter_skipped.add(plugin.name)
            continue
        if not st.ok:
            st.plugin = plugin.name
            return st
        if nodes is not None:
            cycle.pre_filter_nodes = nodes if cycle.pre_filter_nodes is None else cycle.pre_filter_nodes & nodes
            restricting.append(plugin.name)
    if cycle.pre_filter_nodes is not None and restricting:
        cycle.absent_status = status(UNRESOLVABLE, f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(restricting))}]")
    return OK


def find_feasible(cycle: Cycle, pod: Pod, start: int = 0) -> None:
    """findNodesThatFitPod / findNodesThatPassFilters: from a rotating start, every node (or the
    PreFilterResult's) through the Filter plugins, until numFeasibleNodesToFind pass."""
    st = run_pre_filters(cycle, pod)
    if not st.ok:
        cycle.pre_filter_msg = st.message
        cycle.absent_status = st
        for node in cycle.nodes:
            cycle.statuses[node.name] = Status(st.code, list(st.reasons), st.plugin)
        return
    candidates = [n for n in cycle.nodes if cycle.pre_filter_nodes is None or n.name in cycle.pre_filter_nodes]
    wanted = num_feasible_nodes_to_find(len(candidates), cycle.profile.percentage_of_nodes_to_score)
    nominated = pod.obj.get("status", {}).get("nominatedNodeName") if isinstance(pod.obj.get("status"), dict) else None
    order = candidates[start % len(candidates):] + candidates[:start % len(candidates)] if candidates else []
    if nominated:          # a nominated node is evaluated first (evaluateNominatedNode)
        order = sorted(order, key=lambda n: n.name != nominated)
    for node in order:
        if len(cycle.feasible) >= wanted:
            break
        cycle.evaluated.append(node.name)
        result = run_filters(cycle, pod, node)
        if result.ok:
            cycle.feasible.append(node.name)
        else:
            cycle.statuses[node.name] = result


def run_post_filters(cycle: Cycle, pod: Pod) -> None:
    """RunPostFilterPlugins: the first Success or UnschedulableAndUnresolvable ends it; otherwise
    the reasons of every plugin are collected (the PostFilter message joins them with `, `)."""
    reasons: list[str] = []
    for plugin in cycle.profile.at("post_filter"):
        nominated, st = plugin.post_filter(cycle, pod)
        if nominated is not None:
            cycle.nominated_node = nominated or None
        if st.ok:
            cycle.post_filter = st
            cycle.post_filter_msg = ""
            return
        if st.code == UNRESOLVABLE:
            cycle.post_filter = st
            cycle.post_filter_msg = st.message
            return
        reasons += st.reasons
    cycle.post_filter = Status(UNSCHEDULABLE, reasons)
    cycle.post_filter_msg = ", ".join(reasons)


def prioritize(cycle: Cycle, pod: Pod) -> None:
    """prioritizeNodes: PreScore (a Skip drops that plugin's Score), Score, NormalizeScore, and
    the weighted sum per node."""
    nodes = [cycle.node(name) for name in cycle.feasible]
    scorers = []
    for plugin in cycle.profile.at("score"):
        pre = getattr(plugin, "pre_score", None) if cycle.profile.runs(plugin, "pre_score") else None
        if callable(pre) and pre(cycle, pod, nodes).code == SKIP:
            cycle.score_skipped.add(plugin.name)
            continue
        scorers.append(plugin)
    cycle.totals = {n.name: 0 for n in nodes}
    for plugin in scorers:
        raw = {n.name: plugin.score(cycle, pod, n) for n in nodes}
        normalised = dict(raw)
        if callable(getattr(plugin, "normalize", None)):
            plugin.normalize(cycle, pod, normalised)
        cycle.scores[plugin.name] = {name: (raw[name], normalised[name]) for name in raw}
        weight = cycle.profile.weights.get(plugin.name, 1)
        for name, value in normalised.items():
            cycle.totals[name] += value * weight


def select_host(totals: dict[str, int], order: list[str], rng: random.Random) -> str:
    """selectHost: the highest total; among equal totals one is taken uniformly at random
    (reservoir sampling, in the order the nodes were scored)."""
    chosen, best, count = None, None, 0
    for name in order:
        score = totals[name]
        if best is None or score > best:
            chosen, best, count = name, score, 1
        elif score == best:
            count += 1
            if rng.randrange(count) == 0:
                chosen = name
    return chosen


def schedule(profile: Profile, nodes: list[NodeInfo], pod: Pod, *, pdbs: list[dict] | None = None,
             rng: random.Random | None = None, start: int = 0, workloads: dict | None = None) -> Cycle:
    """One scheduling attempt (schedulePod + the PostFilter of handleSchedulingFailure)."""
    cycle = Cycle(pod, profile, nodes, list(pdbs or []), dict(workloads or {}))
    rng = rng or random.Random(0)
    find_feasible(cycle, pod, start)
    if not cycle.feasible:
        run_post_filters(cycle, pod)
        return cycle
    prioritize(cycle, pod)
    if len(cycle.feasible) == 1:          # one feasible node: taken without looking at scores
        cycle.chosen = cycle.feasible[0]
    else:
        cycle.chosen = select_host(cycle.totals, cycle.feasible, rng)
    return cycle


def default_normalize(scores: dict[str, int], reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> None:
    """helper.DefaultNormalizeScore: scaled so the highest raw score is max_priority (integer
    division), reversed if asked; all zero gives max_priority when reversed, else 0."""
    top = max(scores.values(), default=0)
    for name, value in scores.items():
        if top == 0:
            scores[name] = max_priority if reverse else 0
            continue
        scaled = max_priority * value // top
        scores[name] = max_priority - scaled if reverse else scaled
