"""Common wrong repairs in debug-ruleset."""

import re

from labkit.exercises import mistake
from labkit.kubeproxy import live
from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.kubeproxy.proxier import render
from labkit.netfilter import parse, restore, save

NODE, SERVICE = "node2", "catalog"


def _chains(env):
    """The broken live chains of catalog on node2 and kube-proxy's own version of them."""
    state = live.load(env)
    name = service_chain(service_port_name("default", SERVICE, "http"), "tcp")
    live_nat = parse(save(env.netns_name(NODE), "nat")).table("nat")
    good = parse(render(state.objects(), live.proxier_config(state, NODE))).table("nat")
    names = [name] + [r.target for r in good.chain(name).rules if r.target.startswith("KUBE-SEP-")]
    return names, live_nat, good


def _load(env, chains: dict[str, list[str]]):
    text = "*nat\n" + "".join(f":{c} - [0:0]\n" for c in chains)
    text += "".join(line + "\n" for lines in chains.values() for line in lines) + "COMMIT\n"
    restore(env.netns_name(NODE), text, noflush=True)


@mistake("node2", "never reaches", "endpoints")
def fixes_only_the_dnat(env):
    """Repairs the DNAT port but leaves the KUBE-SVC chain's probabilities as they are."""
    names, live_nat, good = _chains(env)
    _load(env, {names[0]: [r.text for r in live_nat.chain(names[0]).rules],
                **{c: [r.text for r in good.chain(c).rules] for c in names[1:]}})


@mistake("node2", "where kube-proxy's rules never send it")
def fixes_only_the_probabilities(env):
    """Repairs the probabilities but not the DNAT to the wrong port."""
    names, live_nat, good = _chains(env)
    _load(env, {names[0]: [r.text for r in good.chain(names[0]).rules],
                **{c: [r.text for r in live_nat.chain(c).rules] for c in names[1:]}})


@mistake("node2", "other chances")
def rounds_the_probabilities(env):
    """Repairs both, but types the probabilities rounded (0.25, 0.33, 0.5)."""
    names, _live_nat, good = _chains(env)
    rounded = [re.sub(r"--probability (\S+)", lambda m: f"--probability {float(m[1]):.2f}", r.text)
               for r in good.chain(names[0]).rules]
    _load(env, {names[0]: rounded, **{c: [r.text for r in good.chain(c).rules] for c in names[1:]}})


@mistake("node2", "lack the comment kube-proxy gives them", "catalog's chains")
def repairs_without_the_comments(env):
    """Repairs both damaged rules in place with `iptables -R`, but types them without their
    `-m comment --comment …` (the damaged rules carried it): the packets go where kube-proxy's would, the rules
    are not kube-proxy's."""
    from labkit.kubeproxy.judge import _same_rule
    names, live_nat, good = _chains(env)

    def bare(rule):
        return re.sub(r' -m comment --comment ("[^"]*"|\S+)', "", rule.text)
    _load(env, {c: [r.text if _same_rule(r, g) else bare(g)
                    for r, g in zip(live_nat.chain(c).rules, good.chain(c).rules)] for c in names})


@mistake("node2", "udp", "is rejected where kube-proxy's rules let it pass")
def repairs_and_rejects_udp_to_the_cluster_ip(env):
    """Repairs both rules as kube-proxy writes them, then, catalog being TCP only, adds a REJECT for UDP to its
    cluster IP at the top of node2's FORWARD chain. The feedback named a masquerade the packet "misses", which
    only follows from its being rejected."""
    from labkit.netlab import run_in
    env.lab._load("solutions/debug-ruleset.py").solve(env)
    ip = live.load(env).service(SERVICE)["spec"]["clusterIP"]
    run_in(env.netns_name(NODE), ["iptables-legacy", "-w", "-I", "FORWARD", "1", "-d", f"{ip}/32", "-p", "udp",
                                  "-j", "REJECT"])


@mistake("kube-proxy rewrote", "full sync", "KUBE-PROXY-CANARY")
def full_resync_through_the_canary(env):
    """Deletes kube-proxy's canary chain KUBE-PROXY-CANARY on node2 and applies a Service (the full resync
    the README documents), so kube-proxy rewrites every chain and the damage is never found."""
    from labkit.netlab import run_in
    for table in ("mangle", "nat", "filter"):
        run_in(env.netns_name(NODE), ["iptables-legacy", "-w", "-t", table, "-X", "KUBE-PROXY-CANARY"])
    state = live.load(env)
    live.apply_documents(env, [state.service("web")], "mistakes/debug-ruleset.py")


