"""`labkit ns ...`: explain why a namespace is still Terminating; the namespace controller's decisions."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts

app = typer.Typer(help="Namespaces: why one is still Terminating (`explain`), the namespace controller's "
                       "decisions (`log`), what changed between releases (`versions`).", no_args_is_help=True)


def default_state_dir() -> Path:
    from labkit import paths
    return paths.state_root() / "namespace" / "apiserver"


def _lab_cluster() -> tuple[Path, Optional[str]] | None:
    """(kubeconfig, context) of the namespace lab when it runs on a real cluster (`labkit run
    namespace --kubeconfig`), else None."""
    from labkit.state import LabState

    options = LabState("namespace").status.get("options") or {}
    return (Path(options["kubeconfig"]), options.get("context")) if options.get("kubeconfig") else None


@app.command("explain")
def explain_command(
    name: str = typer.Argument(..., help="The namespace."),
    kubeconfig: Optional[Path] = typer.Option(None, "--kubeconfig",
                                              help="Ask this cluster instead of the namespace lab's (its API "
                                                   "server, or the cluster it runs on)."),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: the current one)."),
    state: Optional[Path] = typer.Option(None, "--state", help="The embedded API server's state directory "
                                         "(default: the namespace lab's, <state root>/namespace/apiserver)."),
    output: Optional[str] = cliopts.output_option(("text", "json", "yaml"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Why NAME is still Terminating: remaining resources by type, the finalizers that hold them
    and the objects carrying them, failing discovery groups and unavailable APIServices, the
    namespace's own finalizers and conditions — each cause with the fix that loses nothing (on the
    namespace lab's cluster, the fixes for an exercise's namespace once that exercise is passed)."""
    from labkit.apiserver.client import HttpClient
    from labkit.errors import LabkitError
    from labkit.namespaces.explain import explain, render
    from labkit.namespaces.withhold import fixes_withheld

    fmt, _ = cliopts.resolve_output(output, ("text", "json", "yaml"), "text", legacy_json=as_json)
    decisions = None
    if kubeconfig is None and state is None:
        kubeconfig, context = _lab_cluster() or (None, context)
    if kubeconfig is not None:
        if not kubeconfig.is_file():
            raise LabkitError(f"--kubeconfig {kubeconfig}: no such file")
        client = HttpClient.from_kubeconfig(kubeconfig, context)
    else:
        state_dir = state or default_state_dir()
        config = state_dir / "kubeconfig"
        if not config.is_file():
            raise LabkitError(f"no API server state at {state_dir}: is the lab running? (`labkit run namespace`, "
                              "or --state DIR, or --kubeconfig FILE for a cluster)")
        client = HttpClient.for_embedded(config)
        log = state_dir / "decisions.log"
        if log.is_file():
            decisions = []
            for line in log.read_text().splitlines()[-5000:]:
                try:
                    decisions.append(json.loads(line))
                except ValueError:
                    continue
    try:
        out = explain(client, name, decisions)
    except OSError as exc:
        raise LabkitError(f"cannot reach the API server: {exc}")
    note = fixes_withheld(name, client)
    if note is not None:
        out.withhold_fixes(note)
    if fmt != "text":
        cliopts.print_data(out.as_dict(), fmt)
    else:
        sys.stdout.write(render(out))


@app.command("log")
def log(
    state: Optional[Path] = typer.Option(None, "--state", help="The embedded API server's state directory "
                                         "(default: the namespace lab's, <state root>/namespace/apiserver)."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing new decisions."),
    all_levels: bool = typer.Option(False, "-a", "--all", help="Also the no-op decisions."),
    output: Optional[str] = cliopts.output_option(("text", "json"), "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Print the namespace controller's decisions, each with its reason (-o json: the raw JSON lines)."""
    from labkit.errors import LabkitError
    from labkit.gc.cli import log as decision_log

    if state is None and _lab_cluster() is not None:
        raise LabkitError("the namespace lab runs against a real cluster (--kubeconfig): labkit has no decision log "
                          "of its namespace controller; the namespaces' conditions (kubectl get ns NAME -o yaml) "
                          "and `labkit ns explain NAME` say why one is still Terminating")

    fmt, _ = cliopts.resolve_output(output, ("text", "json"), "text", legacy_json=as_json)
    decision_log(state=state or default_state_dir(), follow=follow, all_levels=all_levels, controller="namespace",
                 output=fmt, as_json=False)


@app.command("versions")
def versions(
    version: Optional[list[str]] = typer.Option(None, "--version", "-v",
                                                help="A release to emulate, 1.31 to 1.34 (repeat; default: 1.32 "
                                                     "and 1.34)."),
    grace: int = typer.Option(3, "--grace", min=0, max=30, help="Seconds the demo pod takes to stop."),
):
    """What changed between releases: the same namespace deleted on a fresh embedded server
    emulating each one (OrderedNamespaceDeletion: off by default before 1.33, locked on in 1.34),
    with when each object started deleting and when it was gone. Takes about 10 s per release."""
    from labkit.apiserver.version import EffectiveVersion, VersionError
    from labkit.errors import LabkitError
    from labkit.namespaces.versions import deletion_timeline, render

    chosen = version or ["1.32", "1.34"]
    try:
        names = [EffectiveVersion.parse(v).name for v in chosen]
    except VersionError as exc:
        raise LabkitError(f"--version: {exc}")
    sys.stdout.write(render([deletion_timeline(name, grace) for name in names], grace))
