"""events.k8s.io/v1: a view of core Events (pkg/registry/core/event; pkg/apis/events/v1).
"""

from __future__ import annotations

from labkit.apiserver.errors import field_required, field_unsupported
from labkit.apiserver.registry.core import EventStrategy


# -- events.k8s.io/v1: a view of core Events ------------------------------------------------------

# (core/v1 field, events.k8s.io/v1 field): pkg/apis/events/v1/conversion.go
EVENT_FIELDS = (("involvedObject", "regarding"), ("message", "note"), ("source", "deprecatedSource"),
                ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
                ("count", "deprecatedCount"), ("reportingComponent", "reportingController"))


def event_core_to_events(obj: dict) -> dict:
    out = {("%s" % dict(EVENT_FIELDS).get(k, k)): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def event_events_to_core(obj: dict) -> dict:
    back = {v: k for k, v in EVENT_FIELDS}
    out = {back.get(k, k): v for k, v in obj.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Events: what a new-style event must carry (ValidateEventCreate)."""

    def validate(self, obj):
        errors = []
        for core, shown in (("eventTime", "eventTime"), ("reportingComponent", "reportingController"),
                            ("reportingInstance", "reportingInstance"), ("action", "action"), ("reason", "reason")):
            if not obj.get(core):
                errors.append(field_required(shown))
        if obj.get("type") not in ("Normal", "Warning"):
            errors.append(field_unsupported("type", obj.get("type", ""), ["Normal", "Warning"]))
        return errors
