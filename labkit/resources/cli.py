"""`labkit resources ...`: Pods on the resources lab's live nodes, what kubelet writes into their
cgroups, what the kernel counts, and the eviction manager.

`plan` and `convert` work anywhere; the others work on the nodes of the running `resources` lab
(`labkit run resources` builds them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts
from labkit.errors import LabkitError

LAB_ID = "resources"
app = typer.Typer(help="Pod resources as cgroups: QoS, CPU shares/weight and quota, memory limits, OOM, eviction.",
                  no_args_is_help=True)
NODE_HELP = "The node (see `labkit resources nodes`); default: the Pod's spec.nodeName, else node-1."


def _env():
    from labkit import runner
    return runner.running_env(LAB_ID, "the nodes belong")


def nodes(env) -> dict:
    from labkit.resources.node import lab_nodes
    return lab_nodes(env)


def node(env, name: str | None):
    found = nodes(env)
    name = name or "node-1"
    if name not in found:
        raise LabkitError(f"no node {name!r} (nodes: {', '.join(found) or 'none'})")
    return found[name]


def _mib(value: int | None) -> str:
    if value is None:
        return "-"
    return f"{value / 2 ** 20:.1f}Mi"


def _spec(c) -> str:
    def show(values):
        return ",".join(f"{k}={v}" for k, v in sorted(values.items()) if k in ("cpu", "memory")) or "-"
    return f"req {show(c.requests)} / lim {show(c.limits)}"


FILENAME_HELP = "Pods (YAML: a Pod, several, or a List): a file, a directory's .yaml/.yml/.json files, or - (standard input); repeatable."


@app.command()
def apply(filename: list[str] = typer.Option(..., "-f", "--filename", metavar="PATH", help=FILENAME_HELP),
          node_name: Optional[str] = typer.Option(None, "--node", help=NODE_HELP)):
    """Run Pods on a node: defaulting and validation as the API server, then kubelet and the runtime."""
    import re

    from labkit.resources import situations

    from labkit.resources.node import load_documents

    env = _env()
    target = node(env, node_name)
    errors = []
    pods = [pod for path in cliopts.filename_paths(filename)
            for pod in load_documents(path, target.name, target.config.priority_classes, errors)]
    for pod in pods:
        where = node(env, pod.node)
        try:
            applied = where.apply([pod])
        except LabkitError as exc:     # kubectl apply goes on with the file's other objects
            errors.append(str(exc))
            continue
        for name, outcome in applied:
            if situations.is_qos_pod(env.lab, pod) and not situations.reveal(env.lab, "qos", "labkit resources apply"):
                outcome = re.sub(r" \((Guaranteed|Burstable|BestEffort)\)$", " (QoS class withheld: exercise qos)", outcome)
            typer.echo(f"pod/{name} on {where.name}: {outcome}")
    if errors:
        raise LabkitError("\n".join(errors))


def pod_name(value: str) -> str:
    """A Pod named as kubectl takes it: NAME or pod/NAME (pods/NAME, po/NAME)."""
    kind, slash, name = value.partition("/")
    if not slash:
        return value
    if kind not in ("pod", "pods", "po") or not name:
        raise LabkitError(f"{value!r}: the lab's nodes run Pods only (write NAME or pod/NAME)")
    return name


def _pods_in_files(values: list[str]) -> list[tuple[str, str | None]]:
    """(name, spec.nodeName) of every Pod in the files, as `kubectl delete -f` reads them."""
    from labkit.errors import ConfigError
    from labkit.inputs import load_yaml_all

    found = []
    for path in cliopts.filename_paths(values):
        for doc in load_yaml_all(path):
            items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") else [doc]
            for obj in items or []:
                if obj is None:
                    continue
                name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
                if not isinstance(obj, dict) or obj.get("kind") != "Pod" or not name:
                    raise ConfigError(path, None, "expected Pods with a metadata.name (the lab's nodes run Pods only)")
                found.append((name, (obj.get("spec") or {}).get("nodeName")))
    return found


@app.command()
def delete(pods: Optional[list[str]] = typer.Argument(None, metavar="[POD...]", help="NAME or pod/NAME."),
           filename: Optional[list[str]] = typer.Option(None, "-f", "--filename", metavar="PATH",
                                                        help="The Pods of these files (as for apply)."),
           node_name: Optional[str] = typer.Option(None, "--node", help=NODE_HELP)):
    """Delete Pods: their containers stop, their cgroups go. Without --node, on the node each is on."""
    if bool(pods) == bool(filename):
        raise LabkitError("name the Pods to delete, or give their files with -f/--filename (not both)")
    wanted = [(pod_name(p), None) for p in pods or []] + _pods_in_files(filename or [])
    env = _env()
    from labkit.resources import resize

    for pod, in_file in wanted:
        target = _node_of(env, pod, node_name, in_file)
        target.delete(pod)
        typer.echo(f'pod "{pod}" deleted')
        for line in resize.retry_pending(target):      # a deferred resize may fit now
            typer.echo(line)


@app.command()
def patch(pod: str = typer.Argument(..., metavar="POD", help="NAME or pod/NAME."),
          subresource: str = typer.Option(..., "--subresource",
                                          help="resize: the Pod's CPU and memory, changed in place (the only one "
                                               "served here)."),
          patch_text: str = typer.Option(..., "-p", "--patch", help="The patch (JSON or YAML)."),
          patch_type: str = typer.Option("strategic", "--type", help="strategic, merge or json."),
          node_name: Optional[str] = typer.Option(None, "--node", help="The node the Pod is on (default: the one "
                                                                          "that has it).")):
    """Resize a running Pod in place, as `kubectl patch pod POD --subresource resize -p PATCH` does on a
    v1.34 cluster: the API server's checks, then the node's kubelet rewrites the cgroups (or says
    why the resize is pending)."""
    from labkit.resources import resize

    if subresource != "resize":
        raise LabkitError(f"--subresource {subresource!r}: the lab's nodes serve only the resize subresource "
                          "(the Pods' spec is otherwise changed by deleting and applying them)")
    env = _env()
    name = pod_name(pod)
    target = _node_of(env, name, node_name)
    # the API server refuses a resize that changes the Pod's QoS class, naming the class
    # (ValidatePodResize): until the qos answer is recorded, the qos exercise's own Pods are not
    # resized (whether one is taken tells the class), and the refusal of a Pod of their shape
    # elsewhere (frontend, resized for exercise throttled) does not name the class
    # (labkit.predictions; the answer kept when either goes ahead)
    from labkit.resources import situations
    params = env.lab.exercise("qos").params
    record = target.record(name)
    shaped = record is not None and situations.is_qos_pod(env.lab, target.pod(record))
    if shaped and target.name == params["node"] and name in situations.qos_pods(env.lab) \
            and not situations.reveal(env.lab, "qos", "labkit resources patch"):
        raise LabkitError(situations.refusal(env.lab, "qos", f"a resize of Pod {name} (whether the API server takes "
                                                             "it, and why not, tells its QoS class)"))
    try:
        lines = resize.resize(target, name, patch_text, patch_type)
    except LabkitError as exc:
        if shaped and "Pod QOS Class may not change" in str(exc) \
                and not situations.reveal(env.lab, "qos", "labkit resources patch"):
            masked = re.sub(r'Invalid value: "[A-Za-z]+": Pod QOS Class', f"Invalid value: {WITHHELD}: Pod QOS Class",
                            str(exc))
            raise LabkitError(masked + "\n" + situations.refusal(env.lab, "qos", f"the QoS class of Pod {name}")) \
                from None
        raise
    for line in lines:
        typer.echo(line)


def _node_of(env, pod: str, node_name: str | None, in_file: str | None = None):
    """The node a Pod is on: --node when given, else the one that has it (else its file's nodeName)."""
    if node_name is not None:
        return node(env, node_name)
    holding = [n for n in nodes(env).values() if n.record(pod) is not None]
    if len(holding) > 1:
        raise LabkitError(f'pod "{pod}" is on {", ".join(n.name for n in holding)}: name one with --node')
    return holding[0] if holding else node(env, in_file)


@app.command("nodes")
def list_nodes(output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
               as_json: bool = cliopts.legacy_json_option()):
    """The lab's nodes: memory capacity (the lab's budget), allocatable, eviction threshold,
    memory.available, and the MemoryPressure condition as the eviction manager last left it; the
    PriorityClasses Pods may name."""
    from labkit.resources import pressure

    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    env = _env()
    rows = []
    for n in nodes(env).values():
        available, working_set = n.memory_available()
        rows.append({"node": n.name, "capacity": n.config.memory_capacity, "allocatable": n.config.allocatable_memory,
                     "evictionHard": n.config.eviction_hard, "memory.available": available,
                     "working_set": working_set, "cgroup": str(n.cgroups.paths(n.rel("kubepods"))["memory"]),
                     "conditions": [pressure.condition(n.dir)]})
    from labkit.pods import BUILTIN_PRIORITY_CLASSES

    classes = {**BUILTIN_PRIORITY_CLASSES, **_lab_priority_classes()}
    if as_json:
        typer.echo(json.dumps({"nodes": rows, "priorityClasses": classes}, indent=2))
        return
    typer.echo("PriorityClasses of the lab's cluster: " + ", ".join(f"{k} {v}" for k, v in classes.items()))
    for r in rows:
        condition = r["conditions"][0]
        typer.echo(f"{r['node']}: memory capacity {_mib(r['capacity'])}, allocatable {_mib(r['allocatable'])}, "
                   f"evictionHard {r['evictionHard']}, memory.available now {_mib(r['memory.available'])}, "
                   f"MemoryPressure {condition['status']} ({condition['reason']})  ({r['cgroup']})")


def _pod_rows(n) -> list[dict]:
    rows = []
    for record in n.records():
        from labkit.resources import resize

        pod = n.pod(record)
        containers = []
        specs = {c.name: c for c in pod.all_containers()}
        for view in n.containers(record):
            entry = {"name": view.name, "state": view.state, "reason": view.reason, "exit_code": view.exit_code,
                     "pids": view.pids, "oom_score_adj": view.oom_score_adj, "cgroup": view.cgroup,
                     "kubelet_oom_score_adj": record["containers"][view.name]["oom_score_adj"],
                     "spec": _spec(specs[view.name]),
                     "restartCount": record["containers"][view.name].get("restartCount", 0)}
            entry.update(resize.container_status(record, view.name))
            if n.cgroups.exists(view.cgroup):
                entry["cgroup_settings"] = n.cgroups.settings(view.cgroup)
                cpu = n.cgroups.cpu(view.cgroup)
                memory = n.cgroups.memory(view.cgroup)
                entry.update({"cpu_usage_ms": cpu.usage_ns // 10 ** 6, "nr_periods": cpu.nr_periods,
                              "nr_throttled": cpu.nr_throttled, "throttled_ms": cpu.throttled_ns // 10 ** 6,
                              "memory_working_set": memory.working_set, "memory_limit": memory.limit,
                              "oom_kills": memory.oom_kills})
            containers.append(entry)
        settings = n.cgroups.settings(record["cgroup"]) if n.cgroups.exists(record["cgroup"]) else None
        rows.append({"name": record["name"], "node": n.name, "uid": record["uid"], "qos": record["qos"],
                     "priority": pod.priority, "phase": record["status"]["phase"],
                     "reason": record["status"].get("reason", ""), "message": record["status"].get("message", ""),
                     "conditions": record["status"].get("conditions", []),
                     "cgroup": record["cgroup"], "cgroup_settings": settings, "containers": containers})
    return rows


GET_FORMATS = ("text", "json", "yaml", "name")


@app.command()
def get(names: Optional[list[str]] = typer.Argument(None, metavar="[POD...]", help="Only these Pods (NAME or pod/NAME)."),
        node_name: Optional[str] = typer.Option(None, "--node", help="Only this node (default: all)."),
        output: Optional[str] = cliopts.output_option(GET_FORMATS, "text"),
        as_json: bool = cliopts.legacy_json_option()):
    """Pods, their QoS class and state; each container's cgroup settings next to its spec."""
    fmt = cliopts.resolve_output(output, GET_FORMATS, "text", legacy_json=as_json)[0]
    env = _env()
    selected = [node(env, node_name)] if node_name else list(nodes(env).values())
    rows = [row for n in selected for row in _pod_rows(n)]
    if names:
        wanted = [pod_name(n) for n in names]
        missing = [n for n in wanted if n not in {row["name"] for row in rows}]
        if missing:
            raise LabkitError("\n".join(f'Error from server (NotFound): pods "{n}" not found' for n in missing))
        rows = [row for row in rows if row["name"] in wanted]
    from labkit.resources import situations
    like = {(n.name, r["name"]) for n in selected for r in n.records() if situations.is_qos_pod(env.lab, n.pod(r))}
    note = "\n".join(filter(None, (_withhold_qos(env, rows, like), _withhold_weight(env, rows))))
    if fmt != "text":
        cliopts.print_data(rows, fmt, name=lambda row: f"pod/{row['name']}")
        if note:
            typer.echo(note, err=True)
        return
    for row in rows:
        status = row["phase"] + (f" ({row['reason']})" if row["reason"] else "")
        typer.echo(f"{row['node']}  pod/{row['name']}  {row['qos']}  priority {row['priority']}  {status}  "
                   f"cgroup {row['cgroup']}")
        if row["message"]:
            typer.echo(f"    message: {row['message']}")
        for condition in (c for c in row["conditions"] if c["type"].startswith("PodResize")):
            typer.echo(f"    condition {condition['type']}: {condition.get('reason', '')}"
                       + (f": {condition['message']}" if condition.get("message") else ""))
        if row["cgroup_settings"]:
            typer.echo(f"    pod cgroup: {_settings(row['cgroup_settings'])}")
        elif row.get("pod_cgroup") == WITHHELD:
            typer.echo(f"    pod cgroup: {WITHHELD}")
        for c in row["containers"]:
            state = c["state"] + (f" ({c['reason']}" + (f", exit {c['exit_code']}" if c["exit_code"] is not None else "")
                                  + ")" if c["reason"] else "")
            adj = "-" if c["oom_score_adj"] is None else str(c["oom_score_adj"])
            if c["oom_score_adj"] is not None and c["oom_score_adj"] != c["kubelet_oom_score_adj"]:
                adj += f" (kubelet asked {c['kubelet_oom_score_adj']}: this kernel refused it, see `labkit doctor`)"
            typer.echo(f"    {c['name']}: {state}, pids {c['pids'] or '-'}, oom_score_adj {adj}, {c['spec']}")
            if "cgroup_settings" in c:
                typer.echo(f"      cgroup {c['cgroup']}: {_settings(c['cgroup_settings'])}")
    if note:
        typer.echo(note, err=True)


WITHHELD = "(withheld)"


def _withhold_qos(env, rows: list[dict], like=frozenset()) -> str:
    """The qos exercise's Pods on its node, and on any node every Pod whose spec is one of theirs
    under other names or with another workload (`like`: (node, name) pairs; a copy is classified and
    scored as the original is): their QoS class, oom_score_adj and cgroup paths (which name the QoS
    class) only once the qos answer is recorded (labkit.predictions)."""
    from labkit.resources import situations

    params = env.lab.exercise("qos").params
    names = set(situations.qos_pods(env.lab))
    mine = [r for r in rows if (r["node"] == params["node"] and r["name"] in names) or (r["node"], r["name"]) in like]
    if not mine or situations.reveal(env.lab, "qos", "labkit resources get"):
        return ""
    for row in mine:
        # the pod cgroup's settings tell the class too (cpu.shares=2: BestEffort; a memory limit on
        # the pod cgroup: every container limited), and a process id leads to /proc/<pid>/oom_score_adj
        # and /proc/<pid>/cgroup, which name the answer
        row.update(qos=WITHHELD, cgroup=WITHHELD, cgroup_settings=None, pod_cgroup=WITHHELD)
        for c in row["containers"]:
            c.update(oom_score_adj=None, kubelet_oom_score_adj=None, cgroup=WITHHELD, pids=WITHHELD)
    return situations.refusal(env.lab, "qos", "QoS class, oom_score_adj, cgroups and processes of "
                                       f"{', '.join(sorted(n['name'] for n in mine))}")


def _withhold_weight(env, rows: list[dict]) -> str:
    """A Pod's cgroup whose cpu.shares or cpu.weight is the weight exercise's value, or one next to
    it, shows what `convert` and `plan` withhold until the weight answer is recorded: the requests
    behind that value (a Pod applied with the request one tries, `get` read back, one millicore at
    a time). Its value is withheld as theirs is; the weight Pod's own pod cgroup shows the value
    the exercise asks to read, and only that one: resized in place to a request next to its own,
    it would show that request's value as any other Pod would."""
    from labkit.resources import situations

    params = env.lab.exercise("weight").params
    own = situations.weight_pod(env.lab)
    own_values = dict(zip(("cpu.shares", "cpu.weight"), situations.weight_values(env.lab)))
    hidden = []
    for row in rows:
        settings = [c["cgroup_settings"] for c in row["containers"] if c.get("cgroup_settings")]
        pod = row["cgroup_settings"]
        if pod and not (row["node"] == params["node"] and row["name"] == own.name
                        and all(pod[k] == v for k, v in own_values.items() if k in pod)):
            settings.append(pod)
        for values in settings:
            if _weight_answer(values.get("cpu.shares"), values.get("cpu.weight"), "labkit resources get"):
                for key in ("cpu.shares", "cpu.weight"):
                    if key in values:
                        values[key] = WITHHELD
                hidden.append(row["name"])
    if not hidden:
        return ""
    return situations.refusal(env.lab, "weight", f"cpu.shares and cpu.weight of {', '.join(sorted(set(hidden)))} "
                                                 "(cpu requests that give the weight exercise's value, or one next to it)")


def _settings(settings: dict) -> str:
    out = []
    for key, value in settings.items():
        if key.startswith("memory") and isinstance(value, int):
            value = f"{value} ({_mib(value)})"
        out.append(f"{key}={'max' if value is None else value}")
    return " ".join(out)


@app.command()
def top(node_name: Optional[str] = typer.Option(None, "--node", help="Only this node (default: all)."),
        interval: float = typer.Option(1.0, "--interval", help="Seconds between the two readings."),
        watch: bool = typer.Option(False, "--watch", help="Repeat until interrupted.")):
    """Live usage per container: CPU (share of one CPU), CFS periods and throttling, memory, OOM kills."""
    import time

    env = _env()
    selected = [node(env, node_name)] if node_name else list(nodes(env).values())
    while True:
        first = {(n.name, r["name"], c): n.cgroups.cpu(e["cgroup"]) for n in selected for r in n.records()
                 for c, e in r["containers"].items() if n.cgroups.exists(e["cgroup"])}
        time.sleep(interval)
        typer.echo(f"{'node':7} {'pod/container':28} {'cpu':>6} {'periods':>8} {'throttled':>9} {'thr ms':>7} "
                   f"{'memory':>9} {'limit':>9} {'oom_kill':>8}")
        for n in selected:
            available, _ws = n.memory_available()
            for r in n.records():
                for c, e in r["containers"].items():
                    before = first.get((n.name, r["name"], c))
                    if before is None or not n.cgroups.exists(e["cgroup"]):
                        continue
                    now = n.cgroups.cpu(e["cgroup"])
                    memory = n.cgroups.memory(e["cgroup"])
                    cpu = (now.usage_ns - before.usage_ns) / (interval * 10 ** 9)
                    typer.echo(f"{n.name:7} {r['name'] + '/' + c:28} {cpu * 1000:>5.0f}m "
                               f"{now.nr_periods - before.nr_periods:>8} {now.nr_throttled - before.nr_throttled:>9} "
                               f"{(now.throttled_ns - before.throttled_ns) // 10 ** 6:>7} "
                               f"{_mib(memory.working_set):>9} {_mib(memory.limit):>9} {memory.oom_kills:>8}")
            typer.echo(f"{n.name}: memory.available {_mib(available)} "
                       f"(eviction threshold {n.config.eviction_hard.get('memory.available')})")
        if not watch:
            return


@app.command("oom-kills")
def oom_kills(node_name: Optional[str] = typer.Option(None, "--node", help="Only this node (default: all)."),
              output: Optional[str] = cliopts.output_option(("text", "json", "yaml"), "text")):
    """The kernel's log of OOM kills in the lab's cgroups: whose limit was hit, who died."""
    from dataclasses import asdict

    from labkit import cgroups
    from labkit.resources.kmsg import oom_kills as read, seconds_since_boot

    fmt = cliopts.resolve_output(output, ("text", "json", "yaml"), "text")[0]
    env = _env()
    marker = f"{cgroups.lab_root_name(env)}/" + (f"{node_name}/" if node_name else "")
    kills = read(marker, since=seconds_since_boot(env.state.status.get("started", 0)))
    if fmt != "text":
        cliopts.print_data([{**asdict(k), "ownLimit": k.own_limit} for k in kills], fmt)
        return
    if not kills:
        typer.echo("the kernel's log has no OOM kill in the lab's cgroups" +
                   (" (or it cannot be read here)" if not Path("/dev/kmsg").exists() else ""))
    for k in kills:
        where = (f"the {k.limit_of} limit was hit ({k.oom_memcg})" if k.oom_memcg else
                 "the whole machine ran out of memory (global_oom)")
        typer.echo(f"{k.task} (pid {k.pid}, oom_score_adj {k.oom_score_adj}) killed in {k.task_memcg}: "
                   f"{k.constraint}, {where}")


@app.command()
def evict(node_name: Optional[str] = typer.Option(None, "--node", help=NODE_HELP),
          passes: int = typer.Option(20, "--passes", min=1, help="At most this many passes.")):
    """Run kubelet's eviction manager on a node now: pass after pass until no threshold is met."""
    from labkit.resources import eviction

    from labkit.resources import situations

    env = _env()
    n = node(env, node_name)
    exercise = env.lab.exercise("eviction-order")
    active = [pod for _r, pod in n.active()]
    ours = situations.eviction_pods_among(env.lab, active)
    # a ranking orders Pods: one of the exercise's, by name, or one shaped as one of them beside any
    # other Pod is about to be ranked (its place beside a Pod of the student's choice, one
    # look-alike at a time, would assemble the exercise's order); a Pod alone on the node is no order
    named = ours & situations.eviction_pod_names(env.lab)
    gated = bool(named or (ours and len(active) >= 2))
    if gated and not situations.answered(env.lab, exercise.id):
        raise LabkitError(situations.refusal(env.lab, exercise.id, f"the eviction manager's ranking of {', '.join(sorted(ours))}"))

    evicted = []

    def say(result):
        o = result.observation
        typer.echo(f"{n.name}: memory.available {_mib(o.available)} (working set {_mib(o.working_set)}), "
                   f"threshold {_mib(o.threshold)}" + (f" + minimum reclaim {_mib(o.min_reclaim)}" if o.min_reclaim else ""))
        if result.ranking:
            if gated:   # the prediction is kept as the ranking is shown, not when a run ranks nothing
                situations.reveal(env.lab, exercise.id, "labkit resources evict")
            typer.echo("  ranking: " + ", ".join(
                f"{c.pod.name} ({'over' if c.exceeds else 'under'} request, priority {c.pod.priority}, "
                f"usage-request {_mib(c.above_request)})" for c in result.ranking))
        for name in result.skipped_critical:
            typer.echo(f"  cannot evict a critical pod: {name}")
        if result.evicted:
            evicted.append(result.evicted)
            typer.echo(f"  Warning EvictionThresholdMet node/{n.name}: Attempting to reclaim memory")
            typer.echo(f"  evicted pod/{result.evicted}: {result.message}")
        else:
            typer.echo("  no threshold met: nothing to evict")

    eviction.run(n, say, max_passes=passes)
    if evicted:         # an evicted Pod frees what a deferred resize waits for
        from labkit.resources import resize
        for line in resize.retry_pending(n):
            typer.echo(line)


@app.command()
def plan(filename: Path = typer.Option(..., "-f", "--filename", help="Pods (YAML)."),
         memory_capacity: Optional[str] = typer.Option(
             None, "--memory-capacity",
             help="The node's memory, for oom_score_adj (default: that of the lab node in the Pod's spec.nodeName, else 2Gi)."),
         priority_class: list[str] = typer.Option(
             [], "--priority-class", metavar="NAME=VALUE",
             help="A PriorityClass the Pods may name (repeatable); the lab's own (nodes.yaml) are known already."),
         output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
        as_json: bool = cliopts.legacy_json_option()):
    """What kubelet and the runtime would write for Pods, without running them: QoS, pod and
    container cgroups (v1 and v2 values), oom_score_adj."""
    as_json = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)[0] == "json"
    from labkit.quantity import Quantity
    from labkit.resources import kubelet
    from labkit.pods import qos_class
    from labkit.resources.node import load_pods_strict

    capacity_given = memory_capacity is not None
    capacity = Quantity.parse(memory_capacity or "2Gi").value_int()
    lab_capacities = _lab_memory_capacities()
    classes = _lab_priority_classes()
    for item in priority_class:
        name, _, value = item.partition("=")
        try:
            classes[name.strip()] = int(value)
        except ValueError:
            raise LabkitError(f"--priority-class {item!r}: expected NAME=VALUE with an integer value") from None
    from labkit.labs import get_lab
    from labkit.resources import situations

    pods = load_pods_strict(filename, priority_classes=classes)
    lab = get_lab(LAB_ID)
    hidden = [p.name for p in pods if situations.is_qos_pod(lab, p)]
    if hidden and not situations.reveal(lab, "qos", "labkit resources plan"):
        pods = [p for p in pods if p.name not in hidden]
        typer.echo(situations.refusal(lab, "qos", f"what kubelet makes of {', '.join(hidden)} (the qos exercise's Pods, "
                                                      "or shaped as one: the same cpu and memory requests and limits set, "
                                                      "whatever the amounts)"),
                   err=True)
    # the cpu.shares and cpu.weight of a pod or container cgroup whose request lands on the weight
    # Pod's value answer the weight exercise forward, as `convert --cpu` would; the weight Pod itself
    # shows only the value the exercise asks to read (its pod cgroup's)
    weight_pod = situations.weight_pod(lab)

    def lands(p) -> bool:
        cgroups = [kubelet.container_cgroup(p, c) for c in p.all_containers()]
        if not situations.same_spec(p, weight_pod):
            cgroups.append(kubelet.pod_cgroup(p))
        return any(_weight_answer(g.cpu_shares, None, "labkit resources plan") for g in cgroups if g.cpu_shares)
    landing = [p.name for p in pods if lands(p)]
    if landing:
        pods = [p for p in pods if p.name not in landing]
        typer.echo(situations.refusal(lab, "weight", f"what kubelet makes of {', '.join(landing)} (cpu requests "
                                                         "that give the weight exercise's value, or one next to it)"),
                   err=True)
    out = []
    for pod in pods:
        def both(s):
            d = s.to_json()
            d["cpu.weight (v2)"] = kubelet.shares_to_weight(s.cpu_shares) if s.cpu_shares else None
            if d.pop("no_swap"):      # NoSwap, where the kernel has the swap controller
                d["memory.swap.max (v2)"] = 0
                d["memory.memsw.limit_in_bytes (v1)"] = s.memory_limit
            return d
        # a Pod bound to one of the lab's nodes (spec.nodeName) gets that node's memory capacity
        own = lab_capacities.get(pod.node, capacity) if not capacity_given else capacity
        out.append({"pod": pod.name, "node": pod.node or None, "memory_capacity": own, "qos": qos_class(pod),
                    "pod_cgroup": both(kubelet.pod_cgroup(pod)),
                    "containers": {c.name: {**both(kubelet.container_cgroup(pod, c)),
                                            "oom_score_adj": kubelet.oom_score_adj(pod, c, own)}
                                   for c in pod.all_containers()}})
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    for p in out:
        on = f" on {p['node']}" if p["node"] else ""
        typer.echo(f"pod/{p['pod']}{on} (memory capacity {_mib(p['memory_capacity'])}): {p['qos']}; "
                   f"pod cgroup {p['pod_cgroup']}")
        for name, c in p["containers"].items():
            typer.echo(f"  {name}: {c}")


