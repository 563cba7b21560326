"""`labkit mounts ...`: Pods on the mount lab's node, scenarios, and what every party sees.

Exit codes: 0 ok; 1 the API server refused a Pod, or a Pod to delete does not exist; 2 usage
errors and malformed files.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from labkit import cliopts

LAB = "mount-propagation"
DATA_FORMATS = ("text", "json", "yaml")
GRAPH_FORMATS = ("text", "dot", "svg", "png")

app = typer.Typer(
    help="Mount propagation: Pods on the lab's node (apply, get, exec, delete), scenarios on a "
         "fresh node (play), and who sees which mount (matrix, graph).",
    no_args_is_help=True,
)

LAB_OPTION = typer.Option(LAB, "--lab", help="The running lab whose node to use.")


def _say(message: str) -> None:
    sys.stderr.write(message + "\n")


def _node(lab_id: str):
    from labkit import runner
    from labkit.errors import LabkitError
    from labkit.labs import get_lab
    from labkit.mounts.node import Node
    from labkit.state import LabEnv, LabState

    lab = get_lab(lab_id)
    env = LabEnv(lab, LabState(lab.id))
    if not runner.lab_is_up(env):
        raise LabkitError(f"lab {lab.id} is not running: start it with `labkit run {lab.id}`")
    return env, Node(env)


def _describe(state: dict) -> str:
    if state["state"] == "running":
        return f"Running (pid {state['pid']})"
    text = state.get("reason", state["state"])
    return f"{text}: {state['message']}" if state.get("message") else text


@app.command()
def apply(
    file: Path = typer.Option(..., "-f", "--filename", help="YAML with one or more Pods."),
    lab_id: str = LAB_OPTION,
):
    """Create Pods on the node (or retry the containers of an existing, unchanged Pod).

    Exits 1 when the API server refuses a Pod; containers that do not start are shown, with the
    runtime's error, and the Pod stays (as kubelet keeps it, retrying on the next apply)."""
    from labkit import kubectlerrors
    from labkit.mounts.pods import Refused, load_pods
    from labkit.strict import StrictDecodingError

    try:      # kubectl v1.34 validates strictly by default: an unknown or doubled field is refused
        pods = load_pods(file, strict=True)
    except StrictDecodingError as exc:
        _say(str(exc))
        raise typer.Exit(1)
    env, node = _node(lab_id)
    refused = []
    with env.state.locked():
        for pod in pods:
            existed = node.pod_record(pod.name) is not None
            try:
                states = node.apply(pod)
            except Refused as exc:
                # kubectl apply creates a Pod that does not exist and patches one that does; it
                # goes on with the others and prints the refusals at the end
                refused.append((kubectlerrors.PATCHING if existed else kubectlerrors.CREATING, str(file), exc.message))
                continue
            print(f"pod/{pod.name} {'unchanged' if existed else 'created'}")
            for name, state in states.items():     # as with kubectl, a container that does not
                print(f"  {name}: {_describe(state)}")  # start leaves the Pod created (exit 0)
    for line in kubectlerrors.apply_errors(refused):
        _say(line)
    raise typer.Exit(1 if refused else 0)


@app.command()
def delete(pod: str = typer.Argument(..., metavar="POD"), lab_id: str = LAB_OPTION):
    """Delete a Pod: its containers are stopped (their mount namespaces go with them)."""
    env, node = _node(lab_id)
    with env.state.locked():
        found = node.delete(pod)
    if not found:
        _say(f'Error from server (NotFound): pods "{pod}" not found')
        raise typer.Exit(1)
    print(f'pod "{pod}" deleted')


@app.command()
def get(lab_id: str = LAB_OPTION, output: Optional[str] = cliopts.output_option(DATA_FORMATS, "text"),
        as_json: bool = cliopts.legacy_json_option()):
    """Pods, their containers, the propagation of each volume mount, and the containers' state."""
    fmt, _ = cliopts.resolve_output(output, DATA_FORMATS, "text", legacy_json=as_json)
    env, node = _node(lab_id)
    rows = []
    for name in node.pod_names():
        pod = node.pod(name)
        for c in pod.containers:
            mounts = [f"{pod.volumes[m.name].path} -> {m.mount_path} ({m.propagation or 'unset'})" for m in c.volume_mounts]
            rows.append({"pod": name, "container": c.name, "privileged": c.privileged, "mounts": mounts,
                         "state": node.container_state(name, c.name)})
    if fmt != "text":
        cliopts.print_data(rows, fmt)
        return
    for r in rows:   # long runtime errors stay whole on their line
        print(f"{r['pod']}/{r['container']}{'  privileged' if r['privileged'] else ''}  {_describe(r['state'])}")
        for m in r["mounts"]:
            print(f"    {m}")


