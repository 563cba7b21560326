"""Prerequisite checks (`labkit doctor`): each says what it found and how to fix it.

Kernel features are probed in throwaway namespaces (`unshare`), never in the host's own network
or mount namespace, so running the doctor changes nothing on the machine.
"""

from __future__ import annotations

import os
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass

from labkit import cgroups, kmodules
from labkit.apiserver.version import BINARY_MINOR, GIT_VERSION
from labkit.labs import PREREQUISITES

OK, WARN, FAIL, SKIPPED = "ok", "warn", "fail", "skipped"
NOT_PROBED = "not probed (needs root)"
KUBECTL_FIX = ("scripts/setup lab installs kubectl v1.34 (deploy/box-kubectl.txt, locked by hash) where there is none "
               "or only Debian's kubernetes-client; or install kubectl v1.33-v1.35 from pkgs.k8s.io")
# what only root can probe: a throwaway namespace, links, netfilter tables, nfacct counters
SWAPS = "/proc/swaps"
ROOT_PROBES = ("netns", "veth", "bridge", "iptables-legacy", "iptables-extensions", "br_netfilter", "nfacct",
               "mount-namespaces")


@dataclass
class Finding:
    name: str
    status: str
    detail: str
    fix: str = ""


# One throwaway network namespace answers the network questions together; each step prints a marker.
_NET_PROBE = r"""
ip link set lo up
if ip link add lkd-a type veth peer name lkd-b 2>/dev/null; then echo veth=ok; else echo veth=fail; fi
if ip link add lkd-br type bridge 2>/dev/null; then echo bridge=ok; else echo bridge=fail; fi
if iptables-legacy -w -t nat -N LKD-PROBE 2>/dev/null; then echo legacy=ok; else echo legacy=fail; fi
probe() {
  if iptables-legacy -w -t "$1" -A "$2" $3 2>/dev/null; then echo "ext:$4=ok"; else echo "ext:$4=fail"; fi
}
probe nat LKD-PROBE "-m comment --comment probe -j RETURN" comment
probe nat LKD-PROBE "-m statistic --mode random --probability 0.5 -j RETURN" statistic
probe nat LKD-PROBE "-m recent --name LKD --rcheck --seconds 10 --reap -j RETURN" recent
probe nat LKD-PROBE "-m addrtype --dst-type LOCAL -j RETURN" addrtype
probe nat LKD-PROBE "-m mark --mark 0x4000/0x4000 -j RETURN" mark
probe nat LKD-PROBE "-j MARK --or-mark 0x4000" MARK
probe nat POSTROUTING "-j MASQUERADE" MASQUERADE
probe nat LKD-PROBE "-p tcp -j DNAT --to-destination 10.0.0.1:80" DNAT
probe filter INPUT "-m conntrack --ctstate INVALID -j DROP" conntrack
probe filter INPUT "-p tcp -j REJECT" REJECT
"""

EXTENSIONS = ("comment", "statistic", "recent", "addrtype", "mark", "MARK", "MASQUERADE", "DNAT",
              "conntrack", "REJECT")


