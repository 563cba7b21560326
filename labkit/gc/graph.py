"""The owner-reference graph of live objects, as `labkit gc graph` shows it.

Built from what the API serves (list of every listable resource), so it works the same on the
embedded server and on a real cluster. Each object carries its state: being deleted (with
deletionTimestamp), its finalizers, its owner references (controller, blockOwnerDeletion).
Owners that are referenced but absent become *virtual* nodes, as in the garbage collector's
own graph (pkg/controller/garbagecollector/graph_builder.go, processGraphChanges: "if the owner
doesn't exist in the graph yet, create a virtual node"). An owner found only in another
namespace is shown virtual too, with that namespace named: the GC looks owners up in the
dependent's namespace (an owner reference has no namespace field), so for it such an owner is
absent (graph_builder.go, addDependentToOwners: OwnerRefInvalidNamespace).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labkit.apiserver.errors import ApiError

SKIPPED = {("", "events"), ("events.k8s.io", "events")}


@dataclass
class Node:
    uid: str
    api_version: str
    kind: str
    name: str
    namespace: str | None
    deleting: str | None = None          # deletionTimestamp
    finalizers: list = field(default_factory=list)
    owners: list = field(default_factory=list)     # ownerReferences as served
    virtual: bool = False
    elsewhere: str | None = None         # a virtual owner that exists in this other namespace
    dependents: list = field(default_factory=list)  # (uid, ownerReference) of each dependent
    gc: dict | None = None               # the embedded GC's own node (beingDeleted, deletingDependents, virtual)

    @property
    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    def state(self) -> list[str]:
        out = []
        if self.virtual:
            out.append(f"virtual: referenced but absent{' (exists in namespace ' + self.elsewhere + ')' if self.elsewhere else ''}")
        if self.deleting:
            out.append(f"deleting since {self.deleting}")
        if self.finalizers:
            out.append("finalizers: " + ", ".join(self.finalizers))
        if self.gc:
            flags = [f for f in ("deletingDependents", "beingDeleted") if self.gc.get(f)]
            if self.gc.get("virtual") and not self.virtual:
                flags.append("virtual")
            if flags:
                out.append("GC: " + ", ".join(flags))
        return out

    def as_dict(self) -> dict:
        return {"uid": self.uid, "apiVersion": self.api_version, "kind": self.kind, "name": self.name,
                "namespace": self.namespace, "virtual": self.virtual, "elsewhere": self.elsewhere,
                "deletionTimestamp": self.deleting, "finalizers": self.finalizers, "ownerReferences": self.owners,
                "dependents": [uid for uid, _ in self.dependents], "gc": self.gc}


def _resources(client):
    found = client.discover()
    for r in found.resources:
        if found.preferred.get(r.group) != r.version or "list" not in r.verbs or (r.group, r.resource) in SKIPPED:
            continue
        yield r


def gc_view(client) -> dict[str, dict]:
    """The embedded garbage collector's own graph nodes by uid (its admin API, /labkit/v1), or {}
    where there is none (a real cluster, or the GC stopped)."""
    try:
        code, body = client.request("GET", "/labkit/v1/garbagecollector/graph")
    except OSError:
        return {}
    if code != 200 or not isinstance(body, dict):
        return {}
    return {n["identity"]["uid"]: n for n in body.get("nodes") or []}


def collect(client, namespace: str | None = None, gc: dict[str, dict] | None = None) -> dict[str, Node]:
    """Every object (of `namespace`, or all), plus virtual nodes for absent owners, by uid; with
    `gc` (gc_view), each node also carries what the garbage collector's graph says of it."""
    nodes: dict[str, Node] = {}
    everywhere: dict[str, dict] = {}
    for r in _resources(client):
        if namespace and not r.namespaced and r.resource != "namespaces":
            continue
        try:
            items, _ = client.list(r.api_version, r.resource, namespace if r.namespaced else None)
        except ApiError:
            continue
        for obj in items:
            meta = obj.get("metadata") or {}
            if r.resource == "namespaces" and namespace and meta.get("name") != namespace:
                continue
            node = Node(meta.get("uid", ""), r.api_version, r.kind, meta.get("name", ""), meta.get("namespace"),
                        meta.get("deletionTimestamp"), list(meta.get("finalizers") or []),
                        list(meta.get("ownerReferences") or []))
            nodes[node.uid] = node
    if namespace:   # where does a reference to an object outside the namespace point?
        wanted = {ref.get("uid") for n in nodes.values() for ref in n.owners} - set(nodes)
        if wanted:
            for r in _resources(client):
                if not r.namespaced:
                    continue
                try:
                    items, _ = client.list(r.api_version, r.resource)
                except ApiError:
                    continue
                for obj in items:
                    if obj["metadata"].get("uid") in wanted:
                        everywhere[obj["metadata"]["uid"]] = obj["metadata"]
    for node in list(nodes.values()):
        for ref in node.owners:
            uid = ref.get("uid", "")
            owner = nodes.get(uid)
            if owner is not None and owner.namespace and owner.namespace != node.namespace:
                owner = None            # the GC does not see it from here
            if owner is None:
                key = f"{uid}@{node.namespace or ''}"
                owner = nodes.get(key)
                if owner is None:
                    elsewhere = (nodes[uid].namespace if uid in nodes else
                                 everywhere.get(uid, {}).get("namespace"))
                    owner = nodes[key] = Node(uid, ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""),
                                              node.namespace, virtual=True, elsewhere=elsewhere)
            owner.dependents.append((node.uid, ref))
    for node in nodes.values():
        if gc and node.uid in gc:
            node.gc = gc[node.uid]
    return nodes


