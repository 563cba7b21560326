"""Every kube-proxy fidelity case (shared fidelity/kube-proxy/ and tests/fidelity/kube-proxy/, both
from kube-proxy's own unit tests).

Per case: the rendered iptables-restore text after kube-proxy's canonical sort
(`sortIPTablesRules`) equals the expected text exactly; single-chain expectations; the
consistency check of the upstream test (checkIPTablesRuleJumps); packet flows through
labkit's tracer (kube-proxy's test-tracer summary and masquerade flag); probabilities.

Multi-step cases (kube-proxy's TestSyncProxyRulesRepeated and the like) run against a real lab
network namespace with iptables-legacy-restore, step by step, as kube-proxy's sync loop would:
the first sync and any sync after a failed restore are full, the others partial (only the
SVC/SVL/EXT/FW/SEP chains of changed services are written; kube-proxy relies on --noflush to
keep the others). Stale chains are found in the namespace's live nat table, as kube-proxy finds
them with iptables-save. Each step's text is compared exactly where the case gives one; the
case's step assertions (a chain still exists, a full sync is needed, a partial restore failed)
and rule counts are checked against the kernel's tables; the "sync" kind of each step (full or
partial) must agree with labkit's own reckoning. An injected rule (the case quotes it in its
description) goes into the real table, so a partial restore that deletes a still-referenced
chain really fails in iptables-restore, and the next full sync really repairs it. A step with
`force_full_sync: true` is kube-proxy's forceSyncProxyRules.

`sep_dnat` (a case's or a step's) is the test file's countEndpointsAndComments: how many
"-A KUBE-SEP-... -j DNAT" lines the restore text holds, how many carry a comment (large-cluster
mode leaves them off), and the last one containing `match`. `metrics` (a case's or a step's)
are the gauges kube-proxy sets at the end of the sync (render(metrics=...)). A step's
`stale_chain_cleanup_due: false` says less than syncPeriod has passed since the last stale-chain
cleanup (which matters only in large-cluster mode); `restore_contains` / `restore_lacks` list
fragments the step's restore text must hold or must not. Step `assert` entries may also state
these checks the way the Go tests do (DNAT-rule and comment counts, a line of the text, text the
restore input contains or does not contain); see check_restore_assertion.
"""

from __future__ import annotations

import re

import pytest

from kubeproxy_cases import case_files, check_rule_jumps, lab_namespace, load_case, proxier_config, with_jump_rules
from labkit.kubeproxy import changed_services, large_cluster_mode, load_objects, probability, render, sort_rules
from labkit.kubeproxy.canonical import chain_rules
from labkit.kubeproxy.objects import build_state
from labkit.kubeproxy.sync import ensure_jump_rules, sync_node
from labkit.netfilter import Packet, Tracer, load
from labkit.netfilter.live import read_live

CASES = case_files()
if not CASES:
    pytest.skip("no kube-proxy fidelity cases (shared/fidelity/kube-proxy beside the repository, "
                "LABKIT_FIDELITY_DIR, or tests/fidelity/kube-proxy)", allow_module_level=True)


def check_packet_flows(ruleset, pc: dict, flows: list[dict]) -> list[str]:
    problems = []
    tracer = Tracer(ruleset, pc.get("tracerLocalIPs") or [])
    for flow in flows:
        result = tracer.trace(Packet(flow["sourceIP"], flow["destIP"], int(flow["destPort"]),
                                     (flow.get("protocol") or "TCP").lower()))
        if result.output != flow["output"] or result.test_tracer_masq != flow["masq"]:
            problems.append(f"{flow['name']}: expected output={flow['output']!r} masq={flow['masq']}, "
                            f"got output={result.output!r} masq={result.test_tracer_masq}")
    return problems


def check_sep_dnat(text: str, want: dict) -> list[str]:
    """countEndpointsAndComments of proxier_test.go: the "-A KUBE-SEP-... -j DNAT" lines of the
    restore text, how many carry a comment (large-cluster mode leaves them off), and the one
    naming `match`."""
    lines = [l for l in text.split("\n") if l.startswith("-A KUBE-SEP-") and "-j DNAT" in l]
    got = {"count": len(lines), "with_comment": sum("--comment" in l for l in lines),
           "line": next((l for l in reversed(lines) if want.get("match", "\0") in l), "")}
    return [f"sep_dnat {key}: expected {want[key]!r}, got {got[key]!r}" for key in got if key in want and want[key] != got[key]]


def _metric_norm(name: str) -> str:
    """kubeproxy_sync_proxy_rules_no_local_endpoints_total, SyncProxyRulesNoLocalEndpointsTotal
    and sync_proxy_rules_no_local_endpoints_total name the same gauge."""
    norm = re.sub(r"[^a-z]", "", name.lower())
    return norm[len("kubeproxy"):] if norm.startswith("kubeproxy") else norm


