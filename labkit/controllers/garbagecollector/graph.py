"""The garbage collector's dependency graph (pkg/controller/garbagecollector/graph.go) and its
absent-owner cache (uid_cache.go / absent_owner_cache.go)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class ObjectReference:
    """objectReference: an owner reference's coordinates plus the namespace."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, name: {self.name}, uid: {self.uid}]"

    def as_dict(self) -> dict:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace,
                "name": self.name, "uid": self.uid}

    def with_namespace(self, namespace: str) -> "ObjectReference":
        return ObjectReference(self.api_version, self.kind, self.name, self.uid, namespace)


def coordinates(ref: dict, namespace: str = "") -> ObjectReference:
    """ownerReferenceCoordinates: uid, name, kind, apiVersion of an ownerReference."""
    return ObjectReference(ref.get("apiVersion", ""), ref.get("kind", ""), ref.get("name", ""),
                           ref.get("uid", ""), namespace)


def matches_coordinates(ref: dict, identity: ObjectReference) -> bool:
    return (ref.get("uid") == identity.uid and ref.get("name") == identity.name and
            ref.get("kind") == identity.kind and ref.get("apiVersion") == identity.api_version)


class Node:
    """One object (or a virtual owner never observed) in the graph. Nodes are compared by
    identity, as the Go code compares *node pointers."""

    def __init__(self, identity: ObjectReference, owners: list[dict] | None = None, virtual: bool = False,
                 being_deleted: bool = False, deleting_dependents: bool = False):
        self.identity = identity
        self.owners: list[dict] = list(owners or [])
        self.dependents: set[Node] = set()
        self.virtual = virtual
        self.being_deleted = being_deleted
        self.deleting_dependents = deleting_dependents
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Node({self.identity})"

    def clone(self) -> "Node":
        c = Node(self.identity, self.owners, self.virtual, self.being_deleted, self.deleting_dependents)
        c.dependents = set(self.get_dependents())
        return c

    def add_dependent(self, dependent: "Node") -> None:
        with self._lock:
            self.dependents.add(dependent)

    def delete_dependent(self, dependent: "Node") -> None:
        with self._lock:
            self.dependents.discard(dependent)

    def replace_dependent_if_exists(self, old: "Node", new: "Node") -> None:
        with self._lock:
            if old in self.dependents:
                self.dependents.discard(old)
                self.dependents.add(new)

    def get_dependents(self) -> list["Node"]:
        with self._lock:
            return list(self.dependents)

    def dependents_length(self) -> int:
        with self._lock:
            return len(self.dependents)

    def blocking_dependents(self) -> list["Node"]:
        """Dependents whose reference to this node has blockOwnerDeletion: true."""
        blocking = []
        for dep in self.get_dependents():
            for owner in dep.owners:
                if owner.get("uid") == self.identity.uid and owner.get("blockOwnerDeletion") is True:
                    blocking.append(dep)
        return blocking


class ReferenceCache:
    """An LRU set of object references known not to exist (absentOwnerCache, 500 entries)."""

    def __init__(self, size: int = 500):
        self.size = size
        self._entries: OrderedDict[ObjectReference, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, ref: ObjectReference) -> None:
        with self._lock:
            self._entries[ref] = None
            self._entries.move_to_end(ref)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def has(self, ref: ObjectReference) -> bool:
        with self._lock:
            if ref in self._entries:
                self._entries.move_to_end(ref)
                return True
            return False

    def __len__(self) -> int:
        return len(self._entries)
