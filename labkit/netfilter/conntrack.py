"""A lab node's connection tracking table, read over ctnetlink with pyroute2's Conntrack.

The table is the one of the node's network namespace, so the query runs in a child that joined
it (labkit.netfilter.nsexec), as `conntrack -L` would inside the node. ctnetlink is what the
conntrack tool and kube-proxy's conntrack cleanup (pkg/proxy/conntrack) use; /proc/net/nf_conntrack
exists only on kernels built with the obsolete NF_CONNTRACK_PROCFS option, and its absence would
read as an empty table. The kernel loads nf_conntrack_netlink for the first query; it belongs to
the module families a lab's claim unloads again (labkit.kmodules).
"""

from __future__ import annotations

import ipaddress
import socket

from labkit.netfilter.nsexec import call_in_netns
from labkit.netfilter.trace import Conntrack

PROTOCOLS = {"tcp": socket.IPPROTO_TCP, "udp": socket.IPPROTO_UDP, "sctp": socket.IPPROTO_SCTP}
# include/uapi/linux/netfilter/nf_conntrack_common.h: enum ip_conntrack_status
IPS_SRC_NAT, IPS_DST_NAT = 1 << 4, 1 << 5


def _entries(proto: str, src: str, sport: int) -> list[dict]:
    """In the current namespace: the tracked connections of `proto` from src:sport, as plain
    dicts of their original and reply tuples and their status bits."""
    from pyroute2 import Conntrack as CtSocket
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

    family = socket.AF_INET6 if ipaddress.ip_address(src).version == 6 else socket.AF_INET
    wanted = NFCTAttrTuple(family=family, saddr=src, proto=PROTOCOLS[proto], sport=sport)
    found = []
    with CtSocket() as ct:
        for entry in ct.dump_entries(tuple_orig=wanted):
            tuples = {side: {"src": t.saddr, "dst": t.daddr, "sport": t.sport, "dport": t.dport}
                      for side, t in (("original", entry.tuple_orig), ("reply", entry.tuple_reply))}
            found.append({**tuples, "status": entry.status or 0})
    return found


def entries(netns: str, proto: str, src: str, sport: int) -> list[dict]:
    """The node's tracked `proto` connections from src:sport (original and reply tuples, status)."""
    return call_in_netns(netns, _entries, proto, src, sport)


def entry(netns: str, proto: str, src: str, sport: int, dst: str, dport: int) -> Conntrack | None:
    """The node's conntrack entry for a connection, as the tracer uses it: where its first packet
    was DNATed (IPS_DST_NAT: the reply tuple's source) and whether it got source NAT (IPS_SRC_NAT,
    also a MASQUERADE that kept the address); None when the node tracks no such connection."""
    dst_ip = ipaddress.ip_address(dst)
    for found in entries(netns, proto, src, sport):
        original, reply = found["original"], found["reply"]
        if ipaddress.ip_address(original["dst"]) != dst_ip or original["dport"] != dport:
            continue
        reply_src = f"[{reply['src']}]" if ":" in reply["src"] else reply["src"]
        return Conntrack(dnat=f"{reply_src}:{reply['sport']}" if found["status"] & IPS_DST_NAT else None,
                         masquerade=bool(found["status"] & IPS_SRC_NAT))
    return None
