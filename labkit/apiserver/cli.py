"""`labkit apiserver`: run the embedded API server in the foreground (for instructors)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from labkit.controllers.manager import CONTROLLERS, DEFAULT_CONTROLLERS


def apiserver(
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0: any free port)."),
    state: Optional[Path] = typer.Option(None, "--state", help="State directory: objects, audit and decision "
                                         "logs, kubeconfig (default: <state root>/apiserver)."),
    controllers: str = typer.Option(",".join(DEFAULT_CONTROLLERS), "--controllers",
                                    help=f"Comma-separated, or none. Known: {', '.join(CONTROLLERS)}."),
    emulated_version: Optional[str] = typer.Option(None, "--emulated-version",
                                                   help="Emulate this minor release (1.31 to 1.34, default 1.34): "
                                                        "its feature-gate defaults, e.g. OrderedNamespaceDeletion "
                                                        "off before 1.33."),
):
    """Run labkit's embedded Kubernetes API server (with its controllers) until Ctrl-C.

    Prints the kubeconfig to use: export KUBECONFIG=... and then kubectl works against it.
    Objects persist in the state directory across restarts."""
    from labkit import paths
    from labkit.apiserver.__main__ import parse_controllers, serve
    from labkit.apiserver.version import EffectiveVersion, VersionError
    from labkit.errors import LabkitError

    try:
        names = parse_controllers(controllers)
    except ValueError as exc:
        raise LabkitError(f"--controllers: {exc}")
    try:
        EffectiveVersion.parse(emulated_version)
    except VersionError as exc:
        raise LabkitError(f"--emulated-version: {exc}")
    from labkit import servers
    directory = state or paths.state_root() / "apiserver"
    servers.register(directory)     # checks of prediction exercises read its logs too (labkit.servers)
    serve(str(directory), port, names,
          announce=lambda m: typer.echo(m, err=False), emulated_version=emulated_version)
