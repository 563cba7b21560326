"""`labkit gc ...`: play garbage-collector scenarios and follow the GC's decisions."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from labkit import cliopts

app = typer.Typer(help="Garbage collection: play scenarios (`run`), follow the GC's decisions (`log`), draw the owner graph (`graph`).",
                  no_args_is_help=True)


def _print_report(report) -> None:
    out = sys.stdout.write
    verdict = "PASS" if report.passed else "FAIL"
    out(f"{verdict} {report.id} — {report.title}\n     on {report.target} in {report.duration_s:.1f} s\n")
    for note in report.notes:
        out(f"     note: {note}\n")
    if report.unsupported:
        out(f"     not playable: {report.unsupported}\n")
        return
    if report.steps:
        out("steps:\n")
        for s in report.steps:
            mark = "ok  " if s["ok"] else "FAIL"
            detail = f" — {s['detail']}" if s["detail"] else ""
            out(f"  {mark} {s['index']}. {s['description']}{detail} ({s['seconds']:.2f} s)\n")
    if report.checks:
        out("expectations:\n")
        for c in report.checks:
            out(f"  {'ok  ' if c.ok else 'FAIL'} {c.what}{' — ' + c.detail if c.detail else ''}\n")
    if report.invariants:
        out("invariants:\n")
        for i in report.invariants:
            out(f"  {'ok  ' if i['ok'] else 'FAIL'} while {i['while']}: {i['then']} — {i['detail']}\n")
    if report.decisions:
        out("garbage collector decisions:\n")
        for d in report.decisions:
            out(f"  {d['message']}\n")
    out("final objects:\n")
    from labkit.gc.runner import summarize
    for ref, obj in report.objects.items():
        s = summarize(obj)
        if s is None:
            out(f"  {ref}: absent\n")
            continue
        owners = ", ".join(f"{o.get('kind')}/{o.get('name')}" for o in s["ownerReferences"]) or "none"
        out(f"  {ref}: {s['kind']} {s.get('namespace') + '/' if s.get('namespace') else ''}{s['name']}"
            f" finalizers={s['finalizers']} owners=[{owners}]"
            f"{' deleting since ' + s['deletionTimestamp'] if s.get('deletionTimestamp') else ''}\n")


@app.command("run")
def run(
    files: Optional[List[Path]] = typer.Option(None, "-f", "--filename", help="Scenario file (repeat for several)."),
    output: Optional[str] = cliopts.output_option(("text", "json", "yaml"), "text"),
    old_files: Optional[List[Path]] = cliopts.legacy_file_option(),
    as_json: bool = cliopts.legacy_json_option(),
    kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig",
                                              help="Play against this cluster instead of a fresh embedded server."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: the current one)."),
):
    """Play scenarios and report, for every expectation and invariant, whether it held.

    Each scenario runs on a fresh embedded API server with labkit's controllers, or with
    --kubeconfig against a real cluster (where the cluster's own controllers do the work).
    The experiment of exercise predict-dangling (gc), and a create into a namespace being terminated
    (exercise terminating-create of lab namespace), are played only once their prediction is written.
    Exit code 0 only when every scenario played passed."""
    from labkit.gc.runner import run_scenario
    from labkit.gc.scenario import load
    from labkit.gc.withhold import gate

    fmt, _ = cliopts.resolve_output(output, ("text", "json", "yaml"), "text", legacy_json=as_json)
    files = [Path(f) for f in cliopts.filenames(files, old_files)]
    from labkit.namespaces.withhold import gate as terminating_gate
    withheld = [(f, (lambda scenario: gate(scenario) or terminating_gate(scenario))(load(f))) for f in files]
    for f, reason in withheld:
        if reason:      # on stderr, as labkit's other withholding tools say it: -o json stays JSON
            sys.stderr.write(f"withheld: {reason}\n")
    files = [f for f, reason in withheld if not reason]
    if not files:
        raise typer.Exit(0)
    reports = [run_scenario(f, str(kubeconfig) if kubeconfig else None, context) for f in files]
    if fmt != "text":
        data = [r.as_dict() for r in reports]
        cliopts.print_data(data[0] if len(data) == 1 else data, fmt)
    else:
        for report in reports:
            _print_report(report)
    raise typer.Exit(0 if all(r.passed for r in reports) else 1)


def default_state_dir() -> Path:
    from labkit import paths
    return paths.state_root() / "gc" / "apiserver"


@app.command("log")
def log(
    state: Optional[Path] = typer.Option(None, "--state", help="The API server's state directory "
                                         "(default: the gc lab's, <state root>/gc/apiserver)."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new decisions."),
    all_levels: bool = typer.Option(False, "-a", "--all", help="Also the no-op decisions (waits, kept objects)."),
    controller: Optional[str] = typer.Option("garbagecollector", "--controller",
                                             help="Only this controller's decisions ('' for all)."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Print the garbage collector's decisions, each with its reason (-o json: the raw JSON lines)."""
    from labkit.controllers.decisions import format_entry
    from labkit.errors import LabkitError

    fmt, _ = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)
    as_json = fmt == "json"
    path = (state or default_state_dir()) / "decisions.log"
    if not path.exists() and state is None:
        from labkit.state import LabState
        if (LabState("gc").status.get("options") or {}).get("kubeconfig"):
            raise LabkitError("the gc lab runs against a real cluster (--kubeconfig): labkit has no decision log "
                              "of its garbage collector; its Events (kubectl get events) say some of it")
    if not path.exists() and not follow:
        raise LabkitError(f"no decision log at {path}: is the lab running? (`labkit run gc`, or --state DIR)")

    def show(line: str) -> None:
        try:
            entry = json.loads(line)
        except ValueError:
            return
        if not all_levels and entry.get("level") != "info":
            return
        if controller and entry.get("controller") != controller:
            return
        sys.stdout.write((line.rstrip("\n") if as_json else format_entry(entry)) + "\n")
        sys.stdout.flush()

    position = 0
    while True:
        try:
            with open(path) as f:
                f.seek(position)
                for line in f:
                    if not line.endswith("\n"):
                        break
                    position += len(line.encode())
                    show(line)
        except FileNotFoundError:
            pass
        if not follow:
            return
        time.sleep(0.2)


