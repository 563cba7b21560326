"""`labkit numa discover | run | delete | show`: this host as a kubelet node, with real Pods.

`run`, `delete` and `show` (without --machine) work on the live node of the `numa` lab
(`labkit run numa` builds it); `discover` and `show --machine` work anywhere.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts
from labkit.errors import LabkitError

LAB_ID = "numa"


def register(app: typer.Typer) -> None:
    app.command("discover")(discover)
    app.command("run")(run)
    app.command("delete")(delete)
    app.command("show")(show)


def discover(
    output: Optional[str] = cliopts.output_option(("json",), "json"),
    output_file: Optional[Path] = cliopts.output_file_option(),
):
    """This host's machine as cadvisor MachineInfo JSON, read from sysfs the way cadvisor reads it."""
    from labkit.numa.discover import discover as read_host, to_json

    _, output = cliopts.resolve_output(output, ("json",), "json", output_file=output_file)
    text = to_json(read_host())
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
        typer.echo(f"wrote {output}", err=True)


def _live_env():
    """The running numa lab's env; a clear error when the lab is not up."""
    from labkit import runner
    env = runner.running_env(LAB_ID, "the live node belongs")
    return env, env.state


def _views_table(views, title: str):
    from rich.table import Table

    from labkit.numa.cpuset import format_cpus

    table = Table(title=title)
    for col in ("pod/container", "QoS", "pid", "kubelet wants", "cpuset.cpus", "Cpus_allowed_list",
                "Mems_allowed_list"):
        table.add_column(col, overflow="fold")
    for v in views:
        want = f"{format_cpus(v.want_cpus)} {'exclusive' if v.exclusive else 'shared'}"
        pid = str(min(v.pids)) if v.pids else v.state
        table.add_row(v.label + (" (init)" if v.container.init else ""), v.pod.shown_qos, pid, want,
                      format_cpus(v.cgroup_cpus) if v.cgroup_cpus is not None else "-",
                      format_cpus(v.proc.cpus) if v.proc else "-", format_cpus(v.proc.mems) if v.proc else "-")
    return table


def _view_json(v) -> dict:
    from labkit.numa.cpuset import format_cpus
    qos = v.pod.shown_qos
    # the cgroup's place under kubepods names the class (besteffort/, burstable/ or none): withheld with it
    return {"pod": v.pod.name, "namespace": v.pod.namespace, "uid": v.pod.uid, "container": v.container.name,
            "init": v.container.init, "qos": qos, "state": v.state, "pids": v.pids,
            "cgroup": "withheld" if qos == "withheld" else v.container.cgroup, "exclusive": v.exclusive, "want_cpus": format_cpus(v.want_cpus),
            "want_mems": None if v.want_mems is None else format_cpus(v.want_mems),
            "cpuset_cpus": None if v.cgroup_cpus is None else format_cpus(v.cgroup_cpus),
            "cpus_allowed_list": format_cpus(v.proc.cpus) if v.proc else None,
            "mems_allowed_list": format_cpus(v.proc.mems) if v.proc else None}