def _probe_network() -> dict[str, str]:
    if not shutil.which("unshare") or not shutil.which("ip"):
        return {}
    if not shutil.which("iptables-legacy"):
        script = "\n".join(l for l in _NET_PROBE.splitlines() if "iptables" not in l and "probe" not in l)
    else:
        script = _NET_PROBE
    try:
        out = subprocess.run(["unshare", "--net", "sh", "-c", script], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0 and not out.stdout:
        return {"netns": "fail:" + out.stderr.strip()}
    found = {"netns": "ok"}
    for line in out.stdout.split():
        key, _, value = line.partition("=")
        found[key] = value
    return found


def _iptables_variant() -> str:
    if not shutil.which("iptables"):
        return "missing"
    out = subprocess.run(["iptables", "--version"], capture_output=True, text=True)
    text = out.stdout + out.stderr
    return "nft" if "nf_tables" in text else "legacy" if "legacy" in text else "unknown"


def run_checks(names: tuple[str, ...] | None = None) -> list[Finding]:
    """All checks, or just `names` (lab prerequisites). As root, the modules the probes make the
    kernel load are unloaded afterwards unless a lab is up (labkit.kmodules)."""
    if os.geteuid() != 0:
        return _run_checks(names)
    with kmodules.held_for(f"doctor-{os.getpid()}"):
        return _run_checks(names)


def _run_checks(names: tuple[str, ...] | None) -> list[Finding]:
    wanted = set(names) if names else None

    def want(name):
        return wanted is None or name in wanted

    findings: list[Finding] = []
    if want("root"):
        root = os.geteuid() == 0
        findings.append(Finding("root", OK if root else FAIL,
                                "running as root" if root else f"running as uid {os.geteuid()}",
                                "" if root else "run labkit as root: sudo labkit ..."))
    if os.geteuid() != 0:       # say what was not looked at, instead of failing it with false fixes
        findings += [Finding(name, SKIPPED, NOT_PROBED, "run `sudo labkit doctor`") for name in ROOT_PROBES if want(name)]
        wanted = (wanted if wanted is not None else set(PREREQUISITES)) - set(ROOT_PROBES)
    net_names = {"netns", "veth", "bridge", "iptables-legacy", "iptables-extensions"}
    net = _probe_network() if (wanted is None or wanted & net_names) else {}
    if want("netns"):
        ok = net.get("netns") == "ok"
        findings.append(Finding("netns", OK if ok else FAIL,
                                "network namespaces can be created" if ok else f"cannot create a network namespace {net.get('netns', '')}",
                                "" if ok else "needs root and a kernel with CONFIG_NET_NS; in a container, CAP_SYS_ADMIN"))
    for name, fix in (("veth", "kernel module veth (CONFIG_VETH): modprobe veth"),
                      ("bridge", "kernel module bridge (CONFIG_BRIDGE): modprobe bridge")):
        if want(name):
            ok = net.get(name) == "ok"
            findings.append(Finding(name, OK if ok else FAIL, f"{name} links work" if ok else f"cannot create {name} links", "" if ok else fix))
    if want("iptables-legacy"):
        findings.append(_legacy_finding(net))
    if want("iptables-extensions"):
        missing = [e for e in EXTENSIONS if net.get(f"ext:{e}") != "ok"]
        findings.append(Finding(
            "iptables-extensions", FAIL if missing else OK,
            f"missing: {', '.join(missing)}" if missing else "all present: " + ", ".join(EXTENSIONS),
            "install iptables (apt-get install iptables) and a kernel with the xt_* / ipt_* modules kube-proxy uses" if missing else ""))
    if want("br_netfilter"):
        findings.append(_br_netfilter_finding())
    if want("nfacct"):
        findings.append(_nfacct_finding())
    if want("mount-namespaces"):
        ok = shutil.which("unshare") and subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0
        setpriv = shutil.which("setpriv")    # runs commands in a container with its capabilities
        findings.append(Finding("mount-namespaces", OK if ok and setpriv else FAIL,
                                "mount namespaces can be created; setpriv is there" if ok and setpriv else
                                "cannot create a mount namespace" if not ok else "setpriv not found",
                                "" if ok and setpriv else "needs root, util-linux (unshare, setpriv) and CONFIG_NAMESPACES"))
    if want("cgroup-cpuset"):
        found = cgroups.cpuset_hierarchy()
        findings.append(Finding("cgroup-cpuset", OK if found else FAIL, cgroups.hierarchy_description(),
                                "" if found else "mount the cpuset controller (cgroup v1) or enable it in cgroup v2's subtree_control"))
    if want("cgroup-cpu-memory"):
        findings.append(_cpu_memory_finding())
    if want("kubectl"):
        path = shutil.which("kubectl")
        if path:
            out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True)
            findings.append(kubectl_finding(path, out.stdout))
        else:
            findings.append(Finding("kubectl", FAIL, "kubectl not found",
                                    KUBECTL_FIX))
    if want("graphviz"):
        dot = shutil.which("dot")
        findings.append(Finding("graphviz", OK if dot else WARN, f"dot at {dot}" if dot else "Graphviz's dot not found: diagrams only in the terminal",
                                "" if dot else "apt-get install graphviz"))
    if want("conntrack"):
        tool = shutil.which("conntrack")
        findings.append(Finding("conntrack", OK if tool else WARN,
                                f"conntrack at {tool}" if tool else "the conntrack tool not found: no `conntrack -L` in "
                                "the lab's nodes (labkit trace reads their tables without it)",
                                "" if tool else "apt-get install conntrack"))
    if names is None:
        findings.append(_python_finding())
    return findings


