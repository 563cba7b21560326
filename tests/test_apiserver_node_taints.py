"""Node taints are validated as kube-apiserver v1.34 validates them (pkg/apis/core/validation/
validation.go validateNodeTaints, called by ValidateNode and again by ValidateNodeUpdate, at the
path metadata.taints): a misspelt effect sent by `kubectl patch` or `kubectl edit` is refused, not
stored (a Node with effect PreferNoSchedul was stored and the scheduler lab's check passed on it)."""

from __future__ import annotations

import pytest

from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store


@pytest.fixture
def client(tmp_path):
    admin = LocalClient(Api(Registry(Store(tmp_path / "objects.db"))), "admin", ["system:masters"])
    admin.create("v1", "nodes", {"metadata": {"name": "node-f"},
                                 "spec": {"taints": [{"key": "retiring", "value": "yes", "effect": "NoSchedule"}]}})
    return admin


def patch_taints(client, taints):
    return client.patch("v1", "nodes", "node-f", {"spec": {"taints": taints}}, patch_type="merge")


def refusal(client, taints) -> str:
    with pytest.raises(ApiError) as caught:
        patch_taints(client, taints)
    assert caught.value.code == 422
    return caught.value.message


def test_a_misspelt_effect_is_refused_twice_as_validate_node_and_validate_node_update_both_say_it(client):
    one = ('metadata.taints[0].effect: Unsupported value: "PreferNoSchedul": supported values: "NoSchedule", '
           '"PreferNoSchedule", "NoExecute"')
    assert refusal(client, [{"key": "retiring", "value": "yes", "effect": "PreferNoSchedul"}]) == \
        f'Node "node-f" is invalid: [{one}, {one}]'
    assert client.get("v1", "nodes", "node-f")["spec"]["taints"][0]["effect"] == "NoSchedule"


def test_a_node_created_with_a_bad_taint_is_refused_once(client):
    with pytest.raises(ApiError) as caught:
        client.create("v1", "nodes", {"metadata": {"name": "node-g"}, "spec": {"taints": [{"key": "a"}]}})
    assert caught.value.message == 'Node "node-g" is invalid: metadata.taints[0].effect: Required value'


def test_key_value_and_duplicates(client):
    message = refusal(client, [{"key": "retiring", "value": "yes", "effect": "PreferNoSchedule"},
                               {"key": "retiring", "value": "no", "effect": "PreferNoSchedule"},
                               {"key": "bad key", "value": "ok", "effect": "NoExecute"}])
    duplicate = ('metadata.taints[1]: Duplicate value: core.Taint{Key:"retiring", Value:"no", '
                 'Effect:"PreferNoSchedule", TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair')
    assert duplicate in message
    assert 'metadata.taints[2].key: Invalid value: "bad key": name part must consist of alphanumeric' in message


def test_the_same_key_with_two_effects_is_allowed(client):
    taints = [{"key": "retiring", "value": "yes", "effect": "PreferNoSchedule"},
              {"key": "retiring", "value": "yes", "effect": "NoSchedule"}]
    assert patch_taints(client, taints)["spec"]["taints"] == taints
