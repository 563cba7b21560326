"""`labkit kube-proxy apply|get|delete|curl|graph`: commands that work on the running kube-proxy lab.

Registered in the kube-proxy sub-app (labkit/kubeproxy/cli.py). They need `labkit run kube-proxy`
first; heavy imports stay inside the functions so that the CLI starts fast.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts

LAB_ID = "kube-proxy"


def running_lab():
    """The LabEnv of the running kube-proxy lab (LabkitError if it is not running)."""
    from labkit import runner
    from labkit.errors import LabkitError
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab(LAB_ID)
    env = LabEnv(lab, LabState(lab.id))
    if not runner.lab_is_up(env):
        raise LabkitError(f"lab {LAB_ID} is not running: start it with `labkit run {LAB_ID}`")
    return env


@contextmanager
def locked_lab():
    """The running lab, locked against concurrent run/reset/cleanup/solve/apply."""
    from labkit.state import LabState

    with LabState(LAB_ID).locked():
        yield running_lab()


def apply(
    filename: list[str] = typer.Option(..., "-f", "--filename", metavar="PATH",
                                       help="Services and/or EndpointSlices (YAML, several documents or a List): a file, "
                                            "a directory's .yaml/.yml/.json files, or - (standard input); repeatable."),
    subresource: Optional[str] = typer.Option(None, "--subresource",
        help="status: replace only the Services' status (e.g. status.loadBalancer.ingress, as a load-balancer controller does)."),
):
    """Create or replace Services and EndpointSlices in the lab (like kubectl replace: their status is
    kept), then sync kube-proxy's rules on every node."""
    from labkit.errors import ConfigError, LabkitError
    from labkit.kubeproxy import live
    from labkit.kubeproxy.cluster_state import in_api_words, read_documents

    if subresource not in (None, "status"):
        raise LabkitError(f"--subresource: expected status, got {subresource!r}")
    files = cliopts.filename_paths(filename)
    documents = {file: read_documents(file) for file in files}
    report, synced = [], {}
    with locked_lab() as env:
        for file in files:
            refuse_unknown_fields(file, live.load(env))
        for file in files:                # as kubectl goes through its files, one after the other
            try:
                lines, nodes = live.apply_documents(env, documents[file], "STDIN" if file == "-" else str(file),
                                                    status=subresource == "status")
            except ConfigError as exc:
                raise in_api_words(exc, documents[file]) from None
            report += lines
            for node, changed in nodes.items():
                if changed is None or (node in synced and synced[node] is None):
                    synced[node] = None          # a full sync
                else:
                    synced[node] = (synced.get(node) or set()) | changed
    for line in report:
        print(line)
    _print_syncs(synced)


def _print_syncs(synced: dict) -> None:
    """What each node's kube-proxy did: a full sync (None), the chains it rewrote, or nothing."""
    for node, changed in synced.items():
        if changed is None:
            print(f"{node}: kube-proxy synced fully (its canary chain KUBE-PROXY-CANARY was gone, as after a flush)")
        elif changed:
            print(f"{node}: kube-proxy synced (rewrote the chains of {', '.join(sorted(changed))})")
        else:
            print(f"{node}: no service changed, no sync")


def delete(
    kind: Optional[str] = typer.Argument(None, metavar="KIND[/NAME]", help="services (svc) | endpointslices, or svc/NAME"),
    names: Optional[list[str]] = typer.Argument(None, metavar="[NAME...]", help="The objects of KIND to delete."),
    filename: Optional[list[str]] = typer.Option(None, "-f", "--filename", metavar="PATH",
                                                 help="The Services and EndpointSlices of these files: a file, a "
                                                      "directory's .yaml/.yml/.json files, or - (standard input)."),
):
    """Delete Services or EndpointSlices from the lab (like kubectl delete), then sync kube-proxy's
    rules on every node. A Service's EndpointSlices go with it."""
    from labkit.errors import ConfigError, LabkitError
    from labkit.inputs import load_yaml_all
    from labkit.kubeproxy import live

    refs: list[tuple[str, str, str]] = []
    if filename:
        if kind or names:
            raise LabkitError("give either KIND NAME... (or KIND/NAME) or -f/--filename, not both")
        for path in cliopts.filename_paths(filename):
            for doc in load_yaml_all(path):
                items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
                for obj in items or []:
                    if obj is None:
                        continue
                    meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
                    if not isinstance(obj, dict) or obj.get("kind") not in ("Service", "EndpointSlice") or not meta.get("name"):
                        raise ConfigError(path, None, "expected Services or EndpointSlices with a metadata.name "
                                                      "(pods and nodes are fixed by the lab)")
                    refs.append((obj["kind"], meta.get("namespace") or "default", meta["name"]))
    else:
        if not kind:
            raise LabkitError("name what to delete: KIND NAME..., KIND/NAME, or -f/--filename FILE")
        kind, slash, named = kind.partition("/")
        if kind not in KINDS:
            raise LabkitError(f'the server doesn\'t have a resource type "{kind}" in this lab: expected services (svc) '
                              "or endpointslices")
        plural = KINDS[kind][0]
        if plural not in ("services", "endpointslices"):
            raise LabkitError(f"{plural} are fixed by the lab: delete Services or EndpointSlices")
        wanted = ([named] if slash and named else []) + list(names or [])
        if not wanted:
            raise LabkitError(f"name the {plural} to delete (KIND NAME... or KIND/NAME)")
        for name in wanted:
            namespace, _, name = name.rpartition("/") if "/" in name else ("", "", name)
            refs.append(("Service" if plural == "services" else "EndpointSlice", namespace or "default", name))
    with locked_lab() as env:
        deleted, missing, synced = live.delete_objects(env, refs)
    for line in deleted:
        print(line)
    _print_syncs(synced)
    if missing:
        raise LabkitError("\n".join(missing))


