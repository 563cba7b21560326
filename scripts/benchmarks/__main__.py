"""Run the benchmarks in this directory and print their figures as one table.

Each module here defines `run() -> list[Figure]`. Benchmarks measure; they never assert: targets
are printed next to the figures, and the table says whether each target was met.
Benchmarks run in an isolated labkit instance (own state directory and name prefix), each
holding the tests' shared host lock (tests/support.py): a benchmark never runs while the crash
harness run by hand (scripts/harness/reliability.py) holds it exclusively.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE.parent.parent / "tests"))

from figures import Figure, print_table  # noqa: E402
from support import host_lock  # noqa: E402


def main() -> int:
    names = sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_") and p.stem != "figures")
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    parser.add_argument("only", nargs="*", help=f"benchmarks to run (default: all of {', '.join(names)})")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(names)}")
    selected = args.only or names
    with tempfile.TemporaryDirectory(prefix="labkit-bench-") as tmp:
        os.environ.setdefault("LABKIT_STATE_DIR", f"{tmp}/state")
        os.environ.setdefault("LABKIT_ANSWERS_DIR", f"{tmp}/answers")
        os.environ.setdefault("LABKIT_PREFIX", "bench")
        figures: list[Figure] = []
        for name in selected:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            # loaded from its file: a benchmark named like a standard module (gc) must not resolve to it
            spec = importlib.util.spec_from_file_location(f"labkit_benchmark_{name}", HERE / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            with host_lock(False):
                figures += module.run()
    print_table(figures)
    if args.json:
        args.json.write_text(json.dumps([f.__dict__ for f in figures], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