GRAPH_FORMATS = ("text", "dot", "svg", "png", "json")


@app.command("graph")
def graph(
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace",
                                            help="Only this namespace (and the namespace object itself)."),
    output: Optional[str] = cliopts.output_option(GRAPH_FORMATS, "text"),
    output_file: Optional[Path] = cliopts.output_file_option(),
    old_format: Optional[str] = cliopts.legacy_format_option(),
    all_objects: bool = typer.Option(False, "-a", "--all",
                                     help="Also objects without owners, dependents, finalizers or deletion "
                                          "(always on with -n)."),
    as_json: bool = cliopts.legacy_json_option(),
    kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig",
                                              help="Read this cluster instead of the running gc lab's."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: the current one)."),
):
    """Draw the owner-reference graph of live objects with their state.

    Each object shows whether it is being deleted, its finalizers, and its owner references
    (controller, blockOwnerDeletion); owners that are referenced but absent are shown as virtual
    nodes, as the garbage collector's graph has them. On the gc lab's embedded server, each object
    also shows what labkit's garbage collector has marked in its own graph (deletingDependents:
    an owner waiting in the foreground; beingDeleted). Text is a tree per root; dot/svg/png are
    Graphviz, with an arrow from each dependent to its owner."""
    from labkit.errors import LabkitError
    from labkit import graphviz
    from labkit.gc import graph as owner_graph
    from labkit.apiserver.target import Target, lab_target

    fmt, output = cliopts.resolve_output(output, GRAPH_FORMATS, "text", legacy_format=old_format,
                                         legacy_json=as_json, output_file=output_file)
    if fmt == "png" and output is None:
        raise LabkitError("-o png: give a file with --output-file FILE")
    if kubeconfig is not None and not kubeconfig.is_file():
        raise LabkitError(f"--kubeconfig: {kubeconfig}: no such file")
    target = Target(kubeconfig, context) if kubeconfig else lab_target("gc")
    try:
        client = target.client()
        nodes = owner_graph.collect(client, namespace, owner_graph.gc_view(client) if target.embedded else None)
    except OSError as exc:
        raise LabkitError(f"cannot reach {target.description}: {exc}")
    everything = all_objects or namespace is not None
    if fmt == "json":
        data = (json.dumps([n.as_dict() for n in nodes.values()
                            if everything or owner_graph.interesting(n, nodes)], indent=2) + "\n").encode()
    elif fmt == "text":
        data = owner_graph.render_text(nodes, everything).encode()
    elif fmt == "dot":
        data = owner_graph.render_dot(nodes, everything).encode()
    else:
        data = graphviz.render(owner_graph.render_dot(nodes, everything), fmt)
    if output is not None:
        output.write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
