"""`labkit devices`: kubelet's device manager, reconstructed. `play` runs device-plugin cases
(plugin events, allocations, checkpoints, restarts) and compares them with what they expect;
`plugin serve` runs labkit's reference device plugin over real gRPC against a kubelet.sock."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labkit import cases, cliopts
from labkit.errors import LabkitError

app = typer.Typer(help="kubelet's device manager v1.34.1, reconstructed: play device-plugin cases (`play`).",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})
plugin_app = typer.Typer(help="labkit's reference device plugin (v1beta1 over gRPC on a unix socket).",
                         no_args_is_help=True)
app.add_typer(plugin_app, name="plugin")

FORMATS = ("table", "json")


@app.command()
def play(files: List[Path] = typer.Option(..., "-f", "--filename", help="A case file (repeat for several)."),
         output: Optional[str] = cliopts.output_option(FORMATS, "table")):
    """Play each case on a fresh device manager and compare with its `expect`. Exit code 0 only
    when every expectation of every case holds."""
    from labkit.devices.play import load_case, play as play_case

    fmt, _ = cliopts.resolve_output(output, FORMATS, "table")
    results = [play_case(load_case(path)) for path in files]
    raise typer.Exit(cases.report(results, fmt))


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
        spec.setdefault("devices", []).append({"id": dev_id, **({"numa": int(numa)} if numa else {})})
    import signal

    def stop(_signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    plugin = ReferencePlugin(spec, directory, filename)
    typer.echo(f"device plugin {plugin.resource}: {len(plugin.devices)} devices, socket {plugin.socket_path}")
    try:
        plugin.run()
    except KeyboardInterrupt:
        pass
    finally:
        plugin.stop()
