"""Log every new TCP connection a lab host is asked for on some of its ports, from any sender.

Run as a script inside a lab network namespace (standard library only, so that it starts in a
few milliseconds with `python -I -S`):

    synwatch.py --log FILE --address 192.168.50.12 [--address ...] --ports 30000-32767 [--ready-fd N]

It reads the namespace's packets with a packet socket (AF_PACKET, as tcpdump does): the kernel
hands it each packet as the interface received it (a bridge port's too), before netfilter, so it sees the destination
the sender asked for (a node's address and NodePort, before kube-proxy's DNAT) and also the
connections that a rule drops and that never reach a server. A classic BPF filter lets only TCP
SYNs (SYN set, ACK clear) through to the process. Each SYN aimed at one of `--address` on a port
in `--ports` is one JSON line, appended and flushed at once:

    {"at": 1765062000.123, "src": "192.168.50.100", "sport": 40312, "dst": "192.168.50.12",
     "dport": 30101, "dev": "eth0"}

`at` is the wall clock (epoch seconds) when the kernel received the packet (SO_TIMESTAMP). A retransmitted SYN (the same
source, ports and destination within a few seconds) is logged once. Packets the namespace sends
itself are not looked at (an outgoing packet is already past the sender's own DNAT).
"""

import argparse
import ctypes
import json
import os
import signal
import socket
import struct
import time

ETH_P_ALL, ETH_P_IP = 0x0003, 0x0800
SO_ATTACH_FILTER, SO_TIMESTAMP = 26, 29
PACKET_OUTGOING = 4

# IPv4, TCP, not a fragment, SYN without ACK (offsets from the IP header: a SOCK_DGRAM packet socket)
SYN_FILTER = [
    (0x28, 0, 0, 0xFFFFF000),   # ldh [proto]: the packet's ethertype (SKF_AD_OFF + SKF_AD_PROTOCOL)
    (0x15, 0, 9, ETH_P_IP),     # jeq #0x0800, else drop
    (0x30, 0, 0, 9),            # ldb [9]: protocol
    (0x15, 0, 7, 6),            # jeq #6 (tcp), else drop
    (0x28, 0, 0, 6),            # ldh [6]: flags and fragment offset
    (0x45, 5, 0, 0x1FFF),       # jset #0x1fff: a fragment, drop
    (0xB1, 0, 0, 0),            # ldxb 4*([0]&0xf): IP header length
    (0x50, 0, 0, 13),           # ldb [x+13]: TCP flags
    (0x54, 0, 0, 0x12),         # and #0x12 (SYN|ACK)
    (0x15, 0, 1, 0x02),         # jeq #0x02 (SYN alone), else drop
    (0x06, 0, 0, 0xFFFF),       # accept
    (0x06, 0, 0, 0),            # drop
]


def attach_filter(sock: socket.socket) -> None:
    code = b"".join(struct.pack("HBBI", *insn) for insn in SYN_FILTER)
    buffer = ctypes.create_string_buffer(code)
    program = struct.pack("HL", len(SYN_FILTER), ctypes.addressof(buffer))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, program)


def received_at(ancillary) -> float:
    """When the kernel received the packet (SO_TIMESTAMP), not when this process got round to it: on
    a busy machine the log's time must still come before anything the sender did after sending."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMP and len(data) >= 16:
            seconds, micros = struct.unpack("qq", data[:16])
            return seconds + micros / 1e6
    return time.time()


def parse_ports(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def syn(packet: bytes):
    """(src, sport, dst, dport) of a TCP SYN, or None."""
    if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] != 6:
        return None
    ihl = (packet[0] & 0x0F) * 4
    if len(packet) < ihl + 14 or packet[ihl + 13] & 0x12 != 0x02:
        return None
    sport, dport = struct.unpack("!HH", packet[ihl:ihl + 4])
    return socket.inet_ntoa(packet[12:16]), sport, socket.inet_ntoa(packet[16:20]), dport


def main() -> None:
    parser = argparse.ArgumentParser(description="log TCP SYNs to some of a lab host's addresses and ports")
    parser.add_argument("--log", required=True)
    parser.add_argument("--address", action="append", required=True)
    parser.add_argument("--ports", type=parse_ports, required=True, help="LOW-HIGH")
    parser.add_argument("--ready-fd", type=int)
    args = parser.parse_args()
    addresses, (low, high) = set(args.address), args.ports

    # every protocol: a socket for IP alone is handed a bridge port's packets only after the bridge
    # took them (a pod's request to its own node then arrives at the bridge already DNATed)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    attach_filter(sock)
    log = open(args.log, "a", buffering=1)
    if args.ready_fd is not None:
        os.write(args.ready_fd, b"1")
        os.close(args.ready_fd)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
    recent: dict[tuple, float] = {}
    while True:
        packet, ancillary, _flags, where = sock.recvmsg(65535, socket.CMSG_SPACE(16))
        if where[1] != ETH_P_IP or where[2] == PACKET_OUTGOING:
            continue
        found = syn(packet)
        if found is None or found[2] not in addresses or not low <= found[3] <= high:
            continue
        now = received_at(ancillary)
        if now - recent.get(found, 0.0) < 10:      # a retransmission (or the same SYN on a bridge port)
            continue
        if len(recent) > 4096:
            recent = {k: t for k, t in recent.items() if now - t < 10}
        recent[found] = now
        log.write(json.dumps({"at": round(now, 3), "src": found[0], "sport": found[1], "dst": found[2],
                              "dport": found[3], "dev": where[0]}) + "\n")


if __name__ == "__main__":
    main()