def run(
    filename: Path = typer.Option(..., "-f", "--filename", help="Pod(s) to run on the live node (YAML)."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Admit Pods on the live node and start their containers as real processes, pinned as kubelet would."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.numa.display import console as make_console
    from labkit.numa.livenode import LiveNode

    from labkit.numa import withhold
    from labkit.numa.pods import load_pods

    env, state = _live_env()
    refusal = withhold.qos_run_refusal(load_pods(filename))
    if refusal:
        raise LabkitError(refusal)
    # the resources lab's qos exercise too: running a Pod shows its class (its cgroup's place)
    from labkit.resources.situations import qos_gate
    other_qos = qos_gate("labkit numa run")
    refusal = next(filter(None, (other_qos(pod) for pod in load_pods(filename))), None)
    if refusal:
        raise LabkitError(refusal)
    with state.locked():
        live = LiveNode(env)
        results = live.run(filename)
    if as_json:
        typer.echo(json.dumps([{"pod": r.pod.key, "uid": r.pod.uid, "qos": r.pod.shown_qos, "admitted": r.admitted,
                                "reason": r.reason, "message": r.message, "init_exit_codes": r.init_exit_codes,
                                "reconciled": [{"container": c, "cpuset_cpus": cpus} for c, cpus in r.reconciled],
                                "containers": [_view_json(v) for v in r.started]} for r in results], indent=2))
    else:
        console = make_console()
        for r in results:
            _explain_merges(live, r)
            if not r.admitted:
                console.print(f"{r.pod.key} ({r.pod.shown_qos}): rejected: {r.reason}: {r.message}", highlight=False)
                continue
            console.print(f"{r.pod.key} ({r.pod.shown_qos}): admitted and started", highlight=False)
            for name, code in r.init_exit_codes.items():
                console.print(f"  init container {name} exited with {code}", highlight=False)
            for label, cpus in r.reconciled:   # kubelet's loop: every cpuManagerReconcilePeriod (10 s by default)
                console.print(f"  reconcile (kubelet: within cpuManagerReconcilePeriod, 10 s; labkit: at once): "
                              f"{label} now on the shared pool {cpus}", highlight=False)
            console.print(_views_table(r.started, f"{r.pod.key}"))
    if not all(r.admitted for r in results):
        raise typer.Exit(1)


def _explain_merges(live, result) -> None:
    """For each container that had hints: the Topology Manager's cross product (as `labkit numa merge`)."""
    from labkit.numa.display import cross_product_table, format_hint
    from labkit.numa.config import load_config
    from labkit.numa.merge import HintMerger, NUMAInfo, Policy, provider_list_labels
    from labkit.numa.topologymanager import PolicyOptions

    config = load_config(live.config_path)
    if result.admission is None or config.topology_manager_policy == "none":
        return
    machine = live.machine()
    numa_info = NUMAInfo(machine.node_ids, {n.node_id: list(n.distances or []) for n in machine.nodes})
    closest = PolicyOptions.parse(config.topology_manager_policy_options).prefer_closest_numa
    for entry in result.admission.containers:
        if not entry.evaluated or not entry.hints:
            continue
        providers = [{resource: hints} for resource, hints in entry.hints.items()]
        merged = Policy(config.topology_manager_policy, numa_info, closest).merge(providers)
        typer.echo(f"{result.pod.key}/{entry.name}: {config.topology_manager_policy} picks {format_hint(merged.hint)}")
        merger = HintMerger(numa_info, merged.lists, config.topology_manager_policy, closest)
        cross_product_table(merged.lists, provider_list_labels(providers), numa_info, merger)


def delete(
    name: str = typer.Argument(..., metavar="POD", help="Name of a Pod on the live node (or NAMESPACE/NAME, as "
                                "`labkit numa show` lists it)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="Its namespace [default: default]."),
):
    """Stop a Pod on the live node; its exclusive CPUs go back to the shared pool."""
    from labkit.numa.livenode import LiveNode

    if "/" in name and namespace is None:       # kube-system/node-agent, as `labkit numa show` names it
        namespace, name = name.split("/", 1)
    namespace = namespace or "default"
    env, state = _live_env()
    with state.locked():
        record = LiveNode(env).delete(name, namespace)
    typer.echo(f"deleted {record.key}")


def show(
    machine: Optional[str] = typer.Option(None, "--machine", help="Draw this machine (file or shipped name) "
                                          "instead of the live node."),
    pods: Optional[Path] = typer.Option(None, "-f", "--filename", help="With --machine: admit these Pods "
                                        "(no state) and draw where they land."),
    config: Optional[Path] = typer.Option(None, "--config", help="With --machine -f: the KubeletConfiguration."),
    svg: Optional[Path] = typer.Option(None, "--svg", help="Also write the picture as SVG to this file."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Draw a machine: sockets, NUMA nodes, cores and threads, coloured by who runs where."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.numa import diagram
    from labkit.numa.display import console as make_console

    console = make_console()
    if machine is None:
        if pods is not None or config is not None:
            raise LabkitError("-f and --config go with --machine (the live node has its own Pods and configuration)")
        from labkit.numa.livenode import LiveNode

        env, _state = _live_env()
        live = LiveNode(env)
        node = live.kubelet()
        views = live.views(node)
        if as_json:
            typer.echo(json.dumps({"shared_pool": sorted(node.shared_pool()), "reserved_cpus": sorted(node.reserved_cpus()),
                                   "containers": [_view_json(v) for v in views]}, indent=2))
            return
        title = f"live node ({live.machine_path})"
        machine_dict, placement = live.machine().to_dict(), live.placement(node)
        console.print(_views_table(views, "containers on the live node"))
    else:
        if as_json:
            raise LabkitError("--json shows the live node; leave out --machine")
        from labkit.numa.machine import load_machine

        the_machine = load_machine(machine)
        machine_dict, placement, title = the_machine.to_dict(), diagram.Placement(), f"machine {machine}"
        if pods is not None or config is not None:   # --config alone: the node as kubelet sets it up, no Pods
            placement = _simulated_placement(the_machine, pods, config)
    console.print(diagram.terminal(machine_dict, placement, title))
    if svg is not None:
        svg.write_text(diagram.svg(machine_dict, placement, title))
        typer.echo(f"wrote {svg}", err=True)


def _simulated_placement(machine, pods_path: Optional[Path], config_path: Optional[Path]):
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.diagram import Placement
    from labkit.numa.pods import load_pods

    from labkit.numa import withhold

    node = Node(machine, load_config(config_path))
    gate = withhold.Gate("labkit numa show")
    situations: list[str | None] = []
    results = node.admit_all(load_pods(pods_path),
                             before=lambda n, pod: situations.append(gate.admission(n, pod) or gate.qos(pod)
                                                                    or gate.merge(n, pod))) \
        if pods_path is not None else []
    pending = {i: ex for i, ex in enumerate(situations) if ex}
    if pending:     # the machine as kubelet sets it up, without the exercise's Pods
        exercise = pending[min(pending)]
        typer.echo(f"{pods_path} holds Pods of exercise {exercise}: the picture leaves them out; where they land "
                   f"is {withhold.message(exercise)}", err=True)
        results = results[:min(pending)]
        node = Node(machine, load_config(config_path))
        if results:
            node.admit_all([r.pod for r in results])
    placement = Placement(reserved=sorted(node.reserved_cpus()), shared_pool=sorted(node.shared_pool()),
                          memory_tables=node.memory_tables())
    for result in results:
        if not result.admitted:
            continue
        for entry in result.containers:
            label = f"{result.pod.name}/{entry.name}"
            if entry.exclusive:
                placement.exclusive[label] = sorted(entry.cpus)
            else:
                placement.shared.append(label)
            if entry.memory_nodes is not None:
                placement.memory[label] = list(entry.memory_nodes)
    return placement