def check_metrics(text: str, got: dict, want: dict) -> list[str]:
    """The gauges of the sync against the case's `metrics`: each given value must match. The
    value "rules in text" stands for countRules of proxier_test.go (the table's "-A" lines in the
    restore text), as TestProxierMetricsIPTablesTotalRules compares."""
    problems = []
    by_norm = {_metric_norm(k): v for k, v in got.items()}
    for name, labels in want.items():
        got_labels = by_norm.get(_metric_norm(name)) or {}
        for label, value in labels.items():
            if value == "rules in text":
                body = text.split(f"*{label}\n", 1)[1].split("COMMIT\n", 1)[0]
                value = sum(1 for line in body.split("\n") if line.startswith("-A "))
            if got_labels.get(label) != value:
                problems.append(f"{name}{{{label}}}: expected {value!r}, got {got_labels.get(label)!r}")
    return problems


def check_restore_assertion(key: str, value, text: str) -> str | None:
    """A step assertion about the restore text, as the Go tests state them (countEndpointsAndComments
    counts and lines, assert.Contains / NotContains): "" when it holds, a problem when it does not,
    None when the key is not one of these."""
    norm = re.sub(r"[^a-z]", "", key.lower())
    lines = [l for l in text.split("\n") if l.startswith("-A KUBE-SEP-") and "-j DNAT" in l]
    if isinstance(value, int) and not isinstance(value, bool) and "endpoint" in norm and "comment" not in norm:
        return "" if len(lines) == value else f"{key}: expected {value} DNAT rules, got {len(lines)}"
    if isinstance(value, int) and not isinstance(value, bool) and "comment" in norm:
        got = sum("--comment" in l for l in lines)
        return "" if got == value else f"{key}: expected {value} commented DNAT rules, got {got}"
    if isinstance(value, (str, list)) and ("notcontain" in norm or "lacks" in norm or "absent" in norm):
        missing = [f for f in ([value] if isinstance(value, str) else value) if f in text]
        return "" if not missing else f"{key}: {missing} in the restore text"
    if isinstance(value, (str, list)) and "contain" in norm:
        missing = [f for f in ([value] if isinstance(value, str) else value) if f not in text]
        return "" if not missing else f"{key}: {missing} not in the restore text"
    if isinstance(value, str) and value.startswith("-A ") and ("line" in norm or "endpoint" in norm):
        return "" if value in text.split("\n") else f"{key}: {value!r} is not a line of the restore text"
    return None


SINGLE_CASES = [p for p in CASES if not load_case(p).get("steps")]


@pytest.mark.parametrize("path", SINGLE_CASES, ids=[p.stem for p in SINGLE_CASES])
def test_fidelity_case(path):
    case = load_case(path)
    expected = case.get("expected") or {}
    if case.get("kind") == "unit":
        table = expected.get("computeProbability") or {}
        assert table, "a unit case without computeProbability expectations is not understood"
        assert {int(n): probability(int(n)) for n in table} == {int(n): v for n, v in table.items()}
        values = [float(probability(n)) for n in range(100000, 1, -1)]
        assert all(a < b for a, b in zip(values, values[1:])), "probabilities must rise strictly as n falls"
        return
    pc = case.get("proxier_config") or {}
    if case.get("kind") == "tracer-only":
        from labkit.netfilter import parse
        problems = check_packet_flows(parse(case["input_rules"]), pc, case.get("packet_flow") or [])
        assert not problems, "\n".join(problems)
        return
    config = proxier_config(pc)
    metrics: dict = {}
    text = render(load_objects(case.get("objects") or [], origin=path.name), config, metrics=metrics)
    checked = 0
    want_metrics = dict(expected.get("metrics") or {})
    # TestNoEndpointsMetric's own field names (expectedSyncProxyRulesNoLocalEndpointsTotalInternal, ...)
    for field, value in expected.items():
        norm = field.lower()
        if "nolocalendpoints" in re.sub(r"[^a-z]", "", norm) and isinstance(value, int):
            label = "internal" if "internal" in norm else "external" if "external" in norm else None
            if label:
                want_metrics.setdefault("sync_proxy_rules_no_local_endpoints_total", {})[label] = value
    if want_metrics:
        assert check_metrics(text, metrics, want_metrics) == []
        checked += 1
    if expected.get("iptables_restore"):
        assert sort_rules(text) == expected["iptables_restore"]
        checked += 1
    if expected.get("check_consistency"):
        assert check_rule_jumps(text) == []
    for chain in expected.get("chains") or []:
        assert chain_rules(text, chain["table"], chain["chain"]) == (chain["rules"] or ""), f"{chain['table']} {chain['chain']}"
        checked += 1
    if expected.get("sep_dnat"):
        assert check_sep_dnat(text, expected["sep_dnat"]) == []
        checked += 1
    flows = case.get("packet_flow") or []
    if flows:
        problems = check_packet_flows(with_jump_rules(text), pc, flows)
        assert not problems, "\n".join(problems)
        checked += len(flows)
    assert checked, "the case has no expectation this test understands"


