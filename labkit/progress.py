"""What a long operation is doing, as it happens: `labkit run` and `labkit reset` show the step a
lab build is at (each resource it records in its ledger, each line it logs) on a terminal, stay
quiet when their output goes elsewhere, and end with one summary line.

Code that does the work only calls `step(text)`; whoever shows it (the CLI) sets a listener for
the duration with `listening(fn)`. Without one, `step` costs a function call.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable

_listeners: list[Callable[[str], None]] = []


def step(text: str) -> None:
    for listener in _listeners:
        listener(text)


@contextmanager
def listening(fn: Callable[[str], None]):
    _listeners.append(fn)
    try:
        yield
    finally:
        _listeners.remove(fn)


def describe_record(entry: dict) -> str:
    """A ledger record as a step: `netns lk-kube-proxy-node1`, `process webhook (pid 123)`."""
    kind = entry.get("kind", "?")
    for key in ("name", "netns", "path", "cgroup", "resource", "token"):
        value = entry.get(key)
        if isinstance(value, str) and value:
            return f"{kind} {value}"
    return kind


@contextmanager
def shown(console, title: str):
    """Show the steps under `title` on `console` while the block runs, when it is a terminal
    (rich's status line: the latest step, and how many so far). Yields a dict the block may fill
    with `summary`; the summary line is printed afterwards, terminal or not."""
    done = {"steps": 0, "summary": None}
    started = time.monotonic()

    def count(_text: str) -> None:
        done["steps"] += 1

    if console.is_terminal:
        with console.status(title) as status:
            def show(text: str) -> None:
                count(text)
                status.update(f"{title} [dim]({done['steps']}: {text})[/]")
            with listening(show):
                yield done
    else:
        with listening(count):
            yield done
    if done["summary"]:
        console.print(done["summary"].format(seconds=time.monotonic() - started, steps=done["steps"]),
                      highlight=False, markup=False, soft_wrap=True)