def kubectl_finding(path: str, version_json: str) -> Finding:
    """kubectl against the labs' API server: kubectl supports one minor version of skew either way
    (https://kubernetes.io/releases/version-skew-policy/#kubectl), so v1.33 to v1.35 against
    labkit's v1.34; another client still works for most commands, and is worth a warning."""
    try:        # the JSON form is the same from kubectl 1.20 (Debian 12's) to current releases
        info = json.loads(version_json)["clientVersion"]
        version = info["gitVersion"]
    except (ValueError, KeyError, TypeError):
        version = (version_json.strip().splitlines() or ["version unknown"])[0]
        return Finding("kubectl", WARN, f"{path}: client {version}: cannot tell whether it is within one minor "
                       f"version of the labs' API server ({GIT_VERSION})", KUBECTL_FIX)
    try:
        major, minor = int(info["major"]), int(str(info["minor"]).rstrip("+"))
    except (KeyError, TypeError, ValueError):
        major, minor = 0, 0
    if major == 1 and abs(minor - BINARY_MINOR) <= 1:
        return Finding("kubectl", OK, f"{path}: client {version}, within one minor version of the labs' API server "
                       f"({GIT_VERSION})")
    detail = (f"{path}: client {version} is outside kubectl's one-minor skew against the labs' API server "
              f"({GIT_VERSION}): commands may differ or fail")
    if major == 1 and minor < 24:
        detail += " (Debian 12's 1.20 has no `kubectl create token` or `auth whoami`, and crashes in `config set-credentials`)"
    return Finding("kubectl", WARN, detail, KUBECTL_FIX)


def _cpu_memory_finding() -> Finding:
    """The resources lab: cpu (with CFS bandwidth) and memory controllers, both v1 or both v2."""
    cpu, memory = cgroups.hierarchy("cpu"), cgroups.hierarchy("memory")
    fix = ("cgroup v2: the cpu and memory controllers must be listed in the root's cgroup.controllers "
           "(Debian 12 and Ubuntu 24.04 have them); cgroup v1: mount the cpu, cpuacct and memory hierarchies")
    if cpu is None or memory is None:
        missing = " and ".join(n for n, f in (("cpu", cpu), ("memory", memory)) if f is None)
        return Finding("cgroup-cpu-memory", FAIL, f"no cgroup hierarchy offers {missing}", fix)
    if cpu[0] != memory[0]:
        return Finding("cgroup-cpu-memory", FAIL, f"cpu is on cgroup {cpu[0]}, memory on {memory[0]}", fix)
    if cpu[0] == "v1" and not (cpu[1] / "cpu.cfs_quota_us").exists():
        return Finding("cgroup-cpu-memory", FAIL, "the cpu controller has no CFS bandwidth control (cpu.cfs_quota_us)",
                       "a kernel with CONFIG_CFS_BANDWIDTH")
    detail = f"cpu and memory controllers on cgroup {cpu[0]} ({cpu[1]}, {memory[1]})"
    swap_warning, swap_detail = _swap_note(memory)
    detail += "; " + swap_detail
    if swap_warning:
        return Finding("cgroup-cpu-memory", WARN, detail,
                       "boot with swapaccount=1 (cgroup v1) or a kernel with CONFIG_MEMCG_SWAP, or turn swap off (swapoff -a)")
    if not _has_capability(24):   # CAP_SYS_RESOURCE: needed to lower oom_score_adj (Guaranteed: -997)
        return Finding("cgroup-cpu-memory", WARN, detail + "; no CAP_SYS_RESOURCE here: negative oom_score_adj "
                       "values are refused, so Guaranteed containers run with 0 (their log says so)",
                       "run labkit as root outside a restricted container")
    return Finding("cgroup-cpu-memory", OK, detail)


def _swap_note(memory) -> tuple[bool, str]:
    """Swap and the resources lab: kubelet v1.34's default swap behaviour, NoSwap, keeps containers
    from swapping through the memory controller's swap files (v2 memory.swap.max = 0, v1
    memory.memsw.limit_in_bytes = the memory limit; kuberuntime_container_linux.go ConfigureNoSwap,
    only where swapControllerAvailable). (warn, what was found)."""
    active = 0
    try:
        with open(SWAPS) as swaps:
            active = sum(1 for line in swaps.readlines()[1:] if line.strip())
    except OSError:
        pass
    if memory[0] == "v1":
        controller = (memory[1] / "memory.memsw.limit_in_bytes").exists()
    else:
        own = "/"
        try:
            with open("/proc/self/cgroup") as lines:
                own = next((line.split(":", 2)[2].strip() for line in lines if line.startswith("0::")), "/")
        except OSError:
            pass
        controller = (memory[1] / own.lstrip("/") / "memory.swap.max").exists()
    if not active:
        return False, "no swap active: a container at its memory limit is OOM-killed once the kernel cannot reclaim its cache"
    if controller:
        return False, ("swap is active; the swap controller is there, so labkit, as kubelet's default NoSwap, "
                       "keeps containers out of swap: one at its memory limit is OOM-killed, not swapped")
    return True, ("swap is active but the memory controller has no swap files: kubelet (and labkit) cannot keep "
                  "containers out of swap, so a container at its memory limit swaps instead of being OOM-killed "
                  "and the resources lab's oom exercise may find no kill")


