"""br_netfilter: bridged traffic through iptables, switched on only inside lab namespaces.

A Kubernetes node whose pods hang off a Linux bridge (the CNI bridge plugin, kubeadm's
prerequisites) needs the br_netfilter module and `net.bridge.bridge-nf-call-iptables=1`: without
it, a packet from a pod to a Service whose chosen endpoint sits on the same bridge is bridged
straight to that pod's MAC address and never meets kube-proxy's DNAT in nat PREROUTING, or its
reply skips the conntrack entry that would undo the DNAT; connections time out.

Since Linux 5.3 the `net.bridge.bridge-nf-call-*` sysctls exist per network namespace (each new
namespace starts with them at 1), so a lab sets them in its own nodes and nowhere else. On kernels
before 5.3 they are global; labkit then refuses rather than change the host.

Stock Debian 12 and Ubuntu do not load the module. When a lab needs it and it is missing,
`ensure(env)` records a `kmodule` entry in the lab's ledger first, loads it (modprobe
br_netfilter) and sets the root namespace's three sysctls to 0: loading the module turns them on
in every namespace, the host's included, and before the module was there, bridged traffic on the
host bypassed iptables. A marker under /run/labkit remembers that labkit loaded it; each lab
instance relying on that load keeps a claim there. Cleanup drops the instance's claim and, when no
claim is left and nothing else holds the module, unloads it (its sysctls go with it).

Paths are parameters (`root`) so the logic can be tested on a machine where the module is built in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MODULE = "br_netfilter"
SYSCTLS = ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables")
NODE_SYSCTLS = ("net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1")


@dataclass(frozen=True)
class Host:
    """Where the kernel shows the module and its sysctls; "/" on a real machine."""
    root: Path = Path("/")

    @property
    def sysctl_dir(self) -> Path:
        return self.root / "proc/sys/net/bridge"

    @property
    def module_dir(self) -> Path:
        return self.root / "sys/module" / MODULE

    @property
    def claims(self) -> Path:
        return self.root / "run/labkit/br_netfilter"

    @property
    def marker(self) -> Path:
        return self.claims / "loaded-by-labkit.json"


def present(host: Host = Host()) -> bool:
    """The module is loaded or built in: its sysctls exist (in the namespace this process is in)."""
    return (host.sysctl_dir / SYSCTLS[0]).exists()


def per_namespace() -> bool | None:
    """Whether a fresh network namespace gets its own bridge-nf-call-* sysctls (Linux >= 5.3).
    None when the module is not there to ask."""
    if not present():
        return None
    probe = subprocess.run(["unshare", "--net", "test", "-e", f"/proc/sys/net/bridge/{SYSCTLS[0]}"],
                           capture_output=True)
    return probe.returncode == 0


def loadable() -> bool:
    """`modprobe -n br_netfilter` finds the module (it is in /lib/modules of the running kernel)."""
    if not shutil.which("modprobe"):
        return False
    return subprocess.run(["modprobe", "-n", MODULE], capture_output=True).returncode == 0


def describe() -> tuple[str, str]:
    """(state, text) for `labkit doctor`: state is ok, load (labkit loads it), old (kernel < 5.3)
    or missing."""
    if present():
        if per_namespace():
            return "ok", (f"{MODULE} is active and bridge-nf-call-iptables is per network namespace: "
                          "the kube-proxy lab sets it to 1 in its nodes only")
        return "old", (f"{MODULE} is active but its sysctls are global (Linux before 5.3): setting them "
                       "for the lab's nodes would change the host")
    if loadable():
        return "load", (f"{MODULE} is not loaded: `labkit run kube-proxy` loads it (modprobe {MODULE}), keeps "
                        "the host's bridged traffic out of iptables (root namespace sysctls set to 0), and "
                        "unloads it at cleanup")
    return "missing", f"{MODULE} is neither loaded nor installed for kernel {os.uname().release}"


# -- loading and unloading, recorded ---------------------------------------------------------------


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True)


def _claim(host: Host, token: str) -> Path:
    return host.claims / token.replace("/", "_")


def ensure(env, host: Host = Host(), run=_run) -> bool:
    """Make the module's sysctls available to the lab's namespaces; True if the lab relies on a
    load labkit made (and recorded). Raises RuntimeError when that is impossible."""
    if present(host) and not host.marker.exists():
        return False                      # there before labkit: nothing to record or undo
    env.ledger.record("kmodule", name=MODULE, token=env.token, root=str(host.root))
    host.claims.mkdir(parents=True, exist_ok=True)
    _claim(host, env.token).write_text(str(os.getpid()))
    if present(host):
        return True                       # loaded by labkit for another lab instance
    host.marker.write_text(json.dumps({"module": MODULE, "loaded_by": env.token}))
    result = run(["modprobe", MODULE])
    if result.returncode != 0 or not present(host):
        raise RuntimeError(f"modprobe {MODULE} failed: {(result.stderr or result.stdout).strip() or 'no sysctls appeared'}"
                           "; see `labkit doctor`")
    # Loading switched bridged traffic into iptables in every namespace, the host's too: undo that
    # for the host (the lab's nodes set their own values).
    for name in SYSCTLS:
        path = host.sysctl_dir / name
        if path.exists():
            path.write_text("0\n")
    return True


def _in_use(host: Host) -> bool:
    refcnt = host.module_dir / "refcnt"
    holders = host.module_dir / "holders"
    try:
        if int(refcnt.read_text().strip() or 0) > 0:
            return True
    except (OSError, ValueError):
        pass
    return holders.is_dir() and any(holders.iterdir())


def remove_recorded(entry: dict, run=_run) -> bool:
    """Ledger remover: drop this lab's claim; unload the module when labkit loaded it, no other
    lab instance claims it and nothing else holds it."""
    host = Host(Path(entry.get("root") or "/"))
    claim = _claim(host, entry["token"])
    if not claim.exists():
        return False
    claim.unlink()
    others = [p for p in host.claims.iterdir() if p != host.marker] if host.claims.is_dir() else []
    if others or not host.marker.exists():
        return True
    if present(host) and not _in_use(host):
        result = run(["modprobe", "-r", MODULE])
        if result.returncode != 0:
            raise RuntimeError(f"modprobe -r {MODULE}: {(result.stderr or result.stdout).strip()}")
    host.marker.unlink(missing_ok=True)
    for directory in (host.claims, host.claims.parent):     # /run/labkit is labkit's own
        try:
            directory.rmdir()
        except OSError:
            break
    return True
