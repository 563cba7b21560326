"""labkit/jsondata.py json_copy: a deep copy of JSON data that shares no mutable part with it."""

from __future__ import annotations

import copy

from labkit.jsondata import json_copy


def _mutable_ids(value, out=None) -> set[int]:
    out = set() if out is None else out
    if isinstance(value, dict):
        out.add(id(value))
        for item in value.values():
            _mutable_ids(item, out)
    elif isinstance(value, list):
        out.add(id(value))
        for item in value:
            _mutable_ids(item, out)
    return out


def test_a_copy_equals_the_data_and_shares_no_dict_or_list():
    data = {"metadata": {"name": "web", "labels": {"app": "web"}, "generation": 3, "deletionGracePeriodSeconds": None},
            "spec": {"replicas": 2, "paused": False, "ratio": 0.5,
                     "containers": [{"name": "app", "args": ["-v", "2"], "ports": [{"containerPort": 80}]}]},
            "items": [[1, 2], [], {}]}
    copied = json_copy(data)
    assert copied == data == copy.deepcopy(data)
    assert not _mutable_ids(copied) & _mutable_ids(data)
    copied["spec"]["containers"][0]["args"].append("x")
    assert data["spec"]["containers"][0]["args"] == ["-v", "2"]


def test_other_values_are_deep_copied():
    data = {"pair": (1, [2]), "set": {3}}
    copied = json_copy(data)
    assert copied == data
    assert copied["pair"][1] is not data["pair"][1]
    assert copied["set"] is not data["set"]