def _has_capability(bit: int) -> bool:
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def _legacy_finding(net: dict) -> Finding:
    variant = _iptables_variant()
    if not shutil.which("iptables-legacy"):
        return Finding("iptables-legacy", FAIL, "iptables-legacy not found",
                       "apt-get install iptables (it ships both the legacy and the nft variant)")
    if net.get("legacy") != "ok":
        return Finding("iptables-legacy", FAIL, "iptables-legacy cannot create a chain in a fresh namespace",
                       "the kernel needs ip_tables / iptable_nat / iptable_filter (CONFIG_IP_NF_*)")
    detail = "legacy backend works"
    if variant == "nft":
        detail += ("; note: plain `iptables` on this machine is the nf_tables variant. labkit writes rules "
                   "with the legacy backend (and reads them back with iptables-legacy-save), so in lab hosts use "
                   "`labkit shell`, where `iptables` means iptables-legacy, or call iptables-legacy yourself; "
                   "rules added with iptables-nft land in other tables that labkit does not read")
        return Finding("iptables-legacy", WARN, detail,
                       "nothing to fix for labkit; to make plain `iptables` legacy machine-wide: "
                       "update-alternatives --set iptables /usr/sbin/iptables-legacy")
    return Finding("iptables-legacy", OK, detail + f"; plain `iptables` is the {variant} variant")


def _br_netfilter_finding() -> Finding:
    """Pod bridges must pass traffic to iptables (kube-proxy lab): see labkit.netlab.brnetfilter."""
    from labkit.netlab import brnetfilter

    state, detail = brnetfilter.describe()
    if state == "ok":
        return Finding("br_netfilter", OK, detail)
    if state == "load":
        return Finding("br_netfilter", WARN, detail,
                       "nothing to do; to have it loaded at boot instead: echo br_netfilter > /etc/modules-load.d/k8s.conf")
    if state == "old":
        return Finding("br_netfilter", FAIL, detail, "use a kernel of Linux 5.3 or later (Debian 12, Ubuntu 22.04+)")
    return Finding("br_netfilter", FAIL, detail,
                   "install the kernel's modules (apt-get install linux-modules-extra-$(uname -r) on Ubuntu; "
                   "Debian's linux-image packages include it), then `labkit run kube-proxy` loads it")


# Create an nfacct counter in a throwaway network namespace and use it in a rule, as kube-proxy does.
_NFACCT_PROBE = """
import subprocess, sys
from labkit.netfilter.load import _nfacct_add
problem = _nfacct_add(["labkit_probe"])["labkit_probe"]
if problem:
    print("counter: " + problem); sys.exit(1)
rule = ["iptables-legacy", "-w", "-A", "INPUT", "-m", "nfacct", "--nfacct-name", "labkit_probe", "-j", "ACCEPT"]
out = subprocess.run(rule, capture_output=True, text=True)
if out.returncode:
    print("match: " + (out.stderr or out.stdout).strip()); sys.exit(1)
"""


def _nfacct_finding() -> Finding:
    try:
        out = subprocess.run(["unshare", "--net", sys.executable, "-c", _NFACCT_PROBE],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        out = subprocess.CompletedProcess([], 1, f"probe failed: {exc}", "")
    if out.returncode == 0:
        return Finding("nfacct", OK, "nfacct counters can be created and matched (-m nfacct)")
    reason = (out.stdout or out.stderr).strip().splitlines()[-1:] or ["unknown"]
    return Finding("nfacct", WARN, f"nfacct counters do not work here ({reason[0]}): kube-proxy, and the lab, then "
                   "write the INVALID-drop and localhost NodePort rules without -m nfacct",
                   "optional; the kernel needs nfnetlink_acct and xt_nfacct (modprobe xt_nfacct)")


def _python_finding() -> Finding:
    missing = []
    for module in ("pyroute2", "kubernetes", "yaml", "typer", "cryptography.x509"):
        try:
            __import__(module)
        except Exception as exc:  # a broken install can raise more than ImportError
            missing.append(f"{module} ({type(exc).__name__}: {exc})")
    # CEL (ValidatingAdmissionPolicy) takes seconds to import: found is enough here
    import importlib.util
    if importlib.util.find_spec("celpy") is None:
        missing.append("celpy (cel-python is not installed)")
    if missing:
        return Finding("python-packages", FAIL, "cannot import " + "; ".join(missing),
                       "reinstall labkit with its dependencies: scripts/setup in a checkout, or pip install its wheel")
    return Finding("python-packages", OK, "pyroute2, kubernetes, PyYAML, typer, cryptography import; "
                   "cel-python is installed")


def failures(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status == FAIL]