def refuse_unknown_fields(file, state) -> None:
    """kubectl v1.34 validates strictly (fieldValidation=Strict): a field the kind does not have
    (`sessionAfinity`) or a key given twice refuses the whole file, in kube-apiserver's words
    (labkit.strict). The lab's apply replaces existing objects (kubectl replace: "replacing") and
    creates new ones ("creating")."""
    import yaml

    from labkit import strict
    from labkit.inputs import read_text

    text = read_text(file)
    positions = strict.key_positions(text)
    for index, doc in enumerate(yaml.safe_load_all(text)):
        where = positions[index] if index < len(positions) else strict.KeyPositions()
        items = [(doc, where)]
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            items = [(item, where.within(f"items[{i}].")) for i, item in enumerate(doc["items"])]
        for obj, at in items:
            if not isinstance(obj, dict):
                continue
            name = (obj.get("metadata") or {}).get("name")
            namespace = (obj.get("metadata") or {}).get("namespace") or "default"
            exists = ((state.service(name, namespace) is not None) if obj.get("kind") == "Service" else
                      any((s["metadata"].get("namespace") or "default", s["metadata"]["name"]) == (namespace, name)
                          for s in state.endpoint_slices))
            strict.check_object(obj, str(file), at, verb="replacing" if exists else "creating")


# kubectl's names of the lab's kinds: plural, singular, short name -> (plural, what `-o name` prints)
KINDS = {**{n: ("services", "service") for n in ("services", "service", "svc")},
         **{n: ("endpointslices", "endpointslice.discovery.k8s.io") for n in ("endpointslices", "endpointslice")},
         **{n: ("pods", "pod") for n in ("pods", "pod", "po")},
         **{n: ("nodes", "node") for n in ("nodes", "node", "no")}}
GET_FORMATS = ("table", "wide", "yaml", "json", "name")


def get(
    kind: str = typer.Argument(..., metavar="KIND[/NAME]", help="services (svc) | endpointslices | pods (po) | nodes (no), "
                                                             "or one object as svc/NAME"),
    name: Optional[str] = typer.Argument(None, metavar="NAME", help="Only this object."),
    output: Optional[str] = cliopts.output_option(GET_FORMATS, "table"),
    watch: bool = typer.Option(False, "--watch", "-w", help="After the list, print each object again when it changes "
                                                           "(until Ctrl-C), as kubectl get -w does."),
):
    """Show the lab's Services, EndpointSlices, pods or nodes (like kubectl get)."""
    import yaml

    from labkit.errors import LabkitError
    from labkit.kubeproxy import live

    if output is not None and output not in GET_FORMATS:
        raise LabkitError(f"-o/--output: expected one of {', '.join(GET_FORMATS)}, got {output!r}")
    fmt = output or "table"
    kind, slash, named = kind.partition("/")
    if slash and (name is not None or not named):
        raise LabkitError("name the object either as KIND/NAME or as KIND NAME")
    name = named or name
    if kind not in KINDS:
        raise LabkitError(f'the server doesn\'t have a resource type "{kind}" in this lab: expected services (svc), '
                          "endpointslices, pods (po) or nodes (no)")
    plural, shown = KINDS[kind]

    def select(state) -> list[dict]:
        every = {"services": state.services, "endpointslices": state.endpoint_slices, "pods": state.pods,
                 "nodes": state.nodes}[plural]
        return [o for o in every if name is None or o["metadata"]["name"] == name]

    env = running_lab()
    objects = select(live.load(env))
    if name is not None and not objects:
        raise LabkitError(f'Error from server (NotFound): {plural} "{name}" not found')
    if fmt == "yaml":
        sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False))
    elif fmt == "json":
        sys.stdout.write(json.dumps(objects[0] if name else {"kind": "List", "items": objects}, indent=2) + "\n")
    elif fmt == "name":
        sys.stdout.write("".join(f"{shown}/{o['metadata']['name']}\n" for o in objects))
    else:       # table; wide is the same table: it already has the node, IP and selector columns kubectl adds
        print_table(table(plural, objects))
    sys.stdout.flush()
    if watch:
        _watch(env, select, plural, fmt, shown, objects)


