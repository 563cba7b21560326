"""Machine diagrams: every CPU drawn once, inside the right socket, NUMA node and core, coloured by owner."""

import xml.etree.ElementTree as ET

from rich.console import Console

from labkit.numa.diagram import PALETTE, RESERVED, SHARED, Placement, layout, svg, terminal

SVG = "{http://www.w3.org/2000/svg}"

# Two sockets; socket 0 holds NUMA nodes 0 and 1, socket 1 holds node 2; two threads per core.
MACHINE = {"topology": [
    {"node_id": 0, "cores": [{"core_id": 0, "thread_ids": [0, 6], "socket_id": 0},
                             {"core_id": 1, "thread_ids": [1, 7], "socket_id": 0}]},
    {"node_id": 1, "cores": [{"core_id": 2, "thread_ids": [2, 8], "socket_id": 0},
                             {"core_id": 3, "thread_ids": [3, 9], "socket_id": 0}]},
    {"node_id": 2, "cores": [{"core_id": 4, "thread_ids": [10, 4], "socket_id": 1},
                             {"core_id": 5, "thread_ids": [5, 11], "socket_id": 1}]},
]}
PLACEMENT = Placement(exclusive={"default/db/main": [2, 8, 3], "default/web/app": [10]}, reserved=[0],
                      shared=["default/burst/c"], memory={"default/db/main": [1], "default/web/app": [2]},
                      shared_pool=[0, 1, 4, 5, 6, 7, 9, 11])


def test_layout_nests_cores_in_nodes_in_sockets():
    sockets = layout(MACHINE)
    assert [(s.socket_id, [n.node_id for n in s.nodes]) for s in sockets] == [(0, [0, 1]), (1, [2])]
    assert sockets[1].nodes[0].cores == [(4, [4, 10]), (5, [5, 11])]


def test_svg_draws_each_cpu_once_in_its_core_node_and_socket_with_its_owners_colour():
    root = ET.fromstring(svg(MACHINE, PLACEMENT, "test machine"))
    seen = {}
    for socket in root.iter(f"{SVG}g"):
        if socket.get("class") != "socket":
            continue
        for node in socket.iter(f"{SVG}g"):
            if node.get("class") != "numa-node":
                continue
            for core in node.iter(f"{SVG}g"):
                if core.get("class") != "core":
                    continue
                for cpu in core.iter(f"{SVG}g"):
                    if cpu.get("class") == "cpu":
                        fill = cpu.find(f"{SVG}rect").get("fill")
                        seen.setdefault(int(cpu.get("data-cpu")), []).append(
                            (int(socket.get("data-socket")), int(node.get("data-node")), int(core.get("data-core")), fill))
    assert sorted(seen) == list(range(12)) and all(len(v) == 1 for v in seen.values())
    assert seen[10][0] == (1, 2, 4, PALETTE[1][1])
    assert {seen[c][0][3] for c in (2, 3, 8)} == {PALETTE[0][1]}
    assert seen[0][0][3] == RESERVED[1] and seen[5][0][3] == SHARED[1]
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "memory of: default/db/main" in texts and "CPUs 2-3,8 exclusive" in texts
    assert "shared pool (CPUs 0-1,4-7,9,11): default/burst/c" in texts


def test_terminal_picture_shows_every_cpu_and_the_legend():
    console = Console(width=140, record=True, color_system="truecolor")
    console.print(terminal(MACHINE, PLACEMENT, "test machine"))
    text = console.export_text(clear=False)
    for title in ("socket 0", "socket 1", "NUMA node 0", "NUMA node 1", "NUMA node 2"):
        assert title in text
    assert "2-3,8 (exclusive)" in text and "0 (still in the shared pool)" in text
    # every legend row names one container in the "who" column, its CPUs in the "CPUs" column
    legend = {line.split()[0]: line.split()[1:] for line in text.splitlines()
              if line.strip().startswith(("default/", "reserved"))}
    assert legend["default/burst/c"][:3] == ["shared", "pool", "0-1,4-7,9,11"]
    assert legend["default/db/main"][:2] == ["2-3,8", "(exclusive)"]
    html = console.export_html(inline_styles=True)
    assert html.count("background-color") >= 5   # the owners' cells are coloured


def test_each_numa_node_shows_its_memory_and_the_memory_managers_tables():
    machine = {"topology": [
        {"node_id": 0, "memory": 8 << 30, "hugepages": [{"page_size": 1048576, "num_pages": 2}],
         "cores": [{"core_id": 0, "thread_ids": [0], "socket_id": 0}]},
        {"node_id": 1, "memory": 8 << 30, "hugepages": [], "cores": [{"core_id": 1, "thread_ids": [1], "socket_id": 0}]},
    ]}
    placement = Placement(memory_tables={0: {"memory": (5 << 30, 3 << 30, 2 << 30)}})
    console = Console(width=200, record=True)
    console.print(terminal(machine, placement, "m"))
    text = console.export_text()
    assert "memory 8Gi; hugepages-1Gi: 2 x 1Gi" in text and "memory: allocatable 5Gi, taken 3Gi, free 2Gi" in text
    texts = " ".join(t.text or "" for t in ET.fromstring(svg(machine, placement, "m")).iter(f"{SVG}text"))
    assert "memory 8Gi; hugepages-1Gi: 2 x 1Gi" in texts and "memory: allocatable 5Gi, taken 3Gi, free 2Gi" in texts


def test_each_numa_node_shows_the_devices_on_it():
    machine = {**MACHINE, "devices": {"example.com/gpu": [{"id": "gpu0", "numa_nodes": [0]},
                                                          {"id": "gpu1", "numa_nodes": [2]}],
                                      "example.com/nic": [{"id": "nic0", "numa_nodes": [0, 1]}]}}
    console = Console(width=200, record=True)
    console.print(terminal(machine, Placement(), "m"))
    panels = console.export_text().split("NUMA node ")[1:]     # each node's panel, in order
    assert "example.com/gpu: gpu0" in panels[0] and "example.com/nic: nic0" in panels[0]
    assert "gpu" not in panels[1] and "example.com/nic: nic0" in panels[1]
    assert "example.com/gpu: gpu1" in panels[2] and "nic" not in panels[2]
    texts = " ".join(t.text or "" for t in ET.fromstring(svg(machine, Placement(), "m")).iter(f"{SVG}text"))
    assert "example.com/gpu: gpu0" in texts and "example.com/gpu: gpu1" in texts
