"""`labkit devices`: kubelet's device manager, reconstructed. `play` runs device-plugin cases
(plugin events, allocations, checkpoints, restarts) and compares them with what they expect;
`plugin serve` runs labkit's reference device plugin over real gRPC against a kubelet.sock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from labkit import cases, cliopts
from labkit.errors import LabkitError

app = typer.Typer(help="kubelet's device manager v1.34.1, reconstructed: play device-plugin cases (`play`), run a plugin against it (`try`), read its checkpoint (`checkpoint`), labkit's reference plugin (`plugin serve`).",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
plugin_app = typer.Typer(help="labkit's reference device plugin (v1beta1 over gRPC on a unix socket).",
                         no_args_is_help=True)
app.add_typer(plugin_app, name="plugin")

FORMATS = ("table", "json")


@app.command()
def play(files: List[Path] = typer.Option(..., "-f", "--filename", help="A case file (repeat for several)."),
         output: Optional[str] = cliopts.output_option(FORMATS, "table")):
    """Play each case on a fresh device manager and compare with its `expect`; the table ends with
    the devices every Pod holds after the case's last step. Exit code 0 only when every
    expectation of every case holds. The situation of the device-plugins lab's exercise
    checkpoint is played only once your prediction is written."""
    import sys

    from labkit.devices.play import load_case, play as play_case
    from labkit.devices.withhold import gate

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    loaded = [(path, load_case(path)) for path in files]
    refusals = [message for message in (gate(case, path) for path, case in loaded) if message]
    if refusals:
        raise LabkitError("\n".join(refusals))
    results = [play_case(case) for _path, case in loaded]
    if fmt == "table":
        for r in results:
            for uid, containers in (r.outcome.get("pod_devices") or {}).items():
                for name, held in containers.items():
                    sys.stdout.write(f"{r.id}: pod {uid} container {name}: " +
                                     "; ".join(f"{res} {' '.join(ids)}" for res, ids in held.items()) + "\n")
        for r in results:
            if not r.checks:        # a story to watch, nothing to compare
                sys.stdout.write(f"PLAYED {r.id}: {r.title} (the case expects nothing)\n")
        results = [r for r in results if r.checks]
        if not results:
            raise typer.Exit(0)
    code = cases.report(results, fmt)
    raise typer.Exit(code if any(r.checks for r in results) else 0)


@app.command("checkpoint")
def show_checkpoint(
    filename: Optional[Path] = typer.Option(None, "-f", "--filename",
                                            help="A kubelet_internal_checkpoint file (default: the one of the "
                                                 "device-plugins lab's last `labkit devices try`)."),
    output: Optional[str] = cliopts.output_option(FORMATS, "table"),
):
    """Show a device manager checkpoint decoded (checkpoint/checkpoint.go): its checksum as kubelet
    verifies it on start (a mismatch: `checkpoint is corrupted`, and kubelet starts with no
    allocations), the registered resources, and each container's devices per NUMA node with the
    Allocate answer kept for it. Exit code 1 when the checksum does not match."""
    import sys

    from labkit.devices import api, checkpoint
    from labkit.devices.kubelet import CHECKPOINT, response_dict

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    if filename is None:
        env = _lab_env()
        filename = env.lab.environment_module().node_root(env) / "try" / CHECKPOINT
    if not filename.is_file():
        raise LabkitError(f"{filename}: no such file (a node's checkpoint is written once its kubelet has a plugin "
                          "or an allocation: `labkit devices try FILE --pod 2`)")
    try:
        shown = checkpoint.decode(filename, lambda raw: response_dict(api.ContainerAllocateResponse.FromString(raw)))
    except ValueError as exc:
        raise LabkitError(str(exc)) from None
    except Exception as exc:          # protobuf's DecodeError: AllocResp is not a ContainerAllocateResponse
        raise LabkitError(f"{filename}: an AllocResp is not a ContainerAllocateResponse ({exc})") from None
    if fmt == "json":
        sys.stdout.write(json.dumps(shown, indent=1) + "\n")
    else:
        sys.stdout.write(render_checkpoint(shown))
    raise typer.Exit(0 if shown["checksum"]["verdict"] == "ok" else 1)


def render_checkpoint(shown: dict) -> str:
    sums = shown["checksum"]
    lines = [f"{shown['file']}",
             f"checksum: stored {sums['stored']}, computed {sums['computed']}: {sums['verdict']}",
             "registered: " + ("; ".join(f"{r}: {', '.join(ids) or '(none)'}" for r, ids in shown["registered"].items())
                              or "(none)")]
    for e in shown["entries"]:
        per_numa = ", ".join(f"NUMA {n}: {' '.join(ids)}" if n != "-1" else f"no topology: {' '.join(ids)}"
                             for n, ids in e["devices"].items())
        lines.append(f"pod {e['pod']} container {e['container']} {e['resource']}: {per_numa}")
        for key, value in e["allocate_response"].items():
            lines.append(f"  {key}: {json.dumps(value)}")
    return "\n".join(lines) + "\n"


@plugin_app.command("serve")
def plugin_serve(
    filename: Optional[Path] = typer.Option(None, "-f", "--filename",
                                            help="The plugin's spec (YAML or JSON: resource, socket, devices, "
                                                 "preferred, pre_start, allocate); re-read when it changes."),
    resource: Optional[str] = typer.Option(None, "--resource", help="The extended resource, e.g. example.com/widget."),
    device: List[str] = typer.Option([], "--device", help="A device ID, or ID@NUMA (repeat for several)."),
    directory: Path = typer.Option(..., "--dir", help="kubelet's device-plugins directory (where kubelet.sock "
                                                      "is; a real kubelet's is /var/lib/kubelet/device-plugins)."),
):
    """Serve the reference device plugin on <dir>/<socket> and register it with <dir>/kubelet.sock;
    register again whenever kubelet.sock is created anew. Runs until interrupted."""
    from labkit.devices.plugin import ReferencePlugin, load_spec

    refuse_lab_node(directory)
    if filename is not None:
        try:
            spec = load_spec(filename)
        except (OSError, ValueError) as exc:
            raise LabkitError(str(exc)) from None
    elif resource:
        spec = {"resource": resource, "devices": []}
    else:
        raise LabkitError("give the plugin's spec (-f FILE) or at least --resource and --device")
    if resource:
        spec["resource"] = resource
    for item in device:
        dev_id, _, numa = item.partition("@")
        spec.setdefault("devices", []).append({"id": dev_id, **({"numa": numa} if numa else {})})
    import signal

    def stop(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        plugin = ReferencePlugin(spec, directory, filename)
    except ValueError as exc:
        raise LabkitError(f"{filename or 'the plugin'}: {exc}") from None
    typer.echo(f"device plugin {plugin.resource}: {len(plugin.devices)} devices, socket {plugin.socket_path}")
    try:
        plugin.run()
    except KeyboardInterrupt:
        pass
    finally:
        plugin.stop()


LAB_ID = "device-plugins"
LAB_NODES = Path("/run/labkit")       # the device-plugins lab's nodes: <this>/<prefix>-device-plugins/<run>/


def refuse_lab_node(directory: Path) -> None:
    """The reference plugin does not serve a node of the device-plugins lab (`labkit devices try`,
    the checks): there the plugin is the exercise, and running labkit's own would pass it for the
    student's (it offers GetPreferredAllocation, fills Allocate from a template and registers
    again after a kubelet restart)."""
    resolved = Path(directory).resolve()
    for parent in resolved.parents:
        if parent.parent == LAB_NODES and parent.name.endswith(f"-{LAB_ID}"):
            raise LabkitError(f"{directory} is a node of the {LAB_ID} lab: there the device plugin is yours to "
                              f"write (plugins/EXERCISE.py); labkit's reference plugin does not serve it "
                              "(labkit/devices/plugin.py is there to read, as a model of your own)")


def _lab_env():
    from labkit import runner
    return runner.running_env(LAB_ID)


@app.command("try")
def try_plugin(
    file: Path = typer.Argument(..., help="Your plugin: a Python file (run as `python FILE`)."),
    resource: str = typer.Option("example.com/widget", "--resource", help="The resource to follow."),
    broken: Optional[str] = typer.Option(None, "--break", metavar="ID",
                                         help="Mark this device Unhealthy in $DEVICE_HEALTH_FILE, then healthy again."),
    pod: int = typer.Option(0, "--pod", min=0, metavar="N", help="Admit a Pod asking for N devices and start its "
                            "container with your Allocate answer."),
    restart: bool = typer.Option(False, "--restart", help="Restart kubelet, then wait for your plugin to register again."),
    output: Optional[str] = cliopts.output_option(FORMATS, "table"),
):
    """Run your device plugin against a fresh kubelet of the device-plugins lab (labkit's kubelet
    v1.34.1 device manager on a real kubelet.sock) and show what kubelet saw: the registration,
    the device lists, the node's capacity and allocatable, the rpcs kubelet made and, with --pod,
    what the container's process got. The plugin runs with DEVICE_PLUGIN_DIR and
    DEVICE_HEALTH_FILE in its environment and is stopped at the end."""
    import json
    import sys

    from labkit.devices import trial

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    env = _lab_env()
    if not file.is_file():
        raise LabkitError(f"{file}: no such file")
    session = env.lab.environment_module().session(env, "try", file.resolve())
    steps = trial.run(session, resource, broken=broken, pod=pod, restart=restart)
    if fmt == "json":
        sys.stdout.write(json.dumps(steps, indent=1) + "\n")
    else:
        sys.stdout.write(trial.render(steps))
