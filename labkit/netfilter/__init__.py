"""Netfilter mechanism shared by the labs: ruleset model, loading into and reading from lab
network namespaces, and a packet tracer.

    parse(text) -> Ruleset                  iptables-save output or iptables-restore input
    restore(netns, text, ...)               iptables-legacy-restore inside a lab namespace
    save(netns, table=None) -> str          iptables-legacy-save inside a lab namespace
    read_live(netns) -> Ruleset             the live tables, as iptables-legacy-save prints them in
                                            the namespace (labkit.netfilter.live says why not libiptc)
    conntrack.entry(netns, ...) -> Conntrack  a connection's entry in the namespace's conntrack
                                            table, over ctnetlink (pyroute2), for the tracer
    ensure_nfacct(netns, names)             nfacct counters (as kube-proxy creates them)
    Tracer(ruleset, local_addresses).trace(Packet(...)) -> TraceResult
    kube_proxy_test_trace(...)              kube-proxy's unit-test tracer (tracePacket)

Nothing here ever touches the host's root network namespace.
"""

from labkit.netfilter.ruleset import Chain, Cond, Rule, Ruleset, Table, parse, parse_rule
from labkit.netfilter.trace import Conntrack, Packet, TraceResult, Tracer, kube_proxy_test_trace

__all__ = ["Chain", "Cond", "Rule", "Ruleset", "Table", "parse", "parse_rule", "Conntrack", "Packet", "TraceResult",
           "Tracer", "kube_proxy_test_trace", "restore", "save", "read_live", "ensure_nfacct"]


def __getattr__(name):
    # the namespace-touching helpers import lazily (ctypes, pyroute2)
    if name in ("restore", "save", "ensure_nfacct", "nat_chain_names"):
        from labkit.netfilter import load
        return getattr(load, name)
    if name == "read_live":
        from labkit.netfilter import live
        return live.read_live
    raise AttributeError(name)
