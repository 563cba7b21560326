"""The garbage collector, reconstructed from pkg/controller/garbagecollector: graph.py (nodes,
absent-owner cache), graph_builder.py (monitors and processGraphChanges), collector.py (the
attemptToDelete / attemptToOrphan workers and their requests)."""

from labkit.controllers.garbagecollector.collector import GarbageCollector

__all__ = ["GarbageCollector"]
