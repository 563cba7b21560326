"""Crash safety of every lab: kill -9 of `labkit run LAB` and `labkit check LAB` at many points.

For each lab (every lab discovered under labs/, or --labs), the harness first measures one full
`labkit run` (its duration and how many ledger records it makes) and, when check kills are
planned (3 points or more), one full `labkit check`, then kills the command at --points
different points, mixed from four kinds:

  ledger   LABKIT_CRASH_AT=ledger:<n>: right after the n-th ledger record of the build is on
           disk, before the resource it names exists (n spread over the whole build)
  named    LABKIT_CRASH_AT=<lab>:<step>: the lab's own named crash points (labkit.crashpoints)
  run      SIGKILL of `labkit run LAB` after a delay spread over the measured build time
  check    SIGKILL of `labkit check LAB` on a running lab, after a delay spread over the
           measured check time

After every kill: sometimes `labkit run LAB` again, which must repair or rebuild the lab so
that its checks run; then `labkit cleanup --all`, after which the host must be exactly as before
(tests/support.py host_snapshot: mount table, root iptables legacy and nft, the instance's
network namespaces, links, cgroups and processes) and no lab state may say running or
half-built. Prints the counts per lab; exits 1 when any point left something behind.

Runs in its own labkit instance (state directory, answers directory, prefix) unless
LABKIT_STATE_DIR is already set, and holds the tests' host lock exclusively unless --no-lock.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from support import LABKIT, diff_snapshots, host_lock, host_snapshot  # noqa: E402

KINDS = ("ledger", "run", "check", "named")


@dataclass
class Point:
    kind: str
    value: str | float      # crash point name, or delay in seconds

    def __str__(self) -> str:
        return f"{self.kind} {self.value:.3f}s" if isinstance(self.value, float) else f"{self.kind} {self.value}"


@dataclass
class LabResult:
    lab: str
    build_s: float = 0.0
    check_s: float = 0.0
    ledger_records: int = 0
    startup_s: float = 0.0
    kills: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    finished_before_kill: int = 0
    rebuilds: int = 0
    clean: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.kills.values())


def labkit(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(LABKIT + list(args), cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=env or os.environ.copy())


def discover_labs() -> list[str]:
    sys.path.insert(0, str(REPO))
    from labkit.labs import discover
    return sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")


def named_points(lab: str) -> list[str]:
    """The lab's named crash points: crash_point("<lab>:<step>") in labkit/ and in the lab's code."""
    pattern = re.compile(r'crash_point\(\s*"(' + re.escape(lab) + r':[^"]+)"')
    found: list[str] = []
    for path in sorted([*(REPO / "labkit").rglob("*.py"), *(REPO / "labs" / lab).rglob("*.py")]):
        for name in pattern.findall(path.read_text()):
            if name not in found:
                found.append(name)
    return found


def ledger_count(lab: str) -> int:
    path = Path(os.environ["LABKIT_STATE_DIR"]) / lab / "ledger.jsonl"
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except FileNotFoundError:
        return 0


def spread(items: list, n: int) -> list:
    """n items spread evenly over `items` (all of them when n >= len)."""
    if n >= len(items):
        return list(items)
    return [items[int((i + 0.5) * len(items) / n)] for i in range(n)]


def plan(lab: str, points: int, build_s: float, check_s: float, records: int, startup_s: float) -> list[Point]:
    """`points` kill points, taken in turn from the four kinds so that every kind is exercised.

    Timed kills are spread from just before labkit's start-up is over (`startup_s`, when the
    command begins its real work) to the end of the measured command."""
    per_kind = points  # each candidate list is long enough to fill the whole plan alone

    def delays(total: float) -> list[Point]:
        first = min(startup_s * 0.9, total * 0.5)
        return [round(first + (total - first) * (i + 0.5) / per_kind, 3) for i in range(per_kind)]

    candidates = {
        "ledger": [Point("ledger", f"ledger:{n}") for n in spread(list(range(1, records + 1)), per_kind)],
        "run": [Point("run", d) for d in delays(build_s)],
        "check": [Point("check", d) for d in delays(check_s)],
        "named": [Point("named", name) for name in named_points(lab)],
    }
    # interleave: short spreads (few points) still pick early, middle and late moments
    for kind in ("run", "check"):
        c = candidates[kind]
        candidates[kind] = [c[i] for i in _middle_out(len(c))]
    candidates["ledger"] = [candidates["ledger"][i] for i in _middle_out(len(candidates["ledger"]))]
    chosen: list[Point] = []
    while len(chosen) < points and any(candidates.values()):
        for kind in KINDS:
            if candidates[kind] and len(chosen) < points:
                chosen.append(candidates[kind].pop(0))
    return chosen


def _middle_out(n: int) -> list[int]:
    """Indices 0..n-1 ordered middle, early, late, then filling the gaps (a spread at every prefix)."""
    if n == 0:
        return []
    order, seen = [], set()
    fractions = [0.5, 0.1, 0.9, 0.3, 0.7]
    for f in fractions:
        i = min(n - 1, int(f * n))
        if i not in seen:
            order.append(i)
            seen.add(i)
    order += [i for i in range(n) if i not in seen]
    return order


def kill_after(args: list[str], delay: float) -> bool:
    """Start labkit, SIGKILL it after `delay` s; True when it was still running at that moment."""
    proc = subprocess.Popen(LABKIT + args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def verify_clean(lab: str, before: dict, what: str, result: LabResult) -> None:
    cleaned = labkit("cleanup", "--all")
    if cleaned.returncode != 0:
        result.problems.append(f"{what}: cleanup --all exited {cleaned.returncode}: {cleaned.stderr.strip()}")
        return
    problems = diff_snapshots(before, host_snapshot())
    if ledger_count(lab):
        problems.append(f"the ledger of {lab} still has {ledger_count(lab)} records")
    listing = labkit("list").stdout
    if re.search(rf"\b{re.escape(lab)}\b.*(running|half-built)", listing):
        problems.append(f"`labkit list` still shows {lab} running or half-built")
    if problems:
        result.problems.append(f"{what}: " + "; ".join(problems))
    else:
        result.clean += 1


def rebuild_works(lab: str, what: str, result: LabResult) -> None:
    """`labkit run` on top of the crash repairs or rebuilds the lab, and its checks run."""
    rebuilt = labkit("run", lab)
    if rebuilt.returncode != 0:
        result.problems.append(f"{what}: `labkit run {lab}` after the kill exited {rebuilt.returncode}: "
                               f"{rebuilt.stderr.strip()[-300:]}")
        return
    checked = labkit("check", lab, "--format", "json")
    try:
        report = json.loads(checked.stdout)
        ok = checked.returncode in (0, 1) and "error" not in {r.get("status") for r in report.get("results", [])}
    except ValueError:
        ok = False
    if not ok:
        result.problems.append(f"{what}: `labkit check {lab}` after the rebuild exited {checked.returncode}: "
                               f"{(checked.stderr or checked.stdout).strip()[-300:]}")
        return
    result.rebuilds += 1


def crash_lab(lab: str, points: int, rebuild_every: int, say) -> LabResult:
    result = LabResult(lab)
    before = host_snapshot()
    start = time.monotonic()
    labkit("list")
    startup_s = result.startup_s = time.monotonic() - start
    # measure one full build and one full check
    start = time.monotonic()
    built = labkit("run", lab)
    result.build_s = time.monotonic() - start
    if built.returncode != 0:
        result.problems.append(f"`labkit run {lab}` failed: {built.stderr.strip()[-300:]}")
        return result
    result.ledger_records = ledger_count(lab)
    chosen = plan(lab, points, result.build_s, 0.0, result.ledger_records, startup_s)
    if any(p.kind == "check" for p in chosen):
        # a full check is measured only when a check is to be killed (its delays spread over it)
        start = time.monotonic()
        labkit("check", lab)
        result.check_s = time.monotonic() - start
        chosen = plan(lab, points, result.build_s, result.check_s, result.ledger_records, startup_s)
    verify_clean(lab, before, "the measured run", result)
    result.clean = 0

    for i, point in enumerate(chosen):
        what = f"{lab} #{i + 1} ({point})"
        if point.kind in ("ledger", "named"):
            crashed = labkit("run", lab, env={**os.environ, "LABKIT_CRASH_AT": str(point.value)})
            if crashed.returncode != -signal.SIGKILL:
                result.problems.append(f"{what}: the crash point was not reached "
                                       f"(exit {crashed.returncode}: {crashed.stderr.strip()[-200:]})")
        elif point.kind == "run":
            result.finished_before_kill += not kill_after(["run", lab], float(point.value))
        else:
            up = labkit("run", lab)
            if up.returncode != 0:
                result.problems.append(f"{what}: `labkit run {lab}` failed: {up.stderr.strip()[-200:]}")
            result.finished_before_kill += not kill_after(["check", lab], float(point.value))
        result.kills[point.kind] += 1
        if rebuild_every and i % rebuild_every == 0:
            rebuild_works(lab, what, result)
        verify_clean(lab, before, what, result)
        say(f"  {what}: {'ok' if not result.problems or not result.problems[-1].startswith(what) else 'PROBLEM'}")
    return result


def fresh_instance() -> None:
    base = Path(tempfile.mkdtemp(prefix="labkit-reliability-"))
    os.environ.update({
        "LABKIT_STATE_DIR": str(base / "state"),
        "LABKIT_ANSWERS_DIR": str(base / "answers"),
        "LABKIT_PREFIX": "r" + secrets.token_hex(2),
    })


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/reliability", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    crash = sub.add_parser("crash", help="kill -9 of labkit run/check at many points per lab, cleanup after each")
    crash.add_argument("--labs", help="comma-separated lab ids (default: every lab under labs/)")
    crash.add_argument("--points", type=int, default=25, help="kill points per lab (default 25)")
    crash.add_argument("--rebuild-every", type=int, default=4,
                       help="after every N-th kill, check that `labkit run` repairs the lab (0: never)")
    crash.add_argument("--json", type=Path, help="also write the counts as JSON to this file")
    crash.add_argument("--no-lock", action="store_true",
                       help="do not take the tests' host lock (the caller already holds it)")
    crash.add_argument("-q", "--quiet", action="store_true", help="only the summary")
    args = parser.parse_args(argv)
    if args.points < 1:
        parser.error("--points: expected at least 1")
    labs = args.labs.split(",") if args.labs else discover_labs()
    known = discover_labs()
    unknown = [lab for lab in labs if lab not in known]
    if unknown:
        parser.error(f"--labs: no lab named {unknown[0]!r} (labs: {', '.join(known)})")
    if not os.environ.get("LABKIT_STATE_DIR"):
        fresh_instance()
    say = (lambda _m: None) if args.quiet else (lambda m: print(m, flush=True))
    results = []
    with nullcontext() if args.no_lock else host_lock(True):
        for lab in labs:
            say(f"{lab}:")
            results.append(crash_lab(lab, args.points, args.rebuild_every, say))
            labkit("cleanup", "--all")
    print(f"{'lab':<20} {'kills':>5} {'ledger':>6} {'named':>5} {'run':>4} {'check':>5} "
          f"{'early':>5} {'rebuilt':>7} {'clean':>5} {'problems':>8}  build/check s")
    for r in results:
        print(f"{r.lab:<20} {r.total:>5} {r.kills['ledger']:>6} {r.kills['named']:>5} {r.kills['run']:>4} "
              f"{r.kills['check']:>5} {r.finished_before_kill:>5} {r.rebuilds:>7} {r.clean:>5} "
              f"{len(r.problems):>8}  {r.build_s:.1f}/{f'{r.check_s:.1f}' if r.check_s else '-'}")
    for r in results:
        for p in r.problems:
            print(f"PROBLEM {r.lab}: {p}")
    if args.json:
        args.json.write_text(json.dumps([{**r.__dict__, "total": r.total} for r in results], indent=2) + "\n")
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
