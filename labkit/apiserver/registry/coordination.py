"""coordination.k8s.io/v1: Leases (pkg/registry/coordination/lease/strategy.go).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.resources import Strategy


class LeaseStrategy(Strategy):
    printer = tables.PRINTERS["Lease"]