# Forward and back conversions are withheld for the weight Pod's cpu.weight and its neighbours on
# either side: withholding that value's requests alone made the edges of the refusals the answer
# (`convert --cpu` one millicore at a time, refused from min_millicores to max_millicores).
WEIGHT_BAND = 1


def _weight_answer(shares: int | None, weight: int | None, tool: str = "labkit resources convert") -> bool:
    """True when converting this value (back, or forward from a request) would answer the
    weight exercise before its answer is recorded: the pod cgroup's cpu.shares or cpu.weight,
    or shares giving that weight, or a weight next to it, whose edges are the answer's
    (`plan` converts a Pod's requests forward as `convert --cpu` does)."""
    from labkit.labs import get_lab
    from labkit.resources import kubelet, situations

    pod_shares, pod_weight = situations.weight_values(get_lab(LAB_ID))
    ours = (shares is not None and (shares == pod_shares
                                    or abs(kubelet.shares_to_weight(max(shares, 2)) - pod_weight) <= WEIGHT_BAND)) \
        or (weight is not None and abs(weight - pod_weight) <= WEIGHT_BAND)
    return ours and not situations.reveal(get_lab(LAB_ID), "weight", tool)


def _lab_memory_capacities() -> dict[str, int]:
    """The lab's nodes' memory capacities (labs/resources/nodes.yaml), by node name."""
    from labkit.inputs import load_yaml
    from labkit.labs import get_lab
    from labkit.quantity import Quantity

    data = load_yaml(get_lab(LAB_ID).directory / "nodes.yaml") or {}
    return {n["name"]: Quantity.parse(n["memoryCapacity"]).value_int() for n in data.get("nodes") or []
            if isinstance(n, dict) and "name" in n and "memoryCapacity" in n}


