"""`labkit scheduler`: kube-scheduler v1.34.1, reconstructed. `play` runs scheduler cases (nodes,
Pods, the incoming Pod, a profile) and compares the outcome with what the case expects; `explain`
shows one decision; `serve`/`stop` run a scheduler the student wrote, in the scheduler lab. The
cases of the lab's prediction exercises (and any case that shows part of one's outcome: a copy of
score-predict's or preempt-predict's case, spread's outcome, a Pod that tolerates as one of
noexecute's under its taint) are played only once a prediction is written (labkit.scheduler.withhold)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from labkit import cases, cliopts
from labkit.errors import LabkitError

app = typer.Typer(help="kube-scheduler v1.34.1, reconstructed: play scheduling cases (`play`), and `explain` one.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

FORMATS = ("table", "json", "yaml")


def _withhold(loaded, tool: str) -> None:
    """The case of a scheduler-lab prediction is shown only once a prediction is written."""
    from labkit.scheduler.withhold import gate, noexecute_gate

    _refuse([r for path, case in loaded for r in (gate(case, path, tool), noexecute_gate(case, str(path), tool))])


@app.command()
def play(files: List[Path] = typer.Option(..., "-f", "--filename", help="A case file (repeat for several)."),
         output: Optional[str] = cliopts.output_option(FORMATS, "table"),
         seed: int = typer.Option(0, "--seed", help="Seed for breaking ties between equal scores.")):
    """Play each case on a fresh reconstruction and compare with its `expect`. Exit code 0 only
    when every expectation of every case holds. A case that shows part of the outcome of a
    prediction exercise of the scheduler lab (its case file, a copy, or for noexecute a Pod that
    tolerates as one of its Pods under a NoExecute taint of the drain key, or of a key its
    tolerations were renamed to) is played only once
    that prediction is written."""
    from labkit.scheduler.play import load_case, play as play_case

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    loaded = [(path, load_case(path)) for path in files]
    _withhold(loaded, "labkit scheduler play")
    results = [play_case(case, seed=seed) for _path, case in loaded]
    raise typer.Exit(cases.report(results, fmt))


@app.command()
def explain(pod: Optional[str] = typer.Argument(None, help="A Pod of the scheduler lab: its last scheduling "
                                                          "decision, as labkit's scheduler made it."),
            namespace: str = typer.Option("default", "-n", "--namespace", help="The Pod's namespace."),
            file: Optional[Path] = typer.Option(None, "-f", "--filename",
                                                help="A case file: nodes, Pods, the incoming Pod."),
            seed: int = typer.Option(0, "--seed", help="With -f: seed for breaking ties between equal scores.")):
    """Show why a Pod goes where it goes: every node's Filter verdict, every score, the node
    chosen, or why none fits and what preemption did. With POD, the last decision labkit's
    scheduler made for that live Pod of the scheduler lab (from the record it kept as it decided);
    with -f, a case file's incoming Pod, scheduled now. An outcome a prediction of the scheduler
    lab asks for is shown only once that prediction is written."""
    import random

    from labkit.scheduler import framework as fw
    from labkit.scheduler.explain import explain as explain_cycle
    from labkit.scheduler.explain import spread_outcome
    from labkit.scheduler.play import load_case, pod_of, snapshot_of
    from labkit.scheduler.profiles import make_profile
    from labkit.scheduler.withhold import gate, noexecute_gate, spread_gate

    tool = "labkit scheduler explain"
    if (pod is None) == (file is None):
        raise LabkitError("give a Pod (`labkit scheduler explain POD -n NAMESPACE`) or a case file (-f CASE), not "
                          "both" if pod is not None else "give a Pod (`labkit scheduler explain POD -n NAMESPACE`) or a "
                          "case file (-f CASE)")
    if pod is not None:
        found = _live_record(pod, namespace)
        refusals = [gate(found["situation"], f"Pod {namespace}/{pod}", tool),
                    spread_gate(found.get("spread"), f"Pod {namespace}/{pod}", tool),
                    noexecute_gate(found["situation"], f"Pod {namespace}/{pod}", tool)]
        _refuse(refusals)
        typer.echo(found["explain"])
        return
    case = load_case(file)
    _withhold([(file, case)], tool)
    nodes, _pods = snapshot_of(case)
    cycle = fw.schedule(make_profile(case.get("config")), nodes, pod_of(case["incoming"]),
                        pdbs=case.get("pdbs"), rng=random.Random(seed))
    _refuse([spread_gate(spread_outcome(cycle), str(file), tool)])
    typer.echo(explain_cycle(cycle))


def _refuse(refusals) -> None:
    refusals = [r for r in refusals if r]
    if refusals:
        for message in refusals:
            typer.echo(message, err=True)
        raise typer.Exit(1)


def _live_record(name: str, namespace: str) -> dict:
    """The record labkit's scheduler kept of its last decision for the Pod (labkit.scheduler.explain
    .record), checked against the live Pod: the same Pod (uid), not one made again since."""
    from labkit.apiserver.target import for_env
    from labkit.scheduler.explain import RECORDS

    target = for_env(_lab_env())
    live = target.client().get_or_none("v1", "pods", name, namespace)
    if live is None:
        raise LabkitError(f'pods "{name}" not found in namespace {namespace}')
    path = target.state_dir / RECORDS / namespace / f"{name}.json"
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        found = None
    if found is None or found.get("uid") != live["metadata"].get("uid"):
        spec = live.get("spec") or {}
        why = ("it was created with spec.nodeName set: kube-scheduler never sees such a Pod" if spec.get("nodeName")
               else f"its schedulerName is {spec.get('schedulerName')}: labkit's scheduler decides for the profiles of "
                    "its configuration only, and has not tried it under one"
               if spec.get("schedulerName", "default-scheduler") != "default-scheduler"
               else "it has not been tried yet")
        raise LabkitError(f"labkit's scheduler has made no decision for Pod {namespace}/{name}: {why}")
    return found


@app.command()
def simulate(nodes: int = typer.Option(100, "--nodes", help="Nodes of 32 CPUs, 128 GiB, 110 Pods, over 3 zones."),
             pods: int = typer.Option(1000, "--pods", help="Pods of three request shapes, scheduled one after another."),
             seed: int = typer.Option(0, "--seed"),
             output: Optional[str] = cliopts.output_option(("table", "json"), "table")):
    """Schedule PODS Pods on a cluster of NODES nodes with the default profile, as fast as the
    reconstruction goes, and say how many were bound and how long it took."""
    from labkit.scheduler.simulate import run

    fmt, _ = cliopts.resolve_output(output, ("table", "json"), "table")
    result = run(nodes, pods, seed)
    data = {"nodes": result.nodes, "pods": result.pods, "bound": result.bound, "unschedulable": result.unschedulable,
            "seconds": round(result.seconds, 3), "podsPerSecond": round(result.pods_per_second, 1)}
    if fmt == "json":
        sys.stdout.write(json.dumps(data) + "\n")
    else:
        typer.echo(f"{result.bound} of {result.pods} Pods bound on {result.nodes} nodes in {result.seconds:.2f} s "
                   f"({result.pods_per_second:.0f} Pods/s); {result.unschedulable} unschedulable")


def _lab_env():
    from labkit import runner
    return runner.running_env("scheduler")


@app.command()
def serve(file: Path = typer.Argument(..., help="Your scheduler: a Python program (it finds the lab's API server "
                                               "through KUBECONFIG, as config.load_kube_config() reads it).")):
    """Run a scheduler you wrote as a process of the scheduler lab (restarting it if it runs):
    `python FILE` in FILE's directory, with KUBECONFIG naming the lab's API server; `labkit scheduler
    stop` or `labkit cleanup scheduler` stops it."""
    from labkit.apiserver.target import for_env
    from labkit.scheduler import own

    env = _lab_env()
    log = own.serve(env, file, for_env(env))
    typer.echo(f"my-scheduler: running {file} (log: {log})")


@app.command()
def stop():
    """Stop the scheduler you started with `labkit scheduler serve`."""
    from labkit.scheduler import own

    env = _lab_env()
    typer.echo("my-scheduler stopped" if own.stop(env) else "my-scheduler was not running")
