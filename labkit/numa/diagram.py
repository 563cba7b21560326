"""Pictures of a machine and of who runs where: sockets, NUMA nodes, cores, threads.

The machine comes as cadvisor MachineInfo (see labkit.numa.discover); a `Placement` says which
container holds which CPUs exclusively, which CPUs are reserved for the system, which containers
share the pool (and which CPUs it has), on which NUMA nodes containers have their memory, and, with
the Memory Manager's Static policy, each NUMA node's memory table. Every NUMA node shows its
memory: capacity and hugepages from the machine, allocatable / taken / free from the Memory
Manager when there is one. Two renderings of the same picture: a rich renderable for the
terminal and a self-contained SVG.

A socket may hold several NUMA nodes (sub-NUMA clustering) and a NUMA node may span several
sockets; the picture is drawn socket by socket, and a NUMA node appears inside every socket where
it has cores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from labkit.numa.cpuset import format_cpus
from labkit.quantity import BINARY, format_quantity

# Colours for containers with exclusive CPUs, in order of appearance (terminal name, SVG fill).
PALETTE = (
    ("bright_white on dark_green", "#2e7d32"), ("bright_white on blue", "#1565c0"),
    ("black on gold1", "#f9a825"), ("bright_white on purple", "#6a1b9a"),
    ("bright_white on dark_orange3", "#d84315"), ("black on cyan", "#00acc1"),
    ("bright_white on deep_pink3", "#ad1457"), ("black on chartreuse3", "#7cb342"),
)
RESERVED = ("bright_white on grey35", "#616161")
SHARED = ("black on grey82", "#d0d0d0")


@dataclass
class Placement:
    exclusive: dict[str, list[int]] = field(default_factory=dict)  # container label -> its CPUs
    reserved: list[int] = field(default_factory=list)              # reservedSystemCPUs
    shared: list[str] = field(default_factory=list)                # labels of shared-pool containers
    memory: dict[str, list[int]] = field(default_factory=dict)     # container label -> NUMA nodes
    shared_pool: list[int] = field(default_factory=list)           # the CPUs of the shared pool
    # Memory Manager machine state: NUMA node -> resource -> (allocatable, reserved by Pods, free) bytes
    memory_tables: dict[int, dict[str, tuple[int, int, int]]] = field(default_factory=dict)

    def owner_of(self) -> dict[int, str]:
        return {cpu: label for label, cpus in self.exclusive.items() for cpu in cpus}

    def colours(self) -> dict[str, tuple[str, str]]:
        labels = list(self.exclusive) + [l for l in self.memory if l not in self.exclusive]
        return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


@dataclass
class _Node:
    node_id: int
    cores: list[tuple[int, list[int]]]   # (core id, thread ids)


@dataclass
class _Socket:
    socket_id: int
    nodes: list[_Node]


def layout(machine: dict) -> list[_Socket]:
    """Sockets in id order, each with the NUMA nodes (and their cores) that lie in it."""
    sockets: dict[int, dict[int, list[tuple[int, list[int]]]]] = {}
    for node in sorted(machine.get("topology") or [], key=lambda n: n["node_id"]):
        for core in node.get("cores") or []:
            per_node = sockets.setdefault(core["socket_id"], {})
            per_node.setdefault(node["node_id"], []).append((core["core_id"], sorted(core["thread_ids"])))
    return [
        _Socket(sid, [_Node(nid, sorted(cores, key=lambda c: c[1][0])) for nid, cores in sorted(nodes.items())])
        for sid, nodes in sorted(sockets.items())
    ]


def _cpu_style(cpu: int, placement: Placement, owners: dict[int, str], colours) -> tuple[tuple[str, str], str]:
    """(colours, short label) of one logical CPU."""
    if cpu in owners:
        return colours[owners[cpu]], owners[cpu]
    if cpu in placement.reserved:
        return RESERVED, "reserved + shared"
    return SHARED, "shared"


def _node_memory(node_id: int, placement: Placement) -> list[str]:
    return [label for label, nodes in placement.memory.items() if node_id in nodes]


def _size(value: int) -> str:
    return format_quantity(value, BINARY)


def device_lines(machine: dict, node_id: int) -> list[str]:
    """The devices of the machine's device plugins that sit on one NUMA node (machine["devices"]:
    what their ListAndWatch would report as each device's topology), one line per resource."""
    lines = []
    for resource, devices in sorted((machine.get("devices") or {}).items()):
        here = [d["id"] for d in devices if node_id in (d.get("numa_nodes") or [])]
        if here:
            lines.append(f"{resource}: {', '.join(here)}")
    return lines


