"""`python tests/lab_drive.py LAB MODULE...`: the drives of one running lab for the test modules
named (conftest.py LAB_DRIVERS: each module's `drive(lab_id)`), one after the other in this one
process, which pays the imports once instead of once per module. Prints one JSON object:
module -> {"out": the drive's records} or {"error": why it failed}, each with its "seconds"."""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def drive(lab_id: str, modules: list[str]) -> dict:
    outputs = {}
    for module in modules:
        started = time.monotonic()
        try:
            records = importlib.import_module(module.removesuffix(".py")).drive(lab_id)
            outputs[module] = {"out": json.loads(json.dumps(records))}
        except Exception:        # reported by the module's tests, with the traceback
            outputs[module] = {"error": f"driving {module} on {lab_id} failed:\n{traceback.format_exc()[-3000:]}"}
        outputs[module]["seconds"] = round(time.monotonic() - started, 1)
    return outputs


if __name__ == "__main__":
    sys.stdout.write(json.dumps(drive(sys.argv[1], sys.argv[2:])))