def _key(node: Node) -> str:
    return node.uid if not node.virtual else f"{node.uid}@{node.namespace or ''}"


def interesting(node: Node, nodes: dict[str, Node]) -> bool:
    return bool(node.owners or node.dependents or node.deleting or node.finalizers)


def render_text(nodes: dict[str, Node], all_objects: bool = True) -> str:
    """A tree per root (an object without owners, or a virtual owner); dependents indented below
    their owners, each edge marked with its controller / blockOwnerDeletion flags."""
    shown = {k: n for k, n in nodes.items() if all_objects or interesting(n, nodes)}
    roots = sorted((n for n in shown.values() if not n.owners),
                   key=lambda n: (n.namespace or "", n.virtual, n.kind, n.name))
    lines: list[str] = []

    def edge(ref: dict) -> str:
        flags = [f for f in ("controller", "blockOwnerDeletion") if ref.get(f)]
        return f" ({', '.join(flags)})" if flags else ""

    def walk(node: Node, prefix: str, last: bool, ref: dict | None, path: set, top: bool) -> None:
        state = node.state()
        text = f"{node.label}  uid={node.uid[:8]}" + (f"  [{'; '.join(state)}]" if state else "")
        if top:
            lines.append(text)
            child_prefix = ""
        else:
            lines.append(f"{prefix}{'└─' if last else '├─'} {text}{edge(ref)}")
            child_prefix = prefix + ("   " if last else "│  ")
        if _key(node) in path:
            lines.append(f"{child_prefix}└─ … (cycle)")
            return
        deps = sorted(((nodes[uid], r) for uid, r in node.dependents if uid in nodes),
                      key=lambda d: (d[0].kind, d[0].name))
        for i, (dep, r) in enumerate(deps):
            walk(dep, child_prefix, i == len(deps) - 1, r, path | {_key(node)}, False)

    for root in roots:
        walk(root, "", True, None, set(), True)
    # objects that only sit in cycles have no root: show each cycle once
    reached = set()
    for line_owner in roots:
        stack = [line_owner]
        while stack:
            n = stack.pop()
            if _key(n) in reached:
                continue
            reached.add(_key(n))
            stack += [nodes[uid] for uid, _ in n.dependents if uid in nodes]
    for node in sorted(shown.values(), key=lambda n: (n.namespace or "", n.kind, n.name)):
        if _key(node) not in reached:
            walk(node, "", True, None, set(), True)
            stack = [node]
            while stack:
                n = stack.pop()
                if _key(n) not in reached:
                    reached.add(_key(n))
                    stack += [nodes[uid] for uid, _ in n.dependents if uid in nodes]
    return "\n".join(lines) + ("\n" if lines else "(no objects)\n")


def _quote(text: str) -> str:
    """A DOT string: quotes and backslashes escaped, so nothing in `text` is read as an escape."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lines(parts: list[str]) -> str:
    """A DOT label of several lines: each part quoted on its own, joined by DOT's line break."""
    return '"' + "\\n".join(_quote(part)[1:-1] for part in parts) + '"'


def render_dot(nodes: dict[str, Node], all_objects: bool = True) -> str:
    """Graphviz: an arrow from each dependent to its owner (as ownerReferences point); dashed
    boxes for virtual owners, red for objects being deleted, finalizers under the name."""
    shown = {k: n for k, n in nodes.items() if all_objects or interesting(n, nodes)}
    out = ["digraph owners {", "  rankdir=BT;", '  node [shape=box, fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=9];']
    for key, node in sorted(shown.items()):
        attrs = [f"label={_lines([node.label, f'uid {node.uid[:8]}'] + node.state())}"]
        if node.virtual:
            attrs.append('style=dashed, color="gray40"')
        elif node.deleting:
            attrs.append('color="red", fontcolor="red"')
        out.append(f"  {_quote(key)} [{', '.join(attrs)}];")
    for key, node in sorted(shown.items()):
        for uid, ref in node.dependents:
            if uid not in shown:
                continue
            flags = [f for f in ("controller", "blockOwnerDeletion") if ref.get(f)]
            label = f' [label={_quote(", ".join(flags))}]' if flags else ""
            out.append(f"  {_quote(uid)} -> {_quote(key)}{label};")
    out.append("}")
    return "\n".join(out) + "\n"
