"""The mount-propagation checks' comparison of a Pod with the shipped one (spec_changes), in-process:
a field set to 0 is a change (runAsUser: 0 asks for root), as much as any other value."""

from test_namespace_judging import checks

SHIPPED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "csi-node"},
           "spec": {"containers": [{"name": "plugin", "image": "i", "securityContext": {"privileged": False}}]}}


def _with(**security) -> dict:
    pod = {**SHIPPED, "spec": {"containers": [{"name": "plugin", "image": "i", "securityContext": security}]}}
    return pod


def test_a_zero_is_a_change_and_false_or_empty_is_not():
    spec_changes = checks("mount-propagation").spec_changes
    allowed = {"spec.containers[].securityContext.privileged"}
    assert spec_changes(_with(privileged=True, runAsUser=0), SHIPPED, allowed) == \
        ["spec.containers[0].securityContext.runAsUser"]
    assert spec_changes(_with(privileged=True, runAsNonRoot=False, seLinuxOptions={}), SHIPPED, allowed) == []