def memory_lines(machine: dict, node_id: int, placement: Placement) -> list[str]:
    """What one NUMA node has: memory and hugepages (cadvisor), then the Memory Manager's view."""
    node = next((n for n in machine.get("topology") or [] if n["node_id"] == node_id), {})
    pages = [f"hugepages-{_size(h['page_size'] * 1024)}: {h['num_pages']} x {_size(h['page_size'] * 1024)}"
             for h in node.get("hugepages") or [] if h.get("num_pages")]
    lines = [f"memory {_size(node.get('memory', 0))}" + (f"; {', '.join(pages)}" if pages else "")]
    for resource, (allocatable, reserved, free) in sorted((placement.memory_tables.get(node_id) or {}).items()):
        if not allocatable and not reserved:
            continue    # a hugepage size this node has none of
        lines.append(f"{resource}: allocatable {_size(allocatable)}, taken {_size(reserved)}, free {_size(free)}")
    return lines


# -- terminal ------------------------------------------------------------------------------------


def terminal(machine: dict, placement: Placement, title: str = "machine"):
    """A rich renderable: one panel per socket, NUMA nodes inside, one cell per logical CPU."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    owners, colours = placement.owner_of(), placement.colours()
    socket_panels = []
    for socket in layout(machine):
        node_panels = []
        for node in socket.nodes:
            grid = Table.grid(padding=(0, 1))
            row: list[Text] = []
            for core_id, threads in node.cores:
                cell = Text()
                for i, cpu in enumerate(threads):
                    (style, _svg), _label = _cpu_style(cpu, placement, owners, colours)
                    cell.append(f" {cpu:>3} ", style=style)
                    if i < len(threads) - 1:
                        cell.append("|")
                row.append(Text.assemble(("c", "dim"), (f"{core_id}:", "dim"), cell))
                if len(row) == 4:
                    grid.add_row(*row)
                    row = []
            if row:
                grid.add_row(*row)
            memory = _node_memory(node.node_id, placement)
            body = [grid] + [Text(line, style="dim") for line in memory_lines(machine, node.node_id, placement)
                             + device_lines(machine, node.node_id)]
            if memory:
                body.append(Text("memory of: ", style="dim") + Text(", ").join(
                    Text(label, style=colours[label][0]) for label in memory))
            node_panels.append(Panel(Group(*body), title=f"NUMA node {node.node_id}", expand=False))
        socket_panels.append(Panel(Group(*node_panels), title=f"socket {socket.socket_id}", expand=False))
    return Group(Text(title, style="bold"), *socket_panels, legend(placement))


def legend(placement: Placement):
    """One row per container (its colour, its CPUs, where its memory is), then the reserved CPUs."""
    from rich.table import Table
    from rich.text import Text

    colours = placement.colours()
    table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
    table.add_column("")
    table.add_column("who", overflow="fold")
    table.add_column("CPUs")
    table.add_column("memory on NUMA nodes")
    pool = format_cpus(placement.shared_pool)
    shared_cpus = f"shared pool {pool}" if pool else "shared pool"
    for label in colours:
        cpus = placement.exclusive.get(label)
        table.add_row(Text("   ", style=colours[label][0]), label,
                      format_cpus(cpus) + " (exclusive)" if cpus else shared_cpus,
                      format_cpus(placement.memory.get(label, [])) or "any")
    for label in placement.shared:
        if label not in colours:
            table.add_row(Text("   ", style=SHARED[0]), label, shared_cpus, format_cpus(placement.memory.get(label, [])) or "any")
    if not placement.shared:
        table.add_row(Text("   ", style=SHARED[0]), "(no container in the shared pool)", shared_cpus, "")
    if placement.reserved:
        table.add_row(Text("   ", style=RESERVED[0]), "reserved (never exclusive)",
                      format_cpus(placement.reserved) + " (still in the shared pool)", "")
    return table


# -- SVG -----------------------------------------------------------------------------------------

_CELL_W, _CELL_H, _PAD, _HEAD = 34, 22, 8, 20
_CORES_PER_ROW = 8


def svg(machine: dict, placement: Placement, title: str = "machine") -> str:
    """The same picture as a standalone SVG document."""
    owners, colours = placement.owner_of(), placement.colours()
    sockets = layout(machine)
    threads_per_core = max((len(t) for s in sockets for n in s.nodes for _c, t in n.cores), default=1)
    core_w = threads_per_core * _CELL_W + 2 * 3
    core_h = _CELL_H + 14 + 4

    def node_texts(node: _Node) -> list[str]:
        memory = _node_memory(node.node_id, placement)
        return (memory_lines(machine, node.node_id, placement) + device_lines(machine, node.node_id)
                + (["memory of: " + ", ".join(memory)] if memory else []))

    def node_size(node: _Node) -> tuple[int, int]:
        per_row = min(_CORES_PER_ROW, len(node.cores)) or 1
        rows = -(-len(node.cores) // per_row)
        texts = node_texts(node)
        width = max([per_row * (core_w + 4) + 2 * _PAD, 110] + [12 + 6 * len(t) for t in texts])
        return width, rows * (core_h + 4) + _HEAD + 16 * len(texts) + 2 * _PAD

    parts: list[str] = []
    y = 36
    width = 0
    for socket in sockets:
        sizes = [node_size(n) for n in socket.nodes]
        sw = sum(w for w, _h in sizes) + _PAD * (len(sizes) + 1)
        sh = max((h for _w, h in sizes), default=0) + _HEAD + 2 * _PAD
        parts.append(f'<g class="socket" data-socket="{socket.socket_id}">')
        parts.append(_rect(10, y, sw, sh, "#fafafa", "#424242", 2))
        parts.append(_text(18, y + 15, f"socket {socket.socket_id}", weight="bold"))
        x = 10 + _PAD
        for node, (nw, nh) in zip(socket.nodes, sizes):
            ny = y + _HEAD + _PAD
            parts.append(f'<g class="numa-node" data-node="{node.node_id}">')
            parts.append(_rect(x, ny, nw, nh, "#eef3f8", "#5c7080", 1.5))
            parts.append(_text(x + 6, ny + 14, f"NUMA node {node.node_id}", weight="bold"))
            per_row = min(_CORES_PER_ROW, len(node.cores)) or 1
            for index, (core_id, threads) in enumerate(node.cores):
                cx = x + _PAD + (index % per_row) * (core_w + 4)
                cy = ny + _HEAD + _PAD + (index // per_row) * (core_h + 4)
                parts.append(f'<g class="core" data-core="{core_id}">')
                parts.append(_rect(cx, cy, core_w, core_h, "#ffffff", "#9e9e9e", 1))
                parts.append(_text(cx + 3, cy + 11, f"core {core_id}", size=9, fill="#616161"))
                for t, cpu in enumerate(threads):
                    (_style, fill), label = _cpu_style(cpu, placement, owners, colours)
                    tx, ty = cx + 3 + t * _CELL_W, cy + 14
                    ink = "#000000" if fill in ("#d0d0d0", "#f9a825", "#00acc1", "#7cb342") else "#ffffff"
                    parts.append(f'<g class="cpu" data-cpu="{cpu}"><title>CPU {cpu}: {escape(label)}</title>')
                    parts.append(_rect(tx, ty, _CELL_W - 2, _CELL_H, fill, "#424242", 0.5))
                    parts.append(_text(tx + (_CELL_W - 2) / 2, ty + 15, str(cpu), size=11, fill=ink, anchor="middle"))
                    parts.append("</g>")
                parts.append("</g>")
            texts = node_texts(node)
            for i, line in enumerate(texts):
                parts.append(_text(x + 6, ny + nh - 8 - 16 * (len(texts) - 1 - i), line, size=10))
            parts.append("</g>")
            x += nw + _PAD
        parts.append("</g>")
        width = max(width, sw + 20)
        y += sh + 12
    # legend
    entries = [(colours[l][1], f"{l}: " + (f"CPUs {format_cpus(placement.exclusive[l])} exclusive"
                                            if l in placement.exclusive else "shared pool")
                + (f", memory on NUMA {format_cpus(placement.memory[l])}" if l in placement.memory else ""))
               for l in colours]
    if placement.reserved:
        entries.append((RESERVED[1], f"reserved CPUs {format_cpus(placement.reserved)} (also in the shared pool)"))
    pool = f" (CPUs {format_cpus(placement.shared_pool)})" if placement.shared_pool else ""
    entries.append((SHARED[1], f"shared pool{pool}: " + (", ".join(placement.shared) or "no container")))
    parts.append('<g class="legend">')
    for colour, text in entries:
        parts.append(_rect(14, y, 14, 14, colour, "#424242", 0.5))
        parts.append(_text(34, y + 11, text, size=11))
        y += 20
        width = max(width, 40 + 7 * len(text))
    parts.append("</g>")
    height = y + 10
    width = max(width, 20 + 10 * len(title))      # the title (15 px bold) must fit too
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">')
    return "\n".join([head, _rect(0, 0, width, height, "#ffffff", "none", 0),
                      _text(10, 22, title, size=15, weight="bold"), *parts, "</svg>"]) + "\n"


def _rect(x, y, w, h, fill, stroke, stroke_width) -> str:
    return (f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="3" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{stroke_width}"/>')


def _text(x, y, text, size=12, weight="normal", fill="#212121", anchor="start") -> str:
    return (f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" fill="{fill}" '
            f'text-anchor="{anchor}">{escape(str(text))}</text>')
