"""The host comparison of the cleanup and crash tests (support.diff_snapshots) while other labkit
instances run on the machine: what another live instance changes is left out and named, what
this instance leaves behind still fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import A_TEST, diff_snapshots, other_instances

HERE = Path(__file__).resolve().parent

MOUNTS = ("22 27 0:21 / /proc rw,relatime - proc proc rw\n"
          "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n")
RUN_NETNS = "45 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw\n"


def nsfs(mount_id: int, name: str) -> str:
    return f"{mount_id} 45 0:4 net:[40265{mount_id}] /run/netns/{name} rw shared:{mount_id} - nsfs nsfs rw\n"


def snapshot(mountinfo: str, others: dict | None = None, run_labkit: bool = False) -> dict:
    return {"mountinfo": mountinfo, "netns": [], "run-labkit": run_labkit, "processes": [],
            "_others": others or {}}


def test_another_instances_namespaces_and_the_run_netns_mount_they_hold_are_left_out_and_named():
    before = snapshot(MOUNTS)
    after = snapshot(MOUNTS + RUN_NETNS + nsfs(46, "na-kube-proxy-lan") + nsfs(47, "na-kube-proxy-node1"),
                     others={"na": ["kube-proxy"]}, run_labkit=True)
    with pytest.warns(UserWarning, match=r"na \(kube-proxy\)") as warned:
        assert diff_snapshots(before, after) == []
    message = str(warned[0].message)
    assert "/run/netns/na-kube-proxy-lan" in message and "run-labkit" in message
    # and the other way round: it was there before, and went away meanwhile
    with pytest.warns(UserWarning, match=r"na \(kube-proxy\)"):
        assert diff_snapshots(after, before) == []


def test_the_run_netns_directory_another_instance_makes_is_left_out_and_named():
    """`ip netns add` of another instance makes /run/netns (absent before, empty of this
    instance's namespaces after); with no other instance live, or with a namespace of this
    instance in it, it still fails."""
    before, after = {**snapshot(MOUNTS), "netns": None}, snapshot(MOUNTS, others={"lkdb": ["kube-proxy"]})
    with pytest.warns(UserWarning, match=r"/run/netns made \(instances live: lkdb \(kube-proxy\)\)"):
        assert diff_snapshots(before, after) == []
    with pytest.warns(UserWarning, match=r"/run/netns removed"):
        assert diff_snapshots(after, before) == []
    assert [p.split(" ")[0] for p in diff_snapshots(before, snapshot(MOUNTS))] == ["netns"]
    leaked = {**snapshot(MOUNTS, others={"lkdb": ["kube-proxy"]}), "netns": ["t1-demo-a"]}
    assert [p.split(" ")[0] for p in diff_snapshots(before, leaked)] == ["netns"]


def test_what_no_live_instance_explains_still_fails():
    before = snapshot(MOUNTS)
    # a namespace of this instance (prefix t1) left behind, with the /run/netns mount
    leaked = snapshot(MOUNTS + RUN_NETNS + nsfs(46, "t1-demo-a"), run_labkit=True)
    problems = diff_snapshots(before, leaked)
    assert [p.split(" ")[0] for p in problems] == ["mountinfo", "run-labkit"]
    assert "/run/netns/t1-demo-a" in problems[0]
    # the same leak while another instance runs: only the other instance's part is left out
    with pytest.warns(UserWarning, match=r"nb \(gc\)"):
        problems = diff_snapshots(before, snapshot(MOUNTS + RUN_NETNS + nsfs(46, "t1-demo-a") + nsfs(47, "nb-gc-node"),
                                                   others={"nb": ["gc"]}, run_labkit=True))
    assert [p.split(" ")[0] for p in problems] == ["mountinfo"]
    assert "/run/netns/t1-demo-a" in problems[0] and "nb-gc-node" not in problems[0]
    # a namespace that only looks like another instance's: its prefix is live, its lab is not
    problems = diff_snapshots(before, snapshot(MOUNTS + nsfs(46, "nb-demo-a"), others={"nb": ["gc"]}))
    assert problems and "/run/netns/nb-demo-a" in problems[0]
    # any other mount is compared exactly, whoever runs
    problems = diff_snapshots(before, snapshot(MOUNTS + "60 27 0:50 / /mnt/x rw - tmpfs tmpfs rw\n",
                                               others={"na": ["kube-proxy"]}))
    assert problems and "/mnt/x" in problems[0]


def test_other_instances_are_found_from_their_processes():
    """A process another instance started (LABKIT_OWNER=<prefix>:<lab>:<token>, labkit/procs.py)
    names its prefix and lab; this instance's own processes do not count."""
    mine = os.environ["LABKIT_PREFIX"]
    code = "import sys; sys.stdin.read()"
    theirs = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              env={**os.environ, "LABKIT_OWNER": "zq9:gc:0123456789ab"})
    own = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                           env={**os.environ, "LABKIT_OWNER": f"{mine}:demo:0123456789ab"})
    try:
        found = other_instances(mine)
        assert "gc" in found.get("zq9", [])
        assert mine not in found
    finally:
        for proc in (theirs, own):
            proc.communicate("")
    assert "zq9" not in other_instances(mine)


def test_a_test_processs_namespaces_are_left_out_whatever_their_lab():
    """A test that makes network namespaces with labkit's own code without building a lab
    (tests/kubeproxy_cases.py lab_namespace: no claim, no process) is known by the prefixes its
    test process registered, while that process lives; once it has ended, a namespace of that
    prefix fails again."""
    other = "tq" + os.urandom(2).hex()
    mine = os.environ["LABKIT_PREFIX"]
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import support; support.register_instance({other!r}); " \
           "print('registered', flush=True); sys.stdin.read()"
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    before = snapshot(MOUNTS)
    try:
        assert process.stdout.readline().strip() == "registered"
        live = other_instances(mine)
        assert live.get(other) == [A_TEST]
        after = snapshot(MOUNTS + RUN_NETNS + nsfs(46, f"{other}-kprules-node"), others=live, run_labkit=True)
        with pytest.warns(UserWarning, match=rf"{other} \(\(a test\)\)"):
            assert diff_snapshots(before, after) == []
        # this instance's own namespace beside it still fails
        leaked = snapshot(MOUNTS + RUN_NETNS + nsfs(46, f"{other}-kprules-node") + nsfs(47, f"{mine}-demo-a"),
                          others=live)
        problems = diff_snapshots(before, leaked)
        assert [p.split(" ")[0] for p in problems] == ["mountinfo"] and f"{mine}-demo-a" in problems[0]
    finally:
        process.communicate("")
    assert other not in other_instances(mine)
    assert diff_snapshots(before, snapshot(MOUNTS + nsfs(46, f"{other}-kprules-node")))
