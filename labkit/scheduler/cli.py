"""`labkit scheduler`: kube-scheduler v1.34.1, reconstructed. `play` runs scheduler cases (nodes,
Pods, the incoming Pod, a profile) and compares the outcome with what the case expects; `explain`
shows one decision; `serve`/`stop` run a scheduler the student wrote, in the scheduler lab. The
cases of the lab's prediction exercises are played only once a prediction is written
(labkit.scheduler.withhold)."""

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
    from labkit.scheduler.withhold import gate

    refusals = [message for message in (gate(case, path, tool) for path, case in loaded) if message]
    if refusals:
        for message in refusals:
            typer.echo(message, err=True)
        raise typer.Exit(1)


@app.command()
def play(files: List[Path] = typer.Option(..., "-f", "--filename", help="A case file (repeat for several)."),
         output: Optional[str] = cliopts.output_option(FORMATS, "table"),
         seed: int = typer.Option(0, "--seed", help="Seed for breaking ties between equal scores.")):
    """Play each case on a fresh reconstruction and compare with its `expect`. Exit code 0 only
    when every expectation of every case holds. The case of a prediction exercise of the
    scheduler lab is played only once its prediction is written."""
    from labkit.scheduler.play import load_case, play as play_case

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    loaded = [(path, load_case(path)) for path in files]
    _withhold(loaded, "labkit scheduler play")
    results = [play_case(case, seed=seed) for _path, case in loaded]
    raise typer.Exit(cases.report(results, fmt))


@app.command()
def explain(file: Path = typer.Option(..., "-f", "--filename", help="A case file: nodes, Pods, the incoming Pod."),
            seed: int = typer.Option(0, "--seed", help="Seed for breaking ties between equal scores.")):
    """Schedule a case's incoming Pod and show why: every node's Filter verdict, every score,
    the node chosen, or why none fits and what preemption did. The case of a prediction exercise
    of the scheduler lab is shown only once its prediction is written."""
    import random

    from labkit.scheduler import framework as fw
    from labkit.scheduler.explain import explain as explain_cycle
    from labkit.scheduler.play import load_case, pod_of, snapshot_of
    from labkit.scheduler.profiles import make_profile

    case = load_case(file)
    _withhold([(file, case)], "labkit scheduler explain")
    nodes, _pods = snapshot_of(case)
    cycle = fw.schedule(make_profile(case.get("config")), nodes, pod_of(case["incoming"]),
                        pdbs=case.get("pdbs"), rng=random.Random(seed))
    typer.echo(explain_cycle(cycle))


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
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    lab = get_lab("scheduler")
    state = LabState(lab.id)
    env = LabEnv(lab, state)
    if state.phase != "up" or not runner.lab_is_up(env):
        raise LabkitError("the scheduler lab is not running: start it with `labkit run scheduler`")
    return env


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
