"""Strict field validation of the objects labkit's own commands read (labkit/strict.py), in the
words of kube-apiserver v1.34 under kubectl's default fieldValidation=Strict."""

import pytest

from labkit import strict

SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: a
  name: b
spec:
  sessionAfinity: ClientIP
  ports:
  - port: 80
    prot: 3
"""


def test_duplicates_and_unknown_fields_are_listed_in_the_order_they_occur():
    with pytest.raises(strict.StrictDecodingError) as err:
        strict.load_strict(SERVICE, "svc.yaml")
    assert str(err.value) == (
        'Error from server (BadRequest): error when creating "svc.yaml": Service in version "v1" cannot be '
        'handled as a Service: strict decoding error: duplicate field "metadata.name", '
        'unknown field "spec.sessionAfinity", unknown field "spec.ports[0].prot"')


def test_a_pod_level_field_that_belongs_to_the_container_is_unknown():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"privileged": True, "containers": [{"name": "c", "image": "i", "volumeMounts": [
               {"name": "v", "mountPath": "/x", "mountPropagaton": "Bidirectional"}]}]}}
    assert strict.field_problems(pod) == [
        'unknown field "spec.privileged"', 'unknown field "spec.containers[0].volumeMounts[0].mountPropagaton"']


def test_a_value_of_the_wrong_type_gets_the_decoder_message():
    with pytest.raises(strict.StrictDecodingError, match=r"json: cannot unmarshal string into Go struct field "
                                                        r"ServicePort.spec.ports.port of type int32"):
        strict.load_strict("apiVersion: v1\nkind: Service\nspec: {ports: [{port: x}]}\n", "s.yaml")


def test_list_items_are_checked_one_by_one_and_a_correct_object_passes():
    text = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: ok}\n"
            "- apiVersion: v1\n  kind: Service\n  metadata: {name: bad, nmae: x}\n")
    with pytest.raises(strict.StrictDecodingError, match=r'unknown field "metadata.nmae"$'):
        strict.load_strict(text, "list.yaml")
    assert strict.load_strict("apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n", "s.yaml")[0]["metadata"] == {"name": "ok"}


def test_kinds_without_a_schema_are_checked_for_duplicates_only():
    text = "apiVersion: example.com/v1\nkind: Backup\nspec: {anything: 1, anything: 2}\n"
    with pytest.raises(strict.StrictDecodingError, match=r'duplicate field "spec.anything"$'):
        strict.load_strict(text, "b.yaml")


def test_a_text_checked_before_is_not_parsed_again_and_each_caller_gets_its_own_documents(monkeypatch):
    text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: kept\nspec:\n  ports:\n  - port: 80\n"
    first = strict.load_strict(text, "kept.yaml")
    first[0]["metadata"]["name"] = "changed by its caller"
    with pytest.raises(strict.StrictDecodingError) as err:
        strict.load_strict(SERVICE, "svc.yaml")

    def parsed_again(*args, **kwargs):
        raise AssertionError("parsed again")
    monkeypatch.setattr(strict.yaml, "safe_load_all", parsed_again)
    monkeypatch.setattr(strict.yaml, "compose_all", parsed_again)
    again = strict.load_strict(text, "kept.yaml")
    assert again[0]["metadata"]["name"] == "kept" and again is not first
    with pytest.raises(strict.StrictDecodingError) as err_again:      # refused again, in the same words
        strict.load_strict(SERVICE, "svc.yaml")
    assert str(err_again.value) == str(err.value)