@app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_command(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="node, a Pod, or POD/CONTAINER."),
    lab_id: str = LAB_OPTION,
):
    """Run a command inside the node or a container: `labkit mounts exec slave -- cat /proc/self/mountinfo`.

    In a container the command runs with the container's capabilities, as with kubectl exec."""
    from labkit import shell
    from labkit.errors import LabkitError

    from labkit.mounts import withhold

    env, node = _node(lab_id)
    stopped = node.not_running(name)
    if stopped:
        raise LabkitError(stopped)
    # the lab's gate, which shell.command runs as `labkit shell`'s, said as this command's
    withhold.gate_command(env, node, "labkit mounts exec")
    shell.run(env, name, list(ctx.args) or None)


@app.command()
def play(
    file: Path = typer.Option(..., "-f", "--filename", help="A MountScenario YAML file."),
    output: Optional[str] = cliopts.output_option(DATA_FORMATS, "text"),
    as_json: bool = cliopts.legacy_json_option(),
):
    """Play a scenario on a fresh node of its own and print what every party sees.

    The outcome of the experiment the lab's prediction exercise asks about is shown only once
    the prediction is written (exit 1 before); the prediction is then kept as it was."""
    from labkit.mounts import scenario, withhold

    fmt, _ = cliopts.resolve_output(output, DATA_FORMATS, "text", legacy_json=as_json)
    loaded = scenario.load(file)
    if withhold.guarded(loaded) and not withhold.release(_say):
        raise typer.Exit(1)
    result = withhold.redact_play(loaded, scenario.play(loaded), _say)
    if fmt != "text":         # {visible, tags, errors}
        cliopts.print_data(result, fmt)
        return
    names = []
    for kind, arg in loaded.steps:
        if kind == "mount" and arg["name"] not in names:
            names.append(arg["name"])
    rows = [["party", "volume mount", *names]]
    for party, seen in result["visible"].items():
        rows.append([party, result["tags"][party] or "private", *("yes" if n in seen else "-" for n in names)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(c.ljust(widths[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for e in result["errors"]:
        print(f"step {e['step']}: " + (f"{e['container']}: " if "container" in e else "") + e["message"])


@app.command()
def matrix(lab_id: str = LAB_OPTION, output: Optional[str] = cliopts.output_option(DATA_FORMATS, "text"),
           as_json: bool = cliopts.legacy_json_option()):
    """Who sees which mount below each hostPath, live from every party's mountinfo."""
    from labkit.mounts import observe

    fmt, _ = cliopts.resolve_output(output, DATA_FORMATS, "text", legacy_json=as_json)
    from labkit.mounts import withhold

    env, node = _node(lab_id)
    table = withhold.redact_matrix(observe.matrix(node), withhold.live_withheld(env, _say, "labkit mounts matrix", node))
    if fmt != "text":
        cliopts.print_data(table, fmt)
    else:
        sys.stdout.write(observe.render_matrix(table))


@app.command()
def graph(
    lab_id: str = LAB_OPTION,
    output: Optional[str] = cliopts.output_option(GRAPH_FORMATS, "text"),
    output_file: Optional[Path] = cliopts.output_file_option(),
    old_format: Optional[str] = cliopts.legacy_format_option(),
):
    """Peer groups (shared:N) and their slaves (master:N) across the node and all containers."""
    from labkit.mounts import observe

    from labkit.errors import LabkitError

    fmt, output = cliopts.resolve_output(output, GRAPH_FORMATS, "text", legacy_format=old_format,
                                         output_file=output_file)
    if fmt == "png" and output is None:
        raise LabkitError("-o png: give a file with --output-file FILE")
    from labkit.mounts import withhold

    env, node = _node(lab_id)
    g = withhold.redact_graph(observe.graph(node), withhold.live_withheld(env, _say, "labkit mounts graph", node))
    if fmt in ("svg", "png"):
        data = observe.render_graph_image(g, fmt)
    else:
        data = (observe.render_graph_text(g) if fmt == "text" else observe.render_graph_dot(g)).encode()
    if output:
        output.write_bytes(data)
        _say(f"wrote {output}")
    else:
        sys.stdout.buffer.write(data)
