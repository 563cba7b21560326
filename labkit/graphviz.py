"""Graphviz rendering shared by the labs' graph commands (chain graphs, owner graphs, peer groups)."""

from __future__ import annotations

import shutil
import subprocess

from labkit.errors import LabkitError


def render(dot_text: str, fmt: str) -> bytes:
    """Render Graphviz source to `fmt` (svg, png, ...) with `dot`; a clear error when it is missing."""
    dot = shutil.which("dot")
    if not dot:
        raise LabkitError("Graphviz's dot is not installed (apt-get install graphviz); write the .dot source instead")
    result = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True)
    if result.returncode != 0:
        raise LabkitError(f"dot failed: {result.stderr.decode(errors='replace').strip()}")
    return result.stdout
