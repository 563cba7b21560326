"""`labkit devices`: kubelet's device manager, reconstructed. `play` runs device-plugin cases
(plugin events, allocations, checkpoints, restarts) and compares them with what they expect."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labkit import cases, cliopts

app = typer.Typer(help="kubelet's device manager v1.34.1, reconstructed: play device-plugin cases (`play`).",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

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
