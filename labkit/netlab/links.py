"""Links, addresses and routes inside lab network namespaces (pyroute2), each recorded first."""

from __future__ import annotations

from contextlib import contextmanager

from labkit.netlab.netns import exists, netns_path


@contextmanager
def _ns(name: str):
    from pyroute2 import NetNS
    handle = NetNS(name)
    try:
        yield handle
    finally:
        handle.close()


def _index(ns, ifname: str) -> int:
    found = ns.link_lookup(ifname=ifname)
    if not found:
        raise RuntimeError(f"no link {ifname}")
    return found[0]


def add_veth(env, netns_a: str, name_a: str, netns_b: str, name_b: str) -> None:
    """A veth pair with one end in each namespace, both ends up."""
    env.ledger.record("link", netns=netns_a, name=name_a)
    env.ledger.record("link", netns=netns_b, name=name_b)
    with _ns(netns_a) as a:
        a.link("add", ifname=name_a, kind="veth", peer={"ifname": name_b, "net_ns_fd": str(netns_path(netns_b))})
        a.link("set", index=_index(a, name_a), state="up")
    with _ns(netns_b) as b:
        b.link("set", index=_index(b, name_b), state="up")


def add_bridge(env, netns: str, name: str) -> None:
    env.ledger.record("link", netns=netns, name=name)
    with _ns(netns) as ns:
        ns.link("add", ifname=name, kind="bridge")
        ns.link("set", index=_index(ns, name), state="up")


def enslave(netns: str, port: str, bridge: str) -> None:
    with _ns(netns) as ns:
        ns.link("set", index=_index(ns, port), master=_index(ns, bridge))


def set_up(netns: str, name: str) -> None:
    with _ns(netns) as ns:
        ns.link("set", index=_index(ns, name), state="up")


def add_address(netns: str, ifname: str, cidr: str) -> None:
    address, prefixlen = cidr.split("/")
    with _ns(netns) as ns:
        ns.addr("add", index=_index(ns, ifname), address=address, prefixlen=int(prefixlen))


def add_route(netns: str, dst: str, *, gateway: str | None = None, dev: str | None = None) -> None:
    """Add a route; dst is a CIDR or "default"."""
    kwargs = {"dst": "0.0.0.0/0" if dst == "default" else dst}
    with _ns(netns) as ns:
        if gateway:
            kwargs["gateway"] = gateway
        if dev:
            kwargs["oif"] = _index(ns, dev)
        ns.route("add", **kwargs)


def remove_recorded(entry: dict) -> bool:
    if not exists(entry["netns"]):
        return False   # gone with its namespace
    with _ns(entry["netns"]) as ns:
        found = ns.link_lookup(ifname=entry["name"])
        if not found:
            return False
        ns.link("del", index=found[0])
    return True