def _watch(env, select, plural: str, fmt: str, shown: str, seen: list[dict], interval: float = 1.0) -> None:
    """kubectl get -w: every object that changes (or appears) printed again, one row (or document)
    each, and a deleted one once more; until interrupted."""
    import time

    import yaml

    from labkit.kubeproxy import live

    def key(o):
        return (o["metadata"].get("namespace") or "", o["metadata"]["name"])

    last = {key(o): o for o in seen}
    try:
        while True:
            time.sleep(interval)
            now = {key(o): o for o in select(live.load(env))}
            changed = [o for k, o in now.items() if last.get(k) != o] + [o for k, o in last.items() if k not in now]
            last = now
            for o in changed:
                if fmt == "yaml":
                    sys.stdout.write("---\n" + yaml.safe_dump(o, sort_keys=False))
                elif fmt == "json":
                    sys.stdout.write(json.dumps(o, indent=2) + "\n")
                elif fmt == "name":
                    sys.stdout.write(f"{shown}/{o['metadata']['name']}\n")
                else:
                    print_table(table(plural, [o]), header=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


def table(kind: str, objects: list[dict]) -> list[list[str]]:
    """kubectl-get-like rows (header first)."""
    if kind in ("services", "svc"):
        rows = [["NAME", "TYPE", "CLUSTER-IP", "PORT(S)", "SELECTOR", "NOTES"]]
        for s in objects:
            spec = s["spec"]
            ports = ",".join(f"{p['port']}" + (f":{p['nodePort']}" if p.get("nodePort") else "") + f"/{p['protocol']}"
                             for p in spec.get("ports", []))
            notes = [f"{k}={spec[k]}" for k in ("externalTrafficPolicy", "internalTrafficPolicy") if spec.get(k, "Cluster") != "Cluster"]
            if spec.get("sessionAffinity", "None") != "None":
                notes.append(f"sessionAffinity={spec['sessionAffinity']}")
            notes += [f"label {k}" for k in (s["metadata"].get("labels") or {}) if k.startswith("service.kubernetes.io/")]
            selector = ",".join(f"{k}={v}" for k, v in (spec.get("selector") or {}).items()) or "<none>"
            rows.append([s["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP", ""), ports or "<none>",
                         selector, " ".join(notes)])
    elif kind == "endpointslices":
        rows = [["NAME", "SERVICE", "PORTS", "ENDPOINTS (node)"]]
        for s in objects:
            ports = ",".join(str(p["port"]) for p in s.get("ports") or []) or "<unset>"
            eps = ", ".join(f"{e['addresses'][0]} ({e.get('nodeName', '?')})" + ("" if (e.get("conditions") or {}).get("ready", True) else " not ready")
                            for e in s.get("endpoints") or []) or "<none>"
            rows.append([s["metadata"]["name"], (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name", ""), ports, eps])
    elif kind == "pods":
        rows = [["NAME", "NODE", "IP", "PORTS", "LABELS"]]
        for p in objects:
            ports = ",".join(str(port["containerPort"]) for c in p["spec"]["containers"] for port in c.get("ports", []))
            labels = ",".join(f"{k}={v}" for k, v in (p["metadata"].get("labels") or {}).items())
            rows.append([p["metadata"]["name"], p["spec"]["nodeName"], p["status"]["podIP"], ports, labels])
    else:
        rows = [["NAME", "INTERNAL-IP", "POD-CIDR"]]
        for n in objects:
            ip = next(a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP")
            rows.append([n["metadata"]["name"], ip, n["spec"]["podCIDR"]])
    return rows


def print_table(rows: list[list[str]], header: bool = True) -> None:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows if header else rows[1:]:
        print("   ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


def curl(
    from_host: str = typer.Option(..., "--from", help="A lab host: node1, node2, client or a pod (see `labkit run kube-proxy`)."),
    to: str = typer.Option(..., "--to", help="SERVICE[:PORT] (name or namespace/name) or IP:PORT."),
    count: int = typer.Option(10, "-n", "--count", min=1, max=10000, help="How many requests (each a new connection)."),
    source: Optional[str] = typer.Option(None, "--source", help="Send from this address of the host (e.g. one of the client's)."),
    timeout: float = typer.Option(1.0, "--timeout", help="Seconds to wait for each request."),
    output: Optional[str] = cliopts.output_option(("text", "json", "yaml"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Send real HTTP requests from a lab host and report which pods answered and the address each pod saw."""
    from labkit.kubeproxy import live

    fmt, _ = cliopts.resolve_output(output, ("text", "json", "yaml"), "text", legacy_json=as_json)
    from labkit.kubeproxy.situations import observed

    env = running_lab()
    state = live.load(env)
    target = live.resolve_target(state, to)
    note = observed(env, state, source, target.ip, target.port, "labkit kube-proxy curl")
    if note:
        print(note, file=sys.stderr)
    result = live.send(env, from_host, target.ip, target.port, count, source=source, timeout=timeout)
    if fmt != "text":
        cliopts.print_data({"from": from_host, "source": source, "to": target.description,
                            "ip": target.ip, "port": target.port, **result.to_dict()}, fmt)
        return
    via = f" (from {source})" if source else ""
    print(f"{count} requests from {from_host}{via} to {target.description}: {result.ok} answered")
    if result.answered:
        rows = [["pod", "node", "answers", "client address the pod saw"]]
        for pod, n in sorted(result.answered.items()):
            seen = ", ".join(f"{addr} ×{k}" if k > 1 else addr for addr, k in result.seen_clients[pod].most_common())
            rows.append([pod, result.nodes[pod], f"{n} ({100 * n / count:.0f}%)", seen])
        print_table(rows)
    if result.failures:
        print("failed: " + ", ".join(f"{err} ×{n}" for err, n in result.failures.most_common()))
    if not result.ok:
        raise typer.Exit(1)


GRAPH_FORMATS = ("text", "dot", "svg", "png")


def graph(
    node: str = typer.Option("node1", "--node", help="The node whose live rules to draw."),
    service: Optional[str] = typer.Option(None, "--service", help="Only the rules of this Service (name or namespace/name)."),
    table: str = typer.Option("nat", "--table", help="nat | filter"),
    output: Optional[str] = cliopts.output_option(GRAPH_FORMATS, "text"),
    output_file: Optional[Path] = cliopts.output_file_option(),
):
    """Draw the chain graph of a node's live iptables rules: a tree in the terminal; -o dot (its
    Graphviz source), svg or png (drawn by Graphviz; png needs --output-file)."""
    from labkit import graphviz
    from labkit.errors import LabkitError
    from labkit.kubeproxy import live
    from labkit.netfilter import parse, save
    from labkit.netfilter.graph import ChainGraph

    if table not in ("nat", "filter"):
        raise LabkitError(f"--table: expected nat or filter, got {table!r}")
    fmt, output_file = cliopts.resolve_output(output, GRAPH_FORMATS, "text", output_file=output_file)
    also_tree = fmt == "text" and output_file is not None
    if also_tree:       # the old `-o FILE.svg`: the tree, and the file in the format of its suffix
        fmt = output_file.suffix.lower().lstrip(".")
        if fmt not in GRAPH_FORMATS[1:]:
            raise LabkitError(f"--output-file {output_file}: say the format with -o dot, svg or png")
    if fmt == "png" and output_file is None:
        raise LabkitError("-o png: give a file with --output-file FILE")
    env = running_lab()
    state = live.load(env)
    if node not in state.node_names():
        raise LabkitError(f"no node {node!r} (nodes: {', '.join(state.node_names())})")
    rules = parse(save(env.netns_name(node), table)).table(table)
    keep = lambda chain, rule: True
    if service:
        namespace, _, name = service.rpartition("/")
        if state.service(name, namespace or "default") is None:
            raise LabkitError(f"no Service {service!r} (Services: {', '.join(s['metadata']['name'] for s in state.services)})")
        keep = live.rules_of_service(state, namespace or "default", name)
    roots = ["PREROUTING", "OUTPUT"] + (["POSTROUTING"] if table == "nat" and not service else [])
    if table == "filter":
        roots = ["INPUT", "FORWARD", "OUTPUT"]
    chain_graph = ChainGraph.build(rules, roots, keep)
    if fmt == "text" or also_tree:
        sys.stdout.write(chain_graph.tree())
    if fmt == "text":
        return
    data = chain_graph.dot().encode() if fmt == "dot" else graphviz.render(chain_graph.dot(), fmt)
    if output_file is None:
        sys.stdout.buffer.write(data)
        return
    output_file.write_bytes(data)
    print(f"wrote {output_file}", file=sys.stderr)
