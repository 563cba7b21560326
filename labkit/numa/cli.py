"""`labkit numa admit | merge | take`: kubelet's NUMA resource managers on the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts
from labkit.errors import ConfigError, LabkitError
from labkit.numa import withhold
from labkit.numa.display import cross_product_table, format_hint

app = typer.Typer(help="kubelet's Topology, CPU and Memory Managers, reconstructed.", no_args_is_help=True)

def _print_json(data) -> None:
    typer.echo(json.dumps(data, indent=2))


MACHINE_HELP = "cadvisor MachineInfo JSON, or a shipped machine: " \
               "single-socket-ht, dual-socket-ht, dual-socket-no-ht, dual-socket-multi-numa-ht, " \
               "quad-socket-four-way-ht, lab-two-node."
@app.command()
def admit(
    pods: Path = typer.Option(..., "-f", "--filename", help="Pods to admit, in order (YAML: Pods, documents or a List)."),
    machine: str = typer.Option(..., "--machine", help=MACHINE_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="KubeletConfiguration YAML (default: kubelet's defaults)."),
    state: Optional[Path] = typer.Option(None, "--state", help="kubelet root dir: cpu_manager_state and memory_manager_state "
                                         "are read from it first and written back after admission."),
    running: Optional[Path] = typer.Option(None, "--running", help="With --state: the Pods still bound to the node "
                                           "(YAML; an empty file: none). What the checkpoints hold for any other Pod is "
                                           "released first, as kubelet's removeStaleState does. Without it, every Pod in "
                                           "the checkpoints counts as still running."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Admit Pods as kubelet does: QoS, hints, merge, policy decision, exclusive CPUs, memory nodes."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods

    the_machine = load_machine(machine)
    cfg = load_config(config)
    pod_list = load_pods(pods)
    if running is not None and state is None:
        raise LabkitError("--running goes with --state (the checkpoints whose stale entries it releases)")
    bound = load_pods(running, allow_empty=True) if running is not None else None
    node = Node(the_machine, cfg, state)
    released = [] if bound is None else node.remove_stale_state({p.uid for p in bound + pod_list})
    # a Pod met in the situation of a prediction exercise whose answer is not recorded, or whose QoS
    # class would answer the qos exercise (its hints, CPUs and memory nodes tell Guaranteed from the
    # rest): its result, and everything after it (which depends on it), is withheld
    # (labkit.numa.withhold)
    gate = withhold.Gate("labkit numa admit")
    # the same for the resources lab's qos exercise (a Pod shaped as one of its: its class is the
    # answer): the refusal is that lab's (labkit.resources.situations.qos_gate)
    from labkit.resources.situations import qos_gate
    other_qos = qos_gate("labkit numa admit")
    situations: list[str | None] = []
    refusals: dict[int, str] = {}

    def before(n, pod):
        situations.append(gate.admission(n, pod) or gate.qos(pod) or gate.merge(n, pod))
        refused = None if situations[-1] else other_qos(pod)
        if refused:
            refusals[len(situations) - 1] = refused
            situations[-1] = "qos of lab resources"
    results = node.admit_all(pod_list, before=before)
    pending = {i: ex for i, ex in enumerate(situations) if ex}
    first = min(pending) if pending else len(results)
    reason = (refusals[first] if first in refusals else withhold.message(pending[first])) if pending else ""
    if pending:     # the shared pool as it is now includes what the withheld Pods took
        for result in results[:first]:
            for entry in result.containers:
                if not entry.exclusive:
                    entry.cpus = frozenset()
    written = node.save() if not pending else []
    for warning in cfg.warnings:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        shown = [r.to_json() if i < first else {"name": r.pod.name, "namespace": r.pod.namespace, "withheld": reason}
                 for i, r in enumerate(results)]
        if pending:
            for entry in (c for r in shown[:first] for c in r["containers"] if not c["exclusive"]):
                entry["cpus"] = reason
        _print_json({"pods": shown, "shared_pool": sorted(node.shared_pool()) if not pending else reason,
                     "reserved_cpus": sorted(node.reserved_cpus()), "released_pods": released})
        return
    if released:
        typer.echo(f"removeStaleState: released what the checkpoints held for {len(released)} Pod(s) no longer on the "
                   f"node: {', '.join(released)}")
    from labkit.numa.cpuset import format_cpus
    for index, result in enumerate(results):
        pod = result.pod
        if index >= first:
            typer.echo(f"{pod.namespace}/{pod.name}: {reason}")
            continue
        verdict = "admitted" if result.admitted else f"rejected: {result.result.reason}: {result.result.message}"
        typer.echo(f"{pod.namespace}/{pod.name} ({result.qos}): {verdict}")
        for entry in result.containers:
            kind = "init container" if entry.init else "container"
            if not entry.evaluated:
                typer.echo(f"  {kind} {entry.name}: not reached")
                continue
            typer.echo(f"  {kind} {entry.name}:")
            if result.scope == "none":
                typer.echo("    topology manager policy none: no hints, providers allocate directly")
            else:
                for resource, hints in entry.hints.items():
                    shown = "no preference" if hints is None else \
                        ("no possible placement" if not hints else ", ".join(format_hint(h) for h in hints))
                    typer.echo(f"    {resource} hints: {shown}")
                if not entry.hints:
                    typer.echo("    hints: no provider has a preference")
                typer.echo(f"    best hint ({result.scope} scope): {format_hint(entry.best_hint)}")
            if result.admitted:
                where = "exclusive" if entry.exclusive else "shared pool"
                mems = "any" if entry.memory_nodes is None else format_cpus(entry.memory_nodes)
                cpus = "the shared pool (withheld, see below)" if pending and not entry.exclusive else \
                    f"{format_cpus(entry.cpus)} ({where})"
                typer.echo(f"    cpus: {cpus}; memory NUMA nodes: {mems}")
    if pending:
        typer.echo(f"shared pool: {reason}; reserved CPUs: {format_cpus(node.reserved_cpus()) or 'none'}")
        if state is not None:
            typer.echo(f"nothing written to {state} while a result is withheld")
    else:
        typer.echo(f"shared pool: {format_cpus(node.shared_pool())}; reserved CPUs: "
                   f"{format_cpus(node.reserved_cpus()) or 'none'}")
    for path in written:
        typer.echo(f"wrote {path}")


def _merge_input(path: Path):
    from labkit.numa.merge import POLICIES, hints_from_json
    from labkit.inputs import load_json

    data = load_json(path)
    if not isinstance(data, dict):
        raise ConfigError(path, None, "expected an object with numaNodes, policy and providers")
    nodes = data.get("numaNodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, int) and 0 <= n < 64 for n in nodes) \
            or len(set(nodes)) != len(nodes):
        raise ConfigError(path, "numaNodes", "expected a non-empty list of distinct NUMA node ids (0-63)")
    policy = data.get("policy", "best-effort")
    if policy not in POLICIES:
        raise ConfigError(path, "policy", f"expected one of {', '.join(POLICIES)}, found {policy!r}")
    options = data.get("policyOptions") or {}
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise ConfigError(path, "policyOptions", 'expected a map of option name to string, e.g. '
                          '{"prefer-closest-numa-nodes": "true"}')
    distances = data.get("distances")
    if distances is not None:
        ok = isinstance(distances, dict) and all(
            str(n) in distances and isinstance(distances[str(n)], list) and
            all(isinstance(d, int) for d in distances[str(n)]) for n in nodes)
        if not ok:
            raise ConfigError(path, "distances", 'expected {"<node>": [distance to node 0, to node 1, ...]} for every node')
    providers = data.get("providers")
    if not isinstance(providers, list):
        raise ConfigError(path, "providers", "expected a list of providers (null, {}, or {resource: null | [hints]})")
    for i, provider in enumerate(providers):
        if provider is None:
            continue
        if not isinstance(provider, dict):
            raise ConfigError(path, f"providers[{i}]", "expected null or an object {resource: null | [hints]}")
        for resource, hints in provider.items():
            if hints is None:
                continue
            if not isinstance(hints, list):
                raise ConfigError(path, f"providers[{i}].{resource}", "expected null or a list of hints")
            for j, hint in enumerate(hints):
                mask = hint.get("mask") if isinstance(hint, dict) else None
                if not isinstance(hint, dict) or not isinstance(hint.get("preferred", False), bool) or not (
                        mask is None or (isinstance(mask, list) and all(isinstance(b, int) and 0 <= b < 64 for b in mask))):
                    raise ConfigError(path, f"providers[{i}].{resource}[{j}]",
                                      'expected {"mask": [NUMA ids] or null, "preferred": true|false}')
    return nodes, distances, policy, options, hints_from_json(providers)


@app.command()
def merge(
    hints: Path = typer.Option(..., "-f", "--filename", help='Hints JSON: {"numaNodes": [0,1], "policy": "best-effort", '
                               '"policyOptions": {...}, "distances": {...}, "providers": [...]}'),
    policy: Optional[str] = typer.Option(None, "--policy", help="The Topology Manager policy to merge with (none, "
                                         "best-effort, restricted, single-numa-node); default: the file's `policy`."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Merge providers' hints as the Topology Manager does, and explain the decision."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.numa.merge import HintMerger, NUMAInfo, Policy, provider_list_labels
    from labkit.numa.topologymanager import PolicyOptions, TopologyManagerError

    from labkit.numa.merge import POLICIES

    nodes, distances, policy_name, options, providers = _merge_input(hints)
    from labkit.inputs import load_json
    exercise = withhold.pending_for_merge(load_json(hints), "labkit numa merge")
    if exercise is not None:
        reason = f"{hints} holds the hints of exercise {exercise}: the merge is {withhold.message(exercise)}"
        _print_json({"withheld": reason}) if as_json else typer.echo(reason)
        return
    if policy is not None:
        if policy not in POLICIES:
            raise ConfigError("--policy", None, f"expected one of {', '.join(POLICIES)}, got {policy!r}")
        policy_name = policy
    try:
        opts = PolicyOptions.parse(options) if policy_name != "none" else PolicyOptions()
    except TopologyManagerError as exc:
        raise ConfigError(hints, "policyOptions", str(exc)) from None
    if policy_name != "none" and len(nodes) > opts.max_allowable_numa_nodes:
        raise LabkitError(f"{hints}: unsupported on machines with more than {opts.max_allowable_numa_nodes} NUMA Nodes")
    if opts.prefer_closest_numa and distances is None:
        raise ConfigError(hints, "distances", "prefer-closest-numa-nodes needs the NUMA distances "
                          "(kubelet: error getting NUMA distances from cadvisor)")
    numa_info = NUMAInfo(nodes, {int(k): v for k, v in (distances or {}).items()})
    result = Policy(policy_name, numa_info, opts.prefer_closest_numa).merge(providers)
    if as_json:
        _print_json({"hint": result.hint.to_json(), "admit": result.admit})
        return
    typer.echo(f"policy {policy_name}: best hint {format_hint(result.hint)}; "
               f"{'admit' if result.admit else 'reject (TopologyAffinityError)'}")
    if policy_name == "none":
        typer.echo("the none policy does not merge: every Pod is admitted with no NUMA affinity")
        return
    lists = result.lists
    merger = HintMerger(numa_info, lists, policy_name, opts.prefer_closest_numa)
    if policy_name == "single-numa-node":
        typer.echo("single-numa-node keeps only preferred hints that are nil or name one NUMA node")
    typer.echo(f"BestNonPreferredAffinityCount = {merger.best_non_preferred_affinity_count}; "
               f"masks compared by {'average NUMA distance' if merger.use_closest else 'narrowness'}")
    cross_product_table(lists, provider_list_labels(providers), numa_info, merger)
    rule = {"best-effort": "best-effort admits every Pod",
            "restricted": "restricted admits only a preferred best hint",
            "single-numa-node": "single-numa-node admits only a preferred hint on one NUMA node (the all-nodes "
                                "mask becomes nil)"}[policy_name]
    typer.echo(rule)


@app.command()
def take(
    machine: str = typer.Option(..., "--machine", help=MACHINE_HELP),
    count: int = typer.Option(..., "--count", min=0, help="How many CPUs to take."),
    available: Optional[str] = typer.Option(None, "--available", help="CPUs to take from, Linux list form (default: all)."),
    hint: Optional[str] = typer.Option(None, "--hint", help="NUMA nodes of the container's topology hint, e.g. 0 or 0,1: "
                                       "as the static policy allocates, CPUs of those nodes are taken first, the rest "
                                       "from all available CPUs."),
    distribute: bool = typer.Option(False, "--distribute", help="distribute-cpus-across-numa (takeByTopologyNUMADistributed)."),
    group_size: int = typer.Option(1, "--group-size", min=1, help="CPUs handed out together with --distribute "
                                   "(kubelet uses the CPUs per core with full-pcpus-only)."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """The CPUs kubelet's allocator (takeByTopology) would take, or its error.

    `--available` are the CPUs it may take (the static policy passes the shared pool minus the
    reserved CPUs); with `--hint`, allocateCPUs' order: the hint's NUMA nodes first."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.numa import cpuset
    from labkit.numa.cpumanager import take_aligned_first
    from labkit.numa.cpu_assignment import (CPUAllocationError, take_by_topology_numa_distributed,
                                            take_by_topology_numa_packed)
    from labkit.numa.machine import load_machine
    from labkit.numa.topology import CPUTopology

    exercise = withhold.pending_for_take(machine)
    if exercise is not None:
        reason = f"{machine} is the machine of exercise {exercise}: takeByTopology on it is {withhold.message(exercise)}"
        _print_json({"withheld": reason}) if as_json else typer.echo(reason)
        return
    topo = CPUTopology.discover(load_machine(machine))
    if group_size != 1 and not distribute:
        raise LabkitError("--group-size only applies with --distribute")
    if available is None:
        cpus = topo.cpus()
    else:
        try:
            cpus = cpuset.parse(available)
        except cpuset.CPUSetParseError as exc:
            raise ConfigError("--available", None, f"{available!r} is not a CPU list: {exc}") from None
    aligned = None
    if hint is not None:
        try:
            nodes = cpuset.parse(hint)
        except cpuset.CPUSetParseError as exc:
            raise ConfigError("--hint", None, f"{hint!r} is not a list of NUMA node ids: {exc}") from None
        unknown = sorted(set(nodes) - set(topo.numa_nodes()))
        if unknown:
            raise ConfigError("--hint", None, f"NUMA node(s) {cpuset.format_cpus(unknown)} do not exist on this machine "
                              f"(nodes: {cpuset.format_cpus(topo.numa_nodes())})")
        aligned = frozenset(cpus) & topo.cpus_in_numa_nodes(*nodes)

    def take_fn(available_cpus, n):
        return take_by_topology_numa_distributed(topo, available_cpus, n, group_size) if distribute \
            else take_by_topology_numa_packed(topo, available_cpus, n)

    try:
        result = take_aligned_first(cpus, aligned, count, take_fn)
        error = None
    except CPUAllocationError as exc:
        result, error = frozenset(), str(exc)
    exercise = withhold.pending_for_take(machine, taken=result)
    if exercise is not None:
        reason = (f"these CPUs are what a container of exercise {exercise} gets: takeByTopology's answer here is "
                  f"{withhold.message(exercise)}")
        _print_json({"withheld": reason}) if as_json else typer.echo(reason)
        return
    if as_json:
        _print_json({"cpus": sorted(result), "cpuset": cpuset.format_cpus(result), "error": error})
    elif error:
        typer.echo(f"error: {error}")
    else:
        typer.echo(cpuset.format_cpus(result))
    if error:
        raise typer.Exit(1)


# -- the live node on this host: discover, run, delete, show (labkit/numa/live_cli.py) ----------------
from labkit.numa.live_cli import register as _register_live_commands  # noqa: E402

_register_live_commands(app)
