"""Modules the kernel loads because of labs are unloaded when the last lab is gone.

This machine's kernel has its modules built in, so these tests give labkit.kmodules a root of
their own with a /proc/modules they write, and an rmmod that edits it; the workshop VM test
(scripts/test-workshop) compares the real module list of a Debian 12 VM before and after every lab.
"""

from __future__ import annotations

import json

import os

import pytest

from labkit import kmodules
from labkit.state import LabState


class Kernel:
    """A fake root: /proc/modules as name -> (use count, modules using it)."""

    def __init__(self, root, modules: dict[str, list[str]]):
        self.root = root
        self.modules = dict(modules)
        (root / "proc").mkdir()
        self.write()

    def write(self):
        lines = []
        for name, users in self.modules.items():
            used_by = ",".join(users) + "," if users else "-"
            lines.append(f"{name} 16384 {len(users)} {used_by} Live 0x0")
        (self.root / "proc/modules").write_text("\n".join(lines) + "\n")

    def load(self, name: str, *needs: str):
        self.modules[name] = []
        for need in needs:
            self.modules.setdefault(need, []).append(name)
        self.write()

    def rmmod(self, name: str) -> bool:
        if self.modules.get(name):
            return False
        del self.modules[name]
        for users in self.modules.values():
            if name in users:
                users.remove(name)
        self.write()
        return True


@pytest.fixture
def kernel(tmp_path):
    return Kernel(tmp_path, {"ext4": [], "nf_conntrack": ["xt_conntrack"], "xt_conntrack": []})


def no_links(link_type):
    return False


def test_the_last_claim_unloads_what_labs_made_the_kernel_load_dependencies_last(kernel):
    kmodules.claim("lab-a", kernel.root)
    kernel.load("llc")
    kernel.load("stp", "llc")
    kernel.load("bridge", "stp", "llc")
    kernel.load("br_netfilter", "bridge")
    kernel.load("iptable_nat")
    unloaded = kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=no_links)
    assert set(unloaded) == {"llc", "stp", "bridge", "br_netfilter", "iptable_nat"}
    assert unloaded.index("br_netfilter") < unloaded.index("bridge") < unloaded.index("stp") < unloaded.index("llc")
    assert set(kernel.modules) == {"ext4", "nf_conntrack", "xt_conntrack"}
    assert not (kernel.root / "run/labkit").exists()


def test_modules_there_before_the_first_lab_stay_even_if_unused(kernel):
    kernel.load("veth")
    kmodules.claim("lab-a", kernel.root)
    kernel.load("xt_recent")
    assert kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == ["xt_recent"]
    assert "veth" in kernel.modules and "xt_conntrack" in kernel.modules


def test_nothing_is_unloaded_while_another_lab_holds_a_claim(kernel):
    kmodules.claim("lab-a", kernel.root)
    kernel.load("xt_statistic")
    kmodules.claim("lab-b", kernel.root)
    kernel.load("xt_comment")
    assert kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == []
    assert {"xt_statistic", "xt_comment"} <= set(kernel.modules)
    assert kmodules.release("lab-b", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == ["xt_comment", "xt_statistic"]


def test_used_modules_other_families_and_link_modules_with_links_stay(kernel):
    kmodules.claim("lab-a", kernel.root)
    kernel.load("overlay")                 # not a family labs load
    kernel.load("nf_nat")
    kernel.load("xt_MASQUERADE", "nf_nat")
    kernel.modules["nf_nat"].append("somebody")   # used by something else as well
    kernel.load("veth")
    kernel.write()
    unloaded = kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=lambda kind: kind == "veth")
    assert unloaded == ["xt_MASQUERADE"]
    assert {"overlay", "nf_nat", "veth"} <= set(kernel.modules)


def test_a_lab_build_records_its_claim_first_and_cleanup_gives_it_back(tmp_path):
    """Through the ledger, as `labkit run` and `labkit cleanup` use it (the real root's
    /run/labkit; this kernel has no module support, so nothing is unloaded)."""
    state = LabState("kmodules-test")
    state.ensure_dir()
    env = type("Env", (), {"ledger": state.ledger, "token": "kmodules-test-token"})()
    kmodules.hold(env, tmp_path)
    assert [e["kind"] for e in state.ledger.entries()] == ["kmodules"]
    assert json.loads((tmp_path / "run/labkit/kmodules/baseline.json").read_text()) == sorted(kmodules.loaded(tmp_path))
    assert state.ledger.cleanup() == []
    assert not (tmp_path / "run/labkit").exists()
    assert state.ledger.entries() == []


def test_a_short_hold_whose_process_died_does_not_keep_the_modules(kernel):
    """doctor's claim lives as long as its process: one killed mid-probe is dropped at the next release."""
    import subprocess
    dead = subprocess.Popen(["true"])
    dead.wait()
    kmodules.claim("lab-a", kernel.root)
    kernel.load("xt_recent")
    directory = kernel.root / "run/labkit/kmodules"
    (directory / f"claim-{kmodules.HELD_PREFIX}doctor-{dead.pid}").write_text(str(dead.pid))
    (directory / f"claim-{kmodules.HELD_PREFIX}doctor-{os.getpid()}").write_text(str(os.getpid()))    # alive
    assert kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == []
    assert not (directory / f"claim-{kmodules.HELD_PREFIX}doctor-{dead.pid}").exists()
    (directory / f"claim-{kmodules.HELD_PREFIX}doctor-{os.getpid()}").unlink()
    kmodules.claim("lab-b", kernel.root)
    assert kmodules.release("lab-b", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == ["xt_recent"]


def test_a_short_hold_left_empty_by_a_process_killed_while_writing_it_does_not_keep_the_modules(kernel):
    """A claim is written whole (no empty file while its process lives); an empty held claim, left
    by a process killed mid-write before that, is dropped at the next release like a dead one."""
    kmodules.claim("lab-a", kernel.root)
    kernel.load("xt_recent")
    directory = kernel.root / "run/labkit/kmodules"
    assert (directory / "claim-lab-a").read_text() == str(os.getpid())
    assert sorted(p.name for p in directory.iterdir()) == ["baseline.json", "claim-lab-a", "lock"]
    (directory / f"claim-{kmodules.HELD_PREFIX}doctor-7825").write_text("")
    (directory / f".claim-{kmodules.HELD_PREFIX}doctor-7826.7826").write_text("")     # killed before its rename
    assert kmodules.release("lab-a", kernel.root, rmmod=kernel.rmmod, links_exist=no_links) == ["xt_recent"]
    assert not (kernel.root / "run/labkit").exists()
