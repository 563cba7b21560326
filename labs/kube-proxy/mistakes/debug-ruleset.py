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
