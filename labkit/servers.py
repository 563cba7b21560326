"""The embedded API servers labkit has run on this machine, for the checks of prediction exercises.

A prediction exercise earns nothing once the student has seen its outcome (labkit.predictions).
Its lab's checks read the lab's own server logs for a try of the experiment; but every labkit
embedded server answers the same way: another lab's (`<state root>/<lab>/apiserver`) and
`labkit apiserver`'s (`<state root>/apiserver`, or the directory its --state names, which it
records here: `register`). `others(own)` gives them all but the lab's own, as Targets whose
audit and decision logs the checks read. A server whose directory was removed since (`labkit
cleanup`) shows nothing any more: a lab keeps a try it found (labkit.predictions.keep_trial)
before its own reset clears it.
"""

from __future__ import annotations

import json
from pathlib import Path

from labkit import paths

REGISTRY = "apiservers.json"     # <state root>/apiservers.json: the --state directories of `labkit apiserver`
LOGS = ("audit.log", "decisions.log")


def _registry() -> Path:
    return paths.state_root() / REGISTRY


def _registered() -> list[str]:
    try:
        found = json.loads(_registry().read_text())
    except (OSError, ValueError):
        return []
    return [str(d) for d in found] if isinstance(found, list) else []


def register(state_dir: Path | str) -> None:
    """`labkit apiserver` runs a server whose state is in `state_dir`: remember the directory."""
    directory = str(Path(state_dir).resolve())
    known = _registered()
    if directory in known:
        return
    _registry().parent.mkdir(parents=True, exist_ok=True)
    _registry().write_text(json.dumps(sorted({*known, directory})) + "\n")


def state_dirs() -> list[Path]:
    """Every embedded server's state directory that has a log: each lab's, `labkit apiserver`'s."""
    root = paths.state_root()
    candidates = [*root.glob("*/apiserver"), root / "apiserver", *(Path(d) for d in _registered())]
    return sorted({d.resolve() for d in candidates if any((d / name).is_file() for name in LOGS)})


def others(own: Path | str | None):
    """The Targets of every embedded server's state but `own` (the lab's own server's directory)."""
    from labkit.apiserver.target import Target
    mine = Path(own).resolve() if own is not None else None
    return [Target(kubeconfig=d / "kubeconfig", state_dir=d) for d in state_dirs() if d != mine]


def lines_with(state_dir: Path | str, log: str, needles: tuple[str, ...]) -> list[dict]:
    """The JSON lines of the log `log` (audit.log, decisions.log) of `state_dir` that contain one of
    `needles`, oldest first. A lab's log can be large and a check wants a handful of its lines:
    they are picked as text before any is parsed (a line cut short by a crash is skipped)."""
    out = []
    try:
        with open(Path(state_dir) / log, encoding="utf-8", errors="replace") as f:
            for line in f:
                if any(n in line for n in needles):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
    except OSError:
        return []
    return out
