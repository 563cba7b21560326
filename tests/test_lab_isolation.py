"""Every lab up at the same time: each works (its checks run, a solved exercise passes), none
sees another's resources, and none opens a path to the host's root network namespace.

Generic over the labs under labs/: a lab added there is covered without changing this file.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support import REPO, labkit
from labkit.labs import discover

LABS = sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")


def ledger(lab: str) -> list[dict]:
    path = Path(os.environ["LABKIT_STATE_DIR"]) / lab / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def root_network() -> dict[str, str]:
    """What the root network namespace offers: its links, addresses, routes, rules, neighbours
    and iptables (a lab that reached into it would change one of them)."""
    def run(*argv):
        return subprocess.run(argv, capture_output=True, text=True).stdout
    return {
        "links": run("ip", "-o", "link", "show"),
        "addresses": run("ip", "-o", "address", "show"),
        "routes": run("ip", "route", "show", "table", "all"),
        "routes6": run("ip", "-6", "route", "show", "table", "all"),
        "rules": run("ip", "rule", "show"),
        "iptables": "\n".join(l for l in run("iptables-legacy-save").splitlines() if not l.startswith("#")),
        "iptables-nft": "\n".join(l for l in run("iptables-nft-save").splitlines() if not l.startswith("#")),
    }


def netns_ids(netns: str) -> dict[int, str]:
    """nsid -> name of the named namespaces that `netns` has ids for."""
    out = subprocess.run(["ip", "-n", netns, "netns", "list-id"], capture_output=True, text=True, check=True).stdout
    ids = {}
    for line in out.splitlines():
        parts = line.split()
        if parts[:1] == ["nsid"]:
            ids[int(parts[1])] = parts[-1].rstrip(")") if "name:" in line else "(unnamed)"
    return ids


@pytest.mark.host_compared
def test_all_labs_up_together_work_and_stay_apart(host_unchanged):
    assert {"kube-proxy", "mount-propagation", "numa"} <= set(LABS)
    prefix = os.environ["LABKIT_PREFIX"]
    root_before = root_network()
    try:
        # built side by side, as a student with several terminals may (each lab has its own lock)
        with ThreadPoolExecutor(max_workers=len(LABS)) as pool:
            list(pool.map(lambda lab: labkit("run", lab, check=0, timeout=300), LABS))

        # nothing of any lab reaches the root network namespace while they all run
        root_during = root_network()
        changed = [key for key in root_before if root_before[key] != root_during[key]]
        assert changed == [], f"the labs changed the root network namespace: {changed}"

        veths = 0
        namespaces = {lab: [e["name"] for e in ledger(lab) if e["kind"] == "netns"] for lab in LABS}
        for lab, names in namespaces.items():
            assert all(n.startswith(f"{prefix}-{lab}-") for n in names), (lab, names)
            for netns in names:
                ids = netns_ids(netns)
                links = json.loads(subprocess.run(["ip", "-n", netns, "-j", "link", "show"], capture_output=True,
                                                  text=True, check=True).stdout)
                for link in links:
                    if "link_netnsid" not in link:
                        continue
                    peer = ids.get(link["link_netnsid"], "(root or unnamed)")
                    veths += 1
                    # every veth leads to another namespace of the same lab: never to the root
                    # namespace, never to another lab's
                    assert peer.startswith(f"{prefix}-{lab}-"), f"{netns}: {link['ifname']} leads to {peer}"
        assert veths > 0, "no lab has veth pairs: the check above checked nothing"

        # a lab's processes live in the root namespace or in that lab's own namespaces
        from labkit.procs import find
        root_net = os.stat("/proc/self/ns/net").st_ino
        own = {lab: {os.stat(f"/run/netns/{n}").st_ino for n in names} for lab, names in namespaces.items()}
        processes = 0
        for lab in LABS:
            for entry in ledger(lab):
                if entry["kind"] != "process":
                    continue
                for pid in find(entry["token"]):
                    try:
                        net = os.stat(f"/proc/{pid}/ns/net").st_ino
                    except FileNotFoundError:
                        continue
                    processes += 1
                    assert net in own[lab] | {root_net}, f"{lab}: process {pid} is in another lab's network namespace"
        assert processes > 0
        for lab in LABS:
            for entry in ledger(lab):
                if entry["kind"] == "cgroup":
                    assert f"labkit-{prefix}-{lab}" in entry["path"], (lab, entry)

        # a lab's state (ledger, logs, kubeconfigs, answers it copied) is private to root: the
        # directory admits nobody else, and no kubeconfig or ledger is readable by others anyway
        state_root = Path(os.environ["LABKIT_STATE_DIR"])
        for lab in LABS:
            assert (state_root / lab).stat().st_mode & 0o077 == 0, f"{lab}'s state directory is open to others"
            for path in (state_root / lab).rglob("*"):
                if path.name in ("kubeconfig", "ledger.jsonl", "status.json", "progress.json") and path.is_file():
                    assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"

        # each lab works next to the others: every check runs, and a solved exercise passes (the
        # labs checked and solved at the same time)
        def works(lab):
            report = json.loads(labkit("check", lab, "-o", "json", timeout=300).stdout)
            statuses = {r["exercise"]: r["status"] for r in report["results"]}
            assert "error" not in statuses.values(), (lab, report["results"])
            first = sorted((REPO / "labs" / lab / "solutions").glob("*.py"))[0].stem
            labkit("solve", lab, first, check=0, timeout=300)
            labkit("check", lab, first, check=0, timeout=300)
        with ThreadPoolExecutor(max_workers=len(LABS)) as pool:
            list(pool.map(works, LABS))
    finally:
        labkit("cleanup", "--all", check=0)
