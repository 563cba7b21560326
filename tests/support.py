"""Shared test helpers: run the real CLI, snapshot the host and compare it, the host lock.

Host-wide comparisons (root iptables, the host's mount table, this instance's namespaces, cgroups
and processes) run while other tests build labs: diff_snapshots leaves out what another live
labkit instance or running test changed, and compares everything else exactly (`host_compared`
marker, see conftest.py). Tests that create kernel resources hold the *shared* host lock; a
caller that must have the host to itself (scripts/harness/reliability.py run by hand) holds it
*exclusively*. The lock is a file lock, so it also orders test runs of several checkouts.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABKIT = [sys.executable, "-m", "labkit"]
LOCK_PATH = "/tmp/labkit-tests.lock"
TURNSTILE_PATH = "/tmp/labkit-tests.turnstile"
# LABKIT_TEST_LOCK_LOG=FILE: every hold of the host lock appends one JSON line there (the test, shared
# or exclusive, seconds waited for it and seconds held); conftest.py sets it for a run and sums it up
LOCK_LOG_ENV = "LABKIT_TEST_LOCK_LOG"


_GUARD = threading.Lock()
_HOLDS: dict[int, list] = {}   # process id -> [depth, lock file] of that process's hold


@contextmanager
def host_lock(exclusive: bool):
    """The host lock, shared or exclusive. Everyone passes a turnstile (a second lock, held only
    while waiting) first, so an exclusive holder waiting for the shared holders to leave keeps new
    shared holders out: with suites of several checkouts (or several test workers) running at
    once, readers would otherwise keep the lock shared for ever and starve the host-wide
    comparisons.

    A process holds the lock once, for all its threads: a shared request inside a hold of the same
    process is granted at once (it must not queue behind a waiting exclusive holder that waits for
    this very process), and the lock stays held until the last holder of the process leaves, so
    labs built side by side in threads stay covered until the last of them is done."""
    pid = os.getpid()
    with _GUARD:
        hold = _HOLDS.get(pid)
        if hold is None:
            asked = time.monotonic()
            hold = _HOLDS[pid] = [0, _acquire(exclusive), exclusive, asked, time.monotonic()]
        elif exclusive:
            raise RuntimeError("host_lock(exclusive=True) inside a hold of the same process would wait for itself")
        hold[0] += 1
    try:
        yield
    finally:
        with _GUARD:
            hold[0] -= 1
            if hold[0] == 0:
                del _HOLDS[pid]
                fcntl.flock(hold[1], fcntl.LOCK_UN)
                os.close(hold[1])
                _log_hold(*hold[2:])


def _log_hold(exclusive: bool, asked: float, granted: float) -> None:
    """One line in LABKIT_TEST_LOCK_LOG (when set) for a hold just released."""
    target = os.environ.get(LOCK_LOG_ENV)
    if not target:
        return
    import json
    line = json.dumps({"test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"), "exclusive": exclusive,
                       "waited": round(granted - asked, 3), "held": round(time.monotonic() - granted, 3)})
    with open(target, "a") as log:     # one short write in append mode: lines of workers do not mix
        log.write(line + "\n")


def lock_summary(path: str) -> str:
    """What LABKIT_TEST_LOCK_LOG recorded, summed up: seconds waited for the host lock, shared and
    exclusive, and the test files that waited longest."""
    import json
    holds = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not holds:
        return "host lock: no holds recorded"
    waited = {kind: sum(h["waited"] for h in holds if h["exclusive"] == (kind == "exclusive"))
              for kind in ("shared", "exclusive")}
    held_exclusive = sum(h["held"] for h in holds if h["exclusive"])
    by_file: dict[str, float] = {}
    for h in holds:
        name = h["test"].split("::")[0] or "(outside a test)"
        by_file[name] = by_file.get(name, 0.0) + h["waited"]
    longest = sorted(by_file.items(), key=lambda kv: -kv[1])[:8]
    return (f"host lock: {len(holds)} holds; waited {waited['shared']:.0f} s for shared holds and "
            f"{waited['exclusive']:.0f} s for exclusive ones (summed over workers); exclusive holds "
            f"lasted {held_exclusive:.0f} s in all\n  waited longest: "
            + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in longest))


def _acquire(exclusive: bool) -> int:
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o666)
    turnstile = os.open(TURNSTILE_PATH, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.close(turnstile)
    return fd


def _after_fork_in_child() -> None:
    global _GUARD
    _GUARD = threading.Lock()       # a thread of the parent may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


def labkit(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None,
           check: int | None = None) -> subprocess.CompletedProcess:
    """Run the real `labkit` CLI (python -m labkit) with the test's environment."""
    result = subprocess.run(LABKIT + list(args), capture_output=True, text=True, timeout=timeout,
                            env=env or os.environ.copy(), input=input, cwd=REPO)
    if check is not None and result.returncode != check:
        raise AssertionError(
            f"labkit {' '.join(args)} exited {result.returncode}, expected {check}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def _strip_comments(text: str) -> str:
    # iptables-save prints "# Generated by ... on <date>" lines: everything else must match.
    return "\n".join(l for l in text.splitlines() if not l.startswith("#"))


def _run(argv: list[str]) -> str:
    if not shutil.which(argv[0]):
        return f"({argv[0]} not installed)"
    out = subprocess.run(argv, capture_output=True, text=True)
    return _strip_comments(out.stdout) + (f"\n[exit {out.returncode}: {out.stderr.strip()}]" if out.returncode else "")


def _owner_tokens() -> dict[str, str]:
    """LABKIT_OWNER token of every live (not zombie) process labkit started: pid -> token."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.split(") ")[-1][:1] in ("Z", "X"):
            continue
        for var in environ.split(b"\0"):
            if var.startswith(b"LABKIT_OWNER="):
                found[pid] = var[len(b"LABKIT_OWNER="):].decode(errors="replace")
    return found


def labkit_processes(prefix: str = "") -> list[str]:
    """Live processes labkit started (LABKIT_OWNER set), of instances whose prefix is `prefix`."""
    found = []
    for pid, token in _owner_tokens().items():
        if not prefix or token.startswith(f"{prefix}:"):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append(f"{pid} {cmdline}")
    return found


KMODULE_CLAIMS = Path("/run/labkit/kmodules")
# The labkit prefixes of the suite's test processes (conftest.py fresh_environment): a file per
# test process, named by its process id, listing every prefix it has given an instance, one per
# line, kept until that process ends. Some tests make network namespaces with labkit's own code
# without building a lab (no claim, no process: tests/kubeproxy_cases.py lab_namespace), and a
# test comparing the host meanwhile must know whose they are. Kept for the process's life, not
# the test's: a comparison reads the mount table before it reads who is live, and a test that
# ended in between had made it look unexplained (it did, once).
TEST_INSTANCES = Path("/tmp/labkit-tests.instances")
A_TEST = "(a test)"


def register_instance(prefix: str) -> None:
    """Adds `prefix` to this process's entry in TEST_INSTANCES."""
    TEST_INSTANCES.mkdir(mode=0o700, exist_ok=True)
    with open(TEST_INSTANCES / str(os.getpid()), "a") as entry:    # one short append per line
        entry.write(prefix + "\n")


def forget_instances() -> None:
    """Removes this process's entry (when it ends)."""
    (TEST_INSTANCES / str(os.getpid())).unlink(missing_ok=True)


def _test_prefixes() -> set[str]:
    """Prefixes TEST_INSTANCES lists for test processes that are alive; the entries of processes
    that are gone are removed."""
    found: set[str] = set()
    for entry in TEST_INSTANCES.glob("*") if TEST_INSTANCES.is_dir() else []:
        try:
            os.kill(int(entry.name), 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
            continue
        except (OSError, ValueError):
            continue
        try:
            found.update(line for line in entry.read_text().splitlines() if line)
        except OSError:
            continue
    return found


def other_instances(prefix: str) -> dict[str, list[str]]:
    """Labkit instances on this machine other than the one of `prefix`, from what they show live:
    the claim every lab build holds first (/run/labkit/kmodules/claim-<prefix>:<lab>:<token>,
    labkit/kmodules.py), the LABKIT_OWNER=<prefix>:<lab>:<token> of their processes
    (labkit/procs.py), and the prefixes of the suite's live test processes (TEST_INSTANCES, lab
    A_TEST: any lab of that prefix). Prefix -> the labs seen ("gc", "kube-proxy", ...)."""
    labs: dict[str, set[str]] = {}
    tokens = list(_owner_tokens().values())
    if KMODULE_CLAIMS.is_dir():
        tokens += [p.name[len("claim-"):] for p in KMODULE_CLAIMS.glob("claim-*")]
    tokens += [f"{p}:{A_TEST}:-" for p in _test_prefixes()]
    for token in tokens:
        parts = token.split(":")
        if len(parts) == 3 and parts[0] != prefix:
            labs.setdefault(parts[0], set()).add(parts[1])
    return {p: sorted(found) for p, found in sorted(labs.items())}


def host_snapshot() -> dict[str, object]:
    """What must be identical on the host before and after any lab (comments with dates removed).

    The mount table and the root namespace's iptables are compared whole. Namespaces, cgroups and
    processes are those of this labkit instance (LABKIT_PREFIX), so labs of other instances
    running on the machine at the same time do not count. `_others` (not compared itself) lists
    the other labkit instances live at that moment, for diff_snapshots.
    """
    prefix = os.environ.get("LABKIT_PREFIX", "lk")
    # who is live, before and after the rest is read: an instance whose namespace the mount table
    # shows may end before a single look afterwards (it ends after its namespaces are gone)
    others_first = other_instances(prefix)
    cgroups = sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"*/labkit-{prefix}-*")) + \
        sorted(str(p) for p in Path("/sys/fs/cgroup").glob(f"labkit-{prefix}-*"))
    return {
        "mountinfo": Path("/proc/self/mountinfo").read_text(),
        "iptables-legacy": _run(["iptables-legacy-save"]),
        "ip6tables-legacy": _run(["ip6tables-legacy-save"]),
        "iptables-nft": _run(["iptables-nft-save"]),
        "ip6tables-nft": _run(["ip6tables-nft-save"]),
        "nft": _run(["nft", "list", "ruleset"]),
        "netns": sorted(n for n in os.listdir("/run/netns") if n.startswith(f"{prefix}-"))
        if os.path.isdir("/run/netns") else None,
        "link-names": sorted(l.split(":")[1].strip() for l in subprocess.run(
            ["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines()),
        "cgroups": cgroups,
        # cgroup v2: the controllers the root delegates (a numa lab may enable cpuset there while it runs)
        "cgroup-root-subtree-control": Path("/sys/fs/cgroup/cgroup.subtree_control").read_text()
        if Path("/sys/fs/cgroup/cgroup.subtree_control").exists() else None,
        "run-labkit": os.path.exists("/run/labkit"),
        "processes": labkit_processes(prefix),
        "_others": _merged(others_first, other_instances(prefix)),
    }


def _merged(*found: dict[str, list[str]]) -> dict[str, list[str]]:
    labs: dict[str, set[str]] = {}
    for one in found:
        for p, seen in one.items():
            labs.setdefault(p, set()).update(seen)
    return {p: sorted(seen) for p, seen in sorted(labs.items())}


def _mount_point(line: str) -> str:
    fields = line.split(" ")
    return fields[4] if len(fields) > 4 else ""


def _named(others: dict[str, set[str]], shown: int = 8) -> str:
    """The other instances as `prefix (lab)`, the first few of them: the suite's workers keep
    every prefix they gave for their life, hundreds by the end of a run."""
    named = [f"{p} ({sorted(labs)[0]})" for p, labs in sorted(others.items())]
    more = f" and {len(named) - shown} more" if len(named) > shown else ""
    return ", ".join(named[:shown]) + more


def diff_snapshots(before: dict, after: dict) -> list[str]:
    """What differs between two host_snapshots, except what another labkit instance changed.

    Other labs may run on the machine while a test compares the host: the suite's other workers,
    another checkout's suite, a workshop, a manual `labkit run`. What is attributed to another
    instance live in either snapshot (`_others`: its kernel-module claim or its processes name its
    prefix and lab; the suite's test processes name the prefixes they use) is left out, and a warning names that
    instance:
      - mount table: the /run/netns/<prefix>-<lab>-* namespaces of those instances' labs (of a
        test's prefix: /run/netns/<prefix>-*), and the /run/netns mount itself while any of those
        is in it (labkit keeps it for the last one);
      - /run/labkit existing, and the root cgroup's subtree_control, while another instance is live
        (its claims live under /run/labkit; its cgroups need the controllers delegated);
      - /run/netns existing, while another instance is live and no namespace of this one is there.
    Everything else is compared exactly, so a leak of this instance still fails, whoever else runs."""
    others: dict[str, set[str]] = {}
    for snap in (before, after):
        for p, labs in snap.get("_others", {}).items():
            others.setdefault(p, set()).update(labs)
    netns_owner = {f"/run/netns/{p}-" + ("" if lab == A_TEST else f"{lab}-"): f"{p} ({lab})"
                   for p, labs in others.items() for lab in labs}

    def owner(point: str) -> str | None:
        return next((who for start, who in netns_owner.items() if point.startswith(start)), None)

    left_out: list[str] = []
    problems: list[str] = []
    for key in before:
        if key.startswith("_") or before[key] == after.get(key):
            continue
        b, a = before[key], after.get(key)
        if key == "mountinfo" and netns_owner:
            lines = {"before": b.splitlines(), "after": a.splitlines()}
            holders = sorted({owner(_mount_point(l)) for text in lines.values() for l in text} - {None})

            def mine(text: list[str]) -> list[str]:
                return [l for l in text if owner(_mount_point(l)) is None
                        and not (holders and _mount_point(l) == "/run/netns")]
            if mine(lines["before"]) == mine(lines["after"]):
                changed = sorted({_mount_point(l) for l in set(lines["before"]) ^ set(lines["after"])})
                left_out.append(f"mounts {', '.join(changed)} (namespaces of {', '.join(holders)})")
                continue
            b, a = "\n".join(mine(lines["before"])), "\n".join(mine(lines["after"]))
        elif key == "netns" and others and not b and not a:
            # /run/netns made (ip netns add) or removed by another instance, none of ours in it
            left_out.append(f"/run/netns {'made' if b is None else 'removed'} (instances live: {_named(others)})")
            continue
        elif key in ("run-labkit", "cgroup-root-subtree-control") and others:
            left_out.append(f"{key} {b!r} -> {a!r} (instances live: {_named(others)})")
            continue
        problems.append(f"{key} changed:\n  before: {b!r}\n  after:  {a!r}")
    if left_out:
        import warnings
        warnings.warn("host comparison: left out what other labkit instances (prefix (lab)) changed meanwhile: "
                      + "; ".join(left_out), stacklevel=2)
    return problems


def assert_clean_after(before: dict, what: str) -> None:
    """`labkit cleanup --all` succeeds and leaves the host as `before` (a host_snapshot)."""
    result = labkit("cleanup", "--all")
    assert result.returncode == 0, f"{what}: cleanup failed: {result.stderr}"
    problems = diff_snapshots(before, host_snapshot())
    assert not problems, f"after {what} and cleanup --all:\n" + "\n".join(problems)


POLL_BACKOFF, POLL_MAX_S = 1.5, 0.5


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds have passed; its last value. The
    pause between polls starts at `interval` and grows by half each time up to POLL_MAX_S: many
    predicates start a process (kubectl, labkit), and a wait that polled every 0.05 s on a loaded
    machine spent more CPU than what it waited for."""
    deadline = time.monotonic() + timeout
    pause = interval
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = max(pause, min(pause * POLL_BACKOFF, POLL_MAX_S))
    return bool(predicate())


def shared_fidelity(kind: str) -> Path | None:
    """shared/fidelity/<kind> (cases from Kubernetes' own tests): LABKIT_FIDELITY_DIR, or the
    shared directory beside the repository (as CI has it); None when neither is there."""
    for base in (os.environ.get("LABKIT_FIDELITY_DIR"), REPO.parent / "shared" / "fidelity",
                 "/work/shared/fidelity"):
        if base and (Path(base) / kind).is_dir():
            return Path(base) / kind
    return None


# -- the in-process API server and real kubectl ---------------------------------------------------

ADMIN_GROUPS = ["system:masters", "system:authenticated"]


def admin_client(api):
    """An in-process client of `api` as a member of system:masters."""
    from labkit.apiserver.client import LocalClient
    return LocalClient(api, "admin", list(ADMIN_GROUPS))


@contextmanager
def in_process_api(db: Path, namespaces: tuple[str, ...] = ("ns",)):
    """The API server's request handling without HTTP or controllers: an Api over a fresh Store
    at `db`, with `namespaces` created by an admin; the store is closed afterwards."""
    from labkit.apiserver.handler import Api
    from labkit.apiserver.registry.store import Registry
    from labkit.apiserver.storage import Store
    store = Store(db)
    try:
        api = Api(Registry(store))
        for namespace in namespaces:
            admin_client(api).create("v1", "namespaces", {"metadata": {"name": namespace}})
        yield api
    finally:
        store.close()


@contextmanager
def embedded_server(state: Path, home: Path, controllers: list[str] | None = None, tokens: str | None = None):
    """labkit's API server in-process (EmbeddedServer), with `server.test_env`: the environment
    kubectl runs in (the server's admin kubeconfig, `home` as HOME, so kubectl's cache is the
    test's own). `controllers`: the server's default set unless given; `tokens`: the lines of its static token file (tokens.csv, mode 0600). A
    module-scoped fixture yields it from inside the `with`. It takes no host lock: the server
    makes nothing on the host (its state directory, threads, loopback ports; its controllers act
    through the API only), so a test waits for no host-wide comparison to start or stop it."""
    from labkit.apiserver.server import EmbeddedServer
    options = {} if controllers is None else {"controllers": controllers}
    if tokens is not None:
        state.mkdir(parents=True, exist_ok=True)
        (state / "tokens.csv").write_text(tokens)
        os.chmod(state / "tokens.csv", 0o600)
    server = EmbeddedServer(state, **options).start()
    server.test_env = {**os.environ, "KUBECONFIG": str(server.kubeconfig), "HOME": str(home)}
    try:
        yield server
    finally:
        server.stop()


def kubectl(server, *args: str, input: str | None = None, check: bool = False, timeout: float = 60,
            token: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Real kubectl against `server` (in its `test_env`, or `env`), as `token`'s user when given.
    `check`: a failure is an AssertionError naming the command and what kubectl printed."""
    argv = ["kubectl", *(["--token", token] if token else []), *args]
    result = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout,
                            env=env or server.test_env)
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def labkit_in_process(*args: str, input: str = "") -> subprocess.CompletedProcess:
    """`labkit ARGS` as `python -m labkit` runs it (labkit.cli.main), in this process: its exit
    code and what it wrote to stdout and stderr, without an interpreter's start-up and labkit's
    imports each time. For commands that only read or refuse (no lab is built, nothing started):
    standard input is `input`, the working directory the repository's (as `labkit()` has it); an
    exception main() lets through is a traceback on stderr and exit 1, as the process shows it."""
    import io
    import traceback
    from contextlib import redirect_stderr, redirect_stdout
    from labkit.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = 0
    saved = sys.argv, sys.stdin, os.getcwd()
    sys.argv, sys.stdin = ["labkit", *args], io.StringIO(input)
    try:
        os.chdir(REPO)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                if isinstance(exc.code, str):       # sys.exit(message): the message, exit 1
                    err.write(exc.code + "\n")
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            except Exception:       # noqa: BLE001 - what the interpreter prints for it
                err.write(traceback.format_exc())
                code = 1
    finally:
        sys.argv, sys.stdin = saved[0], saved[1]
        os.chdir(saved[2])
    return subprocess.CompletedProcess(["labkit", *args], code, out.getvalue(), err.getvalue())


@contextmanager
def skipping_idle_time(server, rate: float = 10.0):
    """An embedded server (not started yet) whose controllers that wait for times (garbage
    collector, namespace controller, the kubelet stand-in's grace periods) run on a SkippingClock,
    moved ahead by a thread whenever the server and every controller have nothing to do now: a
    stand-in cluster on which upstream's delays pass in their order without being sat through.
    The clock runs at most `rate` times as fast as real time (a namespace held by a finalizer is
    looked at every 8 s of it, for ever: unbounded, those passes would take the CPU). Yields the
    clock (its `skipped` says how much was skipped)."""
    from labkit.controllers.clock import SkippingClock
    clock = SkippingClock()
    server.controllers.settings["clock"] = clock
    stop = threading.Event()
    started = time.monotonic()

    def quiet() -> bool:
        return server.internals.idle() and server.controllers.quiet()

    def skip() -> None:
        while not stop.wait(0.05):
            budget = (rate - 1) * (time.monotonic() - started) - clock.skipped
            try:
                clock.skip(quiet, limit=clock() + budget)
            except Exception:           # the server is stopping
                pass
    thread = threading.Thread(target=skip, daemon=True, name="skip-idle-time")
    thread.start()
    try:
        yield clock
    finally:
        stop.set()
        thread.join(timeout=10)
