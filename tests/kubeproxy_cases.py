"""Reading the kube-proxy fidelity cases: the shared ones (fidelity/kube-proxy/*.yaml, format in
its README) and labkit's own in tests/fidelity/kube-proxy/ (same format).

The cases come from kube-proxy's own unit tests (pkg/proxy/iptables/proxier_test.go); their
`proxier_config` describes the fake proxier those tests build (NewFakeProxier plus per-test
overrides), which maps field by field onto a ProxierConfig.
"""

from __future__ import annotations

import copy
import functools
import re
from contextlib import contextmanager
from pathlib import Path

import yaml

from labkit.kubeproxy import ProxierConfig, jump_rules
from labkit.netfilter import parse
from support import shared_fidelity

REPO = Path(__file__).resolve().parent.parent


def fidelity_dir() -> Path | None:
    return shared_fidelity("kube-proxy")


# labkit's own cases, in the same format, ported from the same upstream test file.
OWN_CASES = REPO / "tests" / "fidelity" / "kube-proxy"


def case_files() -> list[Path]:
    """The shared cases (when present) followed by labkit's own (tests/fidelity/kube-proxy)."""
    d = fidelity_dir()
    shared = sorted(d.glob("*.yaml")) if d else []
    return shared + sorted(OWN_CASES.glob("*.yaml"))


def load_case(path: Path) -> dict:
    """The case's data (a copy of its own: a test may change it). Each file is parsed once per
    process, with libyaml's parser when PyYAML has it (the same safe constructors; collection reads
    every case three times)."""
    return copy.deepcopy(_parsed(Path(path)))


@functools.cache
def _parsed(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def proxier_config(pc: dict) -> ProxierConfig:
    """The fake proxier of the case as a ProxierConfig."""
    detector = pc.get("localDetector") or {"mode": "None"}
    interfaces = pc.get("nodeInterfaces") or {}
    counters = pc.get("nfacctCounters") or {}
    return ProxierConfig(
        hostname=pc.get("nodeName", ""),
        node_ips=[pc["nodeIP"]] if pc.get("nodeIP") else [],
        ip_family=pc.get("ipFamily", "IPv4"),
        detect_local_mode=detector.get("mode", "None"),
        cluster_cidr=detector.get("clusterCIDR", ""),
        pod_cidr=detector.get("podCIDR", ""),
        bridge_interface=detector.get("bridgeInterface", ""),
        interface_name_prefix=detector.get("interfaceNamePrefix", ""),
        masquerade_bit=pc.get("masqueradeBit", 14),
        masquerade_mark=pc.get("masqueradeMark"),
        masquerade_all=pc.get("masqueradeAll", False),
        localhost_nodeports=pc.get("localhostNodePorts", True),
        nodeport_addresses=list(pc.get("nodePortAddresses") or []),
        local_addresses=[a for addrs in interfaces.values() for a in addrs],
        random_fully=pc.get("iptablesHasRandomFully", False),
        nfacct_counters=[name for name, present in counters.items() if present],
        conntrack_tcp_be_liberal=pc.get("conntrackTCPLiberal", False),
        large_cluster_endpoints_threshold=pc.get("largeClusterEndpointsThreshold", 1000),
    )


def with_jump_rules(text: str):
    """The fake iptables after a full sync: the restore input plus kube-proxy's EnsureRule jumps."""
    ruleset = parse(text)
    for table, chain, args in jump_rules():
        ruleset.ensure_rule_first(table, chain, args)
    return ruleset


@contextmanager
def lab_namespace(host: str = "node"):
    """A network namespace made and removed with labkit's own mechanism (recorded in a ledger)."""
    from types import SimpleNamespace

    from labkit.netlab import create_netns
    from labkit.state import LabEnv, LabState

    env = LabEnv(SimpleNamespace(id="kprules"), LabState("kprules"))
    env.state.ensure_dir()
    try:
        yield create_netns(env, host)
    finally:
        env.ledger.cleanup()


def check_rule_jumps(text: str) -> list[str]:
    """checkIPTablesRuleJumps of proxier_test.go: every chain used is created, every chain jumped
    to has rules, every chain created is used (kube-proxy's top-level chains excepted)."""
    problems = []
    for table_text in text.split("COMMIT\n"):
        lines = table_text.strip("\n").split("\n")
        if not lines or not lines[0].startswith("*"):
            continue
        name = lines[0][1:]
        created = {m.group(1) for l in lines if (m := re.match(r"^:([^ ]*)", l))}
        created -= {m.group(1) for l in lines if (m := re.search(r"-X ([^ ]*)", l))}
        filled = {m.group(1) for l in lines if (m := re.search(r"-A ([^ ]*)", l))}
        jumped = {m.group(1) for l in lines for m in re.finditer(r"-j ([^ ]*)", l)}
        jumped -= {"ACCEPT", "REJECT", "DROP", "MARK", "RETURN", "DNAT", "SNAT", "MASQUERADE"}
        missing = (jumped - created) | (filled - created)
        if missing:
            problems.append(f"chains in {name} used but not created: {sorted(missing)}")
        empty = jumped - filled - {"KUBE-NODEPORTS"}
        if empty:
            problems.append(f"chains in {name} jumped to but without rules: {sorted(empty)}")
        extra = created - jumped - {"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING",
                                    "KUBE-FORWARD", "KUBE-MARK-MASQ", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"}
        if extra:
            problems.append(f"chains in {name} created but not used: {sorted(extra)}")
    return problems
