"""The requests lab's feedback when a binding names the exercise's user or ServiceAccount in
another case: RBAC compares names as they are (rule.go appliesToUser), and the feedback says so
with the name the prompt gives, nothing more."""

from __future__ import annotations

from labkit.labs import load_lab
from support import REPO


def _binding(kind, name, **subject):
    return {"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "dev"},
            "roleRef": {"kind": "ClusterRole", "name": "view"}, "subjects": [{"kind": kind, "name": name, **subject}]}


def test_a_subject_that_differs_only_in_case_is_named():
    checks = load_lab(REPO / "labs" / "requests")._load("checks.py")
    assert checks._case_note([_binding("User", "Alice")], "User", "alice") == (
        ". The RoleBinding dev/b (of the ClusterRole view) names the user Alice, not alice: names are case-sensitive")
    assert "names the ServiceAccount REPORTER, not reporter" in checks._case_note(
        [_binding("ServiceAccount", "REPORTER", namespace="shop")], "ServiceAccount", "reporter")
    # the right name, another name, or a group of that name: nothing to say
    for rbac in ([_binding("User", "alice")], [_binding("User", "bob")], [_binding("Group", "Alice")], [{"kind": "Role"}]):
        assert checks._case_note(rbac, "User", "alice") == ""