def _upsert(objects: list[dict], new: list[dict]) -> list[dict]:
    key = lambda o: (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
    replaced = {key(o): o for o in new}
    kept = [o for o in objects if key(o) not in replaced]
    return kept + new


def _remove(objects: list[dict], gone: list[dict]) -> list[dict]:
    keys = {(o["kind"], (o.get("metadata") or {}).get("namespace") or "default", o["metadata"]["name"]) for o in gone}
    return [o for o in objects if (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) not in keys]


def _nat_rule_count(netns: str) -> int:
    """Rules in the namespace's nat table, not counting the jumps from built-in chains."""
    builtin = ("-A PREROUTING ", "-A INPUT ", "-A OUTPUT ", "-A POSTROUTING ")
    return sum(1 for l in load.save(netns, "nat").splitlines() if l.startswith("-A ") and not l.startswith(builtin))


def _cleanup_due(step: dict) -> bool:
    """Whether syncPeriod has passed since the last stale-chain cleanup: the step's
    stale_chain_cleanup_due, or what its text says the Go test did to fp.lastIPTablesCleanup
    ("= time.Now()": not due; "= time.Now().Add(-fp.syncPeriod)...": due). Due by default."""
    if "stale_chain_cleanup_due" in step:
        return bool(step["stale_chain_cleanup_due"])
    said = " ".join(str(step.get(k, "")) for k in ("description", "sync", "action"))
    if "lastIPTablesCleanup" in said:
        return "syncPeriod" in said
    return True


STEP_CASES = [p for p in CASES if load_case(p).get("steps")]


@pytest.mark.parametrize("path", STEP_CASES, ids=[p.stem for p in STEP_CASES])
def test_fidelity_steps(path):
    case = load_case(path)
    pc = case["proxier_config"]
    config = proxier_config(pc)
    objects: list[dict] = []
    need_full_sync = True
    n0 = None
    with lab_namespace() as netns:
        for number, step in enumerate(case["steps"], 1):
            where = f"step {number} ({step['action']})"
            previous = objects
            action = step["action"]
            if action in ("add", "update"):
                objects = _upsert(objects, load_objects(step["objects"], origin=f"{path.name} {where}"))
            elif action == "delete":
                objects = _remove(objects, step["objects"])
            elif action == "inject-and-delete":
                injected = re.search(r"'(-A [^']+)'", step.get("description", ""))
                assert injected, f"{where}: no quoted rule to inject in the description"
                load.restore(netns, f"*nat\n{injected.group(1)}\nCOMMIT\n")
                objects = _remove(objects, step["objects"])
            elif action not in ("none", "force-full-sync", "force-sync"):
                pytest.fail(f"{where}: action {action!r} is not understood")

            kind = step.get("sync", "")
            forced = bool(step.get("force_full_sync")) or "force" in f"{action} {kind}".lower()   # forceSyncProxyRules
            full = need_full_sync or forced
            if kind.startswith(("full", "partial")):
                assert kind.startswith("full") == full, f"{where}: the case says {kind!r}, labkit's sync loop says {'full' if full else 'partial'}"
            if full:
                ensure_jump_rules(netns, config)
                load.ensure_nfacct(netns, config.nfacct_counters)
                changed = None
            else:
                changed = changed_services(previous, objects, config)
            # syncProxyRules lists the nat table for stale chains unless it is in large-cluster
            # mode and less than syncPeriod has passed since the last cleanup (the case says so).
            cleanup = _cleanup_due(step) or not large_cluster_mode(objects, config)
            metrics: dict = {}
            text = render(objects, config, existing_nat_chains=load.nat_chain_names(netns) if cleanup else None,
                          changed_services=changed, metrics=metrics)
            ok, message = load.try_restore(netns, text, counters=True)
            need_full_sync = not ok
            print(f"{where}: {'full' if full else 'partial'} sync, restore {'ok' if ok else 'failed: ' + message}")

            if step.get("iptables_restore"):
                assert sort_rules(text) == step["iptables_restore"], where
            if step.get("check_consistency"):
                assert check_rule_jumps(text) == [], where
            if "observed_iptables_save" in step:
                assert saved_without_canaries(netns) == step["observed_iptables_save"], where
            if n0 is None:
                n0 = sum(1 for l in text.split("*nat", 1)[1].splitlines() if l.startswith("-A "))
            total = step.get("nat_rules_total_after")
            if total is not None:
                m = re.match(r"N0(?:\s*\+\s*(\d+))?", str(total))
                assert m, f"{where}: nat_rules_total_after {total!r} is not understood"
                stated = re.search(r"\((\d+)\)", str(total))
                if number == 1 and stated:
                    assert n0 == int(stated.group(1)), where
                assert _nat_rule_count(netns) == n0 + int(m.group(1) or 0), f"{where}: nat rules in the kernel"
            for key, value in (step.get("assert") or {}).items():
                if m := re.match(r"(KUBE-\S+) still exists$", key):
                    assert (m.group(1) in load.nat_chain_names(netns)) == value, f"{where}: {key}"
                elif key == "needFullSync":
                    assert need_full_sync == value, f"{where}: {key}"
                elif key == "partial_restore_failures_metric_incremented_by":
                    assert (0 if ok or full else 1) == value, f"{where}: {key}"
                elif (problem := check_restore_assertion(key, value, text)) is not None:
                    assert not problem, f"{where}: {problem}"
                else:
                    pytest.fail(f"{where}: assertion {key!r} is not understood")
            if not ok and not step.get("assert"):
                pytest.fail(f"{where}: iptables-restore failed: {message}")
            if step.get("metrics"):
                assert check_metrics(text, metrics, step["metrics"]) == [], where
            if step.get("sep_dnat"):
                assert check_sep_dnat(text, step["sep_dnat"]) == [], where
            for fragment in step.get("restore_contains") or []:
                assert fragment in text, f"{where}: {fragment!r} is not in the restore text"
            for fragment in step.get("restore_lacks") or []:
                assert fragment not in text, f"{where}: {fragment!r} is in the restore text"
            if step.get("packet_flow"):
                problems = check_packet_flows(read_live(netns), pc, step["packet_flow"])
                assert not problems, where + "\n" + "\n".join(problems)


def saved_without_canaries(netns: str) -> str:
    """iptables-save of filter and nat after sync_node, less kube-proxy's empty KUBE-PROXY-CANARY
    chains: its iptables monitor makes them (sync.py), while the cases' observed outputs were taken
    after loading the restore text and the jump rules only."""
    text = load.save(netns, "filter") + load.save(netns, "nat")
    assert text.count(":KUBE-PROXY-CANARY - [0:0]\n") == 2
    return text.replace(":KUBE-PROXY-CANARY - [0:0]\n", "")


OBSERVED = [p for p in CASES if (load_case(p).get("expected") or {}).get("observed_iptables_save")]


@pytest.mark.parametrize("path", OBSERVED, ids=[p.stem for p in OBSERVED])
def test_loaded_into_a_namespace(path):
    """The rendered rules loaded like a kube-proxy full sync (jump rules, nfacct counters,
    iptables-legacy-restore --noflush) print back from iptables-legacy-save exactly as the case
    observed; read back as live tables (labkit.netfilter.read_live) they give the same packet flows."""
    case = load_case(path)
    config = proxier_config(case["proxier_config"])
    objects = load_objects(case["objects"])
    with lab_namespace() as netns:
        text = sync_node(netns, objects, config)
        saved = saved_without_canaries(netns)
        assert saved == case["expected"]["observed_iptables_save"]
        sync_node(netns, objects, config)          # a second full sync changes nothing
        assert saved_without_canaries(netns) == saved
        live = read_live(netns)
    offline = with_jump_rules(text)
    for table in ("filter", "nat"):
        assert sorted(set(live.chain_names(table)) - {"KUBE-PROXY-CANARY"}) == sorted(offline.chain_names(table))
        for chain in offline.chain_names(table):
            assert len(live.chain(table, chain).rules) == len(offline.chain(table, chain).rules), f"{table} {chain}"
    # the same packets through the live tables and through the rendered text
    pc = case["proxier_config"]
    local = pc.get("tracerLocalIPs") or []
    # Each service port as kube-proxy reads it: cluster IPs such as "172.30.0.041" (TestBadIPs) are
    # parsed with ParseIPSloppy, so the packet goes to the canonical address.
    for sp in build_state(objects, config).service_ports:
        for src in ("10.0.0.2", "203.0.113.2", local[0] if local else "192.168.0.2"):
            packet = Packet(src, sp.cluster_ip, sp.port, sp.proto)
            a, b = Tracer(live, local).trace(packet), Tracer(offline, local).trace(packet)
            assert (a.dnat, a.masquerade, a.verdict, a.output) == (b.dnat, b.masquerade, b.verdict, b.output)
