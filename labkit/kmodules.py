"""Kernel modules the kernel loads because of a lab, unloaded again when no lab is left.

Building a lab makes the kernel load modules on its own: a bridge or veth link loads `bridge`,
`stp`, `llc` and `veth`; the first iptables rule in a lab's namespace loads `ip_tables`,
`iptable_nat`, `xt_*` matches and conntrack; `modprobe br_netfilter` brings `bridge` along. On a
stock Debian 12 or Ubuntu machine none of these is loaded before, and the host should be as it was
when the last lab is cleaned up.

So every lab build first holds a claim here (recorded in its ledger before anything else, so its
removal runs last, after the lab's namespaces are gone). The first claim, when no other is held,
writes down which modules were loaded at that moment (the baseline). Dropping the last claim
unloads every module of the families labs cause to be loaded (FAMILIES) that was not in the
baseline and that nothing uses any more (use count 0, no holders, and for bridge and veth no link
of theirs anywhere labkit can see: unloading those deletes their links), repeatedly, so that
dependencies go after what used them. A module loaded before the first lab, or still used by
anything, is never unloaded. `labkit doctor`'s probes (which create bridges, veths and iptables
rules in a throwaway namespace) hold a claim of their own for the time they run.

Paths are parameters (`root`) so the logic can be tested where modules are built in.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
from contextlib import contextmanager
from pathlib import Path

# Module families a lab's links, bridges, netfilter rules and br_netfilter make the kernel load.
FAMILIES = re.compile(
    r"bridge|stp|llc|veth|br_netfilter|x_tables|ip_tables|ip6_tables|iptable_\w+|ip6table_\w+"
    r"|xt_\w+|ipt_\w+|ip6t_\w+|nf_\w+|nft_\w+|nf_tables|nfnetlink\w*|libcrc32c|crc32c_generic")


def _directory(root: Path) -> Path:
    return root / "run/labkit/kmodules"


def loaded(root: Path = Path("/")) -> dict[str, int]:
    """Loaded modules and their use counts, from /proc/modules ({} without module support)."""
    try:
        text = (root / "proc/modules").read_text()
    except OSError:
        return {}
    modules = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            modules[fields[0]] = int(fields[2]) if fields[2].isdigit() else 1
    return modules


@contextmanager
def _locked(root: Path):
    """The directory, locked; the lock file goes with the last claim, so a waiter checks that the
    file it locked is still the one in place."""
    directory = _directory(root)
    while True:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(directory / "lock")
        except FileNotFoundError:
            current = None
        mine = os.fstat(fd)
        if current is not None and (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)
    try:
        yield directory
    finally:
        os.close(fd)


def _claim_path(directory: Path, token: str) -> Path:
    return directory / f"claim-{token.replace('/', '_')}"


def claim(token: str, root: Path = Path("/")) -> None:
    """Hold a claim; the first one writes the baseline."""
    with _locked(root) as directory:
        baseline = directory / "baseline.json"
        if not baseline.exists():
            baseline.write_text(json.dumps(sorted(loaded(root))))
        # whole or not at all: a claim file left empty by a process killed while writing it could
        # not be told from one whose process lives (_reap_dead_holds)
        path = _claim_path(directory, token)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(str(os.getpid()))
        os.replace(partial, path)


def hold(env, root: Path = Path("/")) -> None:
    """A lab build's claim, recorded in its ledger first."""
    env.ledger.record("kmodules", token=env.token, root=str(root))
    claim(env.token, root)


# Modules whose links do not count as users: unloading one deletes every link of its type, so
# they stay while any such link exists in the root namespace or a named one.
LINK_TYPES = {"bridge": "bridge", "veth": "veth"}


def _links_exist(link_type: str) -> bool:
    namespaces = [[]] + [["-n", name] for name in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])]
    for where in namespaces:
        try:
            out = subprocess.run(["ip", *where, "-o", "link", "show", "type", link_type],
                                 capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return True  # cannot tell: keep the module
        if out.returncode != 0 or out.stdout.strip():
            return True
    return False


def release(token: str, root: Path = Path("/"), rmmod=None, links_exist=_links_exist) -> list[str]:
    """Drop a claim; when it was the last, unload what labs made the kernel load. Returns the
    modules unloaded."""
    rmmod = rmmod or _rmmod
    with _locked(root) as directory:
        _claim_path(directory, token).unlink(missing_ok=True)
        _reap_dead_holds(directory)
        if any(directory.glob("claim-*")):
            return []
        baseline_path = directory / "baseline.json"
        try:
            baseline = set(json.loads(baseline_path.read_text()))
        except (OSError, ValueError):
            baseline = None  # no baseline, nothing known to be ours
        unloaded = _unload_new(root, baseline, rmmod, links_exist) if baseline is not None else []
        baseline_path.unlink(missing_ok=True)
        for partial in directory.glob(".claim-*"):      # a claim being written when its process was killed
            partial.unlink(missing_ok=True)
        (directory / "lock").unlink(missing_ok=True)
    for path in (directory, directory.parent):  # /run/labkit is labkit's own
        try:
            path.rmdir()
        except OSError:
            break
    return unloaded


def _unload_new(root: Path, baseline: set[str], rmmod, links_exist=_links_exist) -> list[str]:
    unloaded: list[str] = []
    for _ in range(16):  # each pass frees what the previous one's modules used
        candidates = [name for name, users in loaded(root).items()
                      if users == 0 and name not in baseline and FAMILIES.fullmatch(name)
                      and not _holders(root, name)
                      and not (name in LINK_TYPES and links_exist(LINK_TYPES[name]))]
        progress = [name for name in sorted(candidates) if rmmod(name)]
        unloaded += progress
        if not progress:
            break
    return unloaded


def _holders(root: Path, name: str) -> bool:
    holders = root / "sys/module" / name / "holders"
    return holders.is_dir() and any(holders.iterdir())


def _rmmod(name: str) -> bool:
    """Unload one module, only that one (not, as `modprobe -r` would, what it depends on)."""
    try:
        return subprocess.run(["rmmod", name], capture_output=True).returncode == 0
    except OSError:
        return False


def remove_recorded(entry: dict) -> bool:
    """Ledger remover."""
    release(entry["token"], Path(entry.get("root") or "/"))
    return True


@contextmanager
def held_for(token: str, root: Path = Path("/")):
    """A claim for a short piece of work outside any lab (doctor's probes), for as long as this
    process lives: a holder killed before it lets go does not keep the modules forever."""
    token = f"{HELD_PREFIX}{token}"
    claim(token, root)
    try:
        yield
    finally:
        release(token, root)


HELD_PREFIX = "held-"


def _reap_dead_holds(directory: Path) -> None:
    """Drop the held_for claims whose process is gone (a lab's claim outlives the process that
    built the lab, and is given back by its cleanup, so only these are tied to a process).
    `claim-doctor-PID` is the name such claims had before they were marked. An empty one was left
    by a process killed while writing it (claims were written in place before they were written
    whole, and only under the lock held here): its process is gone too."""
    for path in [*directory.glob(f"claim-{HELD_PREFIX}*"), *directory.glob("claim-doctor-*")]:
        try:
            text = path.read_text()
            if not text.strip():
                raise ProcessLookupError
            os.kill(int(text), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except (OSError, ValueError):
            continue          # alive (or not ours to judge)