def _lab_priority_classes() -> dict[str, int]:
    """The PriorityClasses of the lab's cluster (labs/resources/nodes.yaml), as the lab's API
    server would have them."""
    from labkit.inputs import load_yaml
    from labkit.labs import get_lab

    data = load_yaml(get_lab("resources").directory / "nodes.yaml") or {}
    return {str(k): int(v) for k, v in (data.get("priorityClasses") or {}).items()}


@app.command()
def convert(cpu: Optional[str] = typer.Option(None, "--cpu", help="A cpu quantity, e.g. 300m."),
            shares: Optional[int] = typer.Option(None, "--shares", help="A cpu.shares value."),
            weight: Optional[int] = typer.Option(None, "--weight", help="A cpu.weight value (cgroup v2).")):
    """Convert between a cpu request, cpu.shares and cpu.weight (kubelet's and newer runc's)."""
    from labkit.labs import get_lab
    from labkit.quantity import Quantity
    from labkit.resources import kubelet, situations

    if sum(x is not None for x in (cpu, shares, weight)) != 1:
        raise LabkitError("give exactly one of --cpu, --shares, --weight")
    if cpu is not None:
        milli = Quantity.parse(cpu).milli_value()
        s = kubelet.milli_cpu_to_shares(milli)
        if _weight_answer(s, None):     # forward too: a request that lands on the weight Pod's value
            raise LabkitError(situations.refusal(get_lab(LAB_ID), "weight", f"the cpu.shares and cpu.weight of cpu {cpu}"))
        typer.echo(f"cpu {cpu} = {milli}m -> cpu.shares {s} -> cpu.weight {kubelet.shares_to_weight(s)} "
                   f"(kubelet, runc < 1.3.2) or {kubelet.runc_weight_new(s)} (runc >= 1.3.2, crun >= 1.23)")
    elif _weight_answer(shares, weight):
        raise LabkitError(situations.refusal(get_lab(LAB_ID), "weight", f"the cpu requests behind {'cpu.shares' if shares is not None else 'cpu.weight'} "
                                                         f"{shares if shares is not None else weight}"))
    elif shares is not None:
        if not kubelet.MIN_SHARES <= shares <= kubelet.MAX_SHARES:
            raise LabkitError(f"cpu.shares {shares} is outside {kubelet.MIN_SHARES}..{kubelet.MAX_SHARES}, "
                              "the values MilliCPUToShares gives")
        lo, hi = kubelet.shares_to_milli_range(shares)
        typer.echo(f"cpu.shares {shares} <- cpu requests {_milli_range(lo, hi, shares == kubelet.MAX_SHARES)}; "
                   f"cpu.weight {kubelet.shares_to_weight(shares)}")
    else:
        try:
            lo, hi = kubelet.weight_to_milli_range(weight)
        except ValueError as exc:
            raise LabkitError(str(exc)) from None
        typer.echo(f"cpu.weight {weight} (kubelet's line) <- cpu requests {_milli_range(lo, hi, weight == 10000)}")


def _milli_range(lo: int, hi: int, capped: bool) -> str:
    """A range of cpu requests; at the top, MilliCPUToShares caps every larger request at 262144
    shares (weight 10000), so the range has no upper end."""
    return f"{lo}m and above (MilliCPUToShares caps larger requests at 262144 shares)" if capped else f"{lo}m..{hi}m"