@mistake("node2", "KUBE-SVL-")
def copies_node1s_nat_table(env):
    """Copies node1's whole nat table onto node2 (`iptables-save -t nat` on node1, `iptables-restore` on node2),
    which leaves node1's node-specific KUBE-SVL- chain (shop-local's pods run on node1) on node2."""
    restore(env.netns_name(NODE), save(env.netns_name("node1"), "nat"), noflush=False)


def _bypass(env, builtins=("PREROUTING", "OUTPUT")):
    """Copies of kube-proxy's catalog chains under own names, jumped to first from `builtins` for
    catalog's cluster IP and port; the broken chains stay as they are."""
    names, _live_nat, good = _chains(env)
    state = live.load(env)
    svc = state.service(SERVICE)
    ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["port"]
    mine = {names[0]: "MY-CATALOG"} | {c: f"MY-CATALOG-{i}" for i, c in enumerate(names[1:], 1)}
    rename = lambda text: " ".join(mine.get(w, w) for w in text.split(" "))
    _load(env, {mine[c]: [rename(r.text) for r in good.chain(c).rules] for c in names})
    from labkit.netlab import run_in
    for chain in builtins:
        run_in(env.netns_name(NODE), ["iptables-legacy", "-w", "-t", "nat", "-I", chain, "1", "-d", f"{ip}/32", "-p",
                                      "tcp", "--dport", str(port), "-j", "MY-CATALOG"])


@mistake("node2", "MY-CATALOG", "kube-proxy does not write")
def bypass_in_front_of_the_broken_chains(env):
    """Leaves catalog's broken KUBE-SVC and KUBE-SEP chains as they are and sends its cluster IP, from
    nat PREROUTING and OUTPUT, to correct copies under own names first: the packets go right, but the
    broken rules are still there."""
    _bypass(env)


@mistake("node2", "catalog's chains", "still differ")
def repairs_the_dnat_into_an_extra_rule(env):
    """Repairs the probabilities, and repairs the DNAT by inserting a correct DNAT rule before the wrong one
    instead of replacing it: packets never reach the wrong rule, but it is still there."""
    names, live_nat, good = _chains(env)
    chains = {names[0]: [r.text for r in good.chain(names[0]).rules]}
    for c in names[1:]:
        rules = [r.text for r in live_nat.chain(c).rules]
        right = [r.text for r in good.chain(c).rules]
        if rules != right:
            dnat = next(i for i, r in enumerate(rules) if "DNAT" in r)
            rules = rules[:dnat] + [right[dnat]] + rules[dnat:]
        chains[c] = rules
    _load(env, chains)


@mistake("node2", "mangle", "as the lab built")
def repairs_and_marks_catalog_in_mangle(env):
    """Repairs both chains as kube-proxy writes them, and leaves a rule of its own in node2's mangle
    PREROUTING that marks catalog's packets (left over from debugging): the nat and filter tables are
    kube-proxy's, the node's rules are not."""
    names, _live_nat, good = _chains(env)
    _load(env, {c: [r.text for r in good.chain(c).rules] for c in names})
    svc = live.load(env).service(SERVICE)
    from labkit.netlab import run_in
    run_in(env.netns_name(NODE), ["iptables-legacy", "-w", "-t", "mangle", "-I", "PREROUTING", "1", "-d",
                                  f"{svc['spec']['clusterIP']}/32", "-j", "MARK", "--set-xmark", "0x8000/0x8000"])


@mistake("node1", "everything was fine", "catalog's chains")
def also_edits_node1(env):
    """Types one of the repairs into node1's shell first (the KUBE-SVC chain's last jump given a probability of 0.5,
    as if every jump needed one), then repairs node2 rightly: node2 is kube-proxy's again, but node1, where
    everything was fine, now refuses half of the requests its last jump used to take."""
    from labkit.netlab import run_in
    names, _live_nat, good = _chains(env)
    _load(env, {c: [r.text for r in good.chain(c).rules] for c in names})
    last = good.chain(names[0]).rules[-1]
    run_in(env.netns_name("node1"), ["iptables-legacy", "-w", "-t", "nat", "-R", names[0], str(len(good.chain(names[0]).rules)),
                                     "-m", "comment", "--comment", last.comment, "-m", "statistic", "--mode", "random",
                                     "--probability", "0.5", "-j", last.target])
