"""discovery.k8s.io/v1: EndpointSlices (pkg/registry/discovery/endpointslice/strategy.go).
"""

from __future__ import annotations

from labkit.apiserver import tables
from labkit.apiserver.errors import field_required, field_unsupported
from labkit.apiserver.resources import Strategy
from labkit.apiserver.registry.core import _immutable


class EndpointSliceStrategy(Strategy):
    """pkg/registry/discovery/endpointslice: addressType is required and immutable."""

    printer = tables.PRINTERS["EndpointSlice"]

    def validate(self, obj):
        kind = obj.get("addressType")
        if not kind:
            return [field_required("addressType")]
        if kind not in ("IPv4", "IPv6", "FQDN"):
            return [field_unsupported("addressType", kind, ["FQDN", "IPv4", "IPv6"])]
        return []

    def validate_update(self, new, old):
        return self.validate(new) + _immutable(new, old, "addressType")
