"""Go's encoding/json names the JSON type it could not decode (UnmarshalTypeError.Value): every
error of that kind labkit words reads the same, from one helper (labkit/gojson.py)."""

from __future__ import annotations

import pytest

from labkit.gojson import value_type


@pytest.mark.parametrize("value,name", [(True, "bool"), (3, "number"), (2.5, "number"), ("x", "string"),
                                        ([1], "array"), ({"a": 1}, "object")])
def test_value_type_names_as_encoding_json_does(value, name):
    assert value_type(value) == name


@pytest.mark.parametrize("text,found", [("[1, 2]", "array"), ('"state"', "string"), ("7", "number"), ("true", "bool")])
def test_a_cpu_manager_checkpoint_that_is_not_an_object_names_its_json_type(tmp_path, text, found):
    """json.Unmarshal of a non-object into CPUManagerCheckpoint: kubelet's refusal quotes it (the
    words were "cannot unmarshal value" for every type)."""
    from labkit.numa.checkpoint import CPU_MANAGER_STATE, CheckpointError, read_cpu_checkpoint

    (tmp_path / CPU_MANAGER_STATE).write_text(text)
    with pytest.raises(CheckpointError) as refused:
        read_cpu_checkpoint(tmp_path, "static")
    assert f"json: cannot unmarshal {found} into Go value of type state.CPUManagerCheckpoint" in str(refused.value)


@pytest.mark.parametrize("body,message", [
    ({"gracePeriodSeconds": "30"},
     "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64"),
    ({"orphanDependents": "yes"},
     "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool"),
    ({"propagationPolicy": 1},
     "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy of type v1.DeletionPropagation"),
    ({"preconditions": {"uid": ["u"]}},
     "json: cannot unmarshal array into Go struct field Preconditions.preconditions.uid of type string"),
])
def test_delete_options_of_the_wrong_json_type_are_refused_in_go_words(body, message):
    """(labkit said `str`, `int`, `list`: Python's names.)"""
    from labkit.apiserver.errors import ApiError
    from labkit.apiserver.registry.store import decode_delete_options

    with pytest.raises(ApiError) as refused:
        decode_delete_options(body)
    assert (refused.value.code, refused.value.message) == (400, message)
