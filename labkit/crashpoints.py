"""Named crash points, for proving that cleanup works after kill -9 at any step.

`crash_point("numa:admitted")` does nothing unless LABKIT_CRASH_AT names that point; then labkit
kills itself with SIGKILL right there, exactly as an operator's `kill -9` would. Crash-and-cleanup
tests set the variable to stop `labkit run` and other commands at every step of their work.
Names are `<area>:<step>`. Every lab also has the generic points `ledger:<n>` (labkit.ledger): the
process dies right after its n-th ledger record is on disk, before the resource it names exists.
"""

from __future__ import annotations

import os
import signal

VARIABLE = "LABKIT_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
