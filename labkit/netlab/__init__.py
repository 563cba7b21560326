"""Network building blocks for labs: named network namespaces, links, and commands run inside them.

Everything lives in lab-owned network namespaces; nothing is ever added to the host's root
network namespace. See netns.py (namespaces) and links.py (veth, bridges, addresses, routes).
"""

from labkit.netlab.netns import create_netns, exists, netns_path, run_in
from labkit.netlab.links import add_address, add_bridge, add_route, add_veth, enslave, set_up

__all__ = [
    "create_netns", "exists", "netns_path", "run_in",
    "add_address", "add_bridge", "add_route", "add_veth", "enslave", "set_up",
]
