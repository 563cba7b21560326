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


@mistake("never answered")
def fixes_only_the_dnat(env):
    """Repairs the DNAT port but leaves the KUBE-SVC chain's probabilities as they are."""
    names, live_nat, good = _chains(env)
    _load(env, {names[0]: [r.text for r in live_nat.chain(names[0]).rules],
                **{c: [r.text for r in good.chain(c).rules] for c in names[1:]}})


@mistake("requests failed")
def fixes_only_the_probabilities(env):
    """Repairs the probabilities but not the DNAT to the wrong port."""
    names, live_nat, good = _chains(env)
    _load(env, {names[0]: [r.text for r in good.chain(names[0]).rules],
                **{c: [r.text for r in live_nat.chain(c).rules] for c in names[1:]}})


@mistake("the same chance")
def rounds_the_probabilities(env):
    """Repairs both, but types the probabilities rounded (0.25, 0.33, 0.5)."""
    names, _live_nat, good = _chains(env)
    rounded = [re.sub(r"--probability (\S+)", lambda m: f"--probability {float(m[1]):.2f}", r.text)
               for r in good.chain(names[0]).rules]
    _load(env, {names[0]: rounded, **{c: [r.text for r in good.chain(c).rules] for c in names[1:]}})
