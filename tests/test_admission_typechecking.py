"""status.typeChecking of ValidatingAdmissionPolicies: the type checker
(labkit.apiserver.admission.typechecking, upstream typechecking.go TypeChecker.Check) and the
status controller that writes its warnings (labkit.controllers.vapstatus,
pkg/controller/validatingadmissionpolicystatus), seen through real kubectl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from labkit.apiserver.admission import typechecking
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.server import EmbeddedServer
from labkit.apiserver.storage import Store
from support import host_lock, wait_until


def policy(*validations, resources=("deployments",), groups=("apps",), param_kind=None) -> dict:
    spec = {"matchConstraints": {"resourceRules": [{"apiGroups": list(groups), "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": list(resources)}]},
            "validations": [dict(v) for v in validations]}
    if param_kind:
        spec["paramKind"] = param_kind
    return {"metadata": {"name": "p"}, "spec": spec}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return Registry(Store(tmp_path_factory.mktemp("tc") / "objects.db")).catalog


def test_an_undefined_field_is_warned_about_per_kind_as_cel_go_prints_it(catalog):
    warnings = typechecking.check(policy({"expression": "object.replicas > 1"},
                                         resources=("deployments", "replicasets")), catalog)
    issue = "ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n"
    assert warnings == [{"fieldRef": "spec.validations[0].expression",
                         "warning": f"apps/v1, Kind=Deployment: {issue}\napps/v1, Kind=ReplicaSet: {issue}"}]


def test_fields_of_the_schema_pass_and_params_are_typed_by_the_param_kind(catalog):
    good = policy({"expression": "object.spec.replicas <= int(params.data.max) && "
                                 "object.spec.template.spec.containers.all(c, has(c.image)) && "
                                 "object.metadata.labels.app == 'web' && object.spec.?strategy.hasValue()",
                   "messageExpression": "'too many: ' + string(object.spec.replicas)"},
                  param_kind={"apiVersion": "v1", "kind": "ConfigMap"})
    assert typechecking.check(good, catalog) == []
    bad = policy({"expression": "object.spec.replicas > 0", "messageExpression": "params.dat.max"},
                 param_kind={"apiVersion": "v1", "kind": "ConfigMap"})
    assert typechecking.check(bad, catalog) == [{
        "fieldRef": "spec.validations[0].messageExpression",
        "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'dat'\n | params.dat.max\n"
                   " | ......^\n"}]


def test_wildcards_and_unknown_resources_are_not_checked(catalog):
    assert typechecking.check(policy({"expression": "object.nope"}, groups=("*",)), catalog) == []
    assert typechecking.check(policy({"expression": "object.nope"}, resources=("deployments/scale",)), catalog) == []
    assert typechecking.check(policy({"expression": "object.nope"}, resources=("widgets",)), catalog) == []


def test_the_column_and_line_of_a_multi_line_expression(catalog):
    expression = "object.spec.replicas > 1 &&\n  object.spec.replicaz < 5"
    [warning] = typechecking.check(policy({"expression": expression}), catalog)
    assert warning["warning"] == ("apps/v1, Kind=Deployment: ERROR: <input>:2:14: undefined field 'replicaz'\n"
                                  " |   object.spec.replicaz < 5\n | .............^\n")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_the_warnings_in_the_policys_status(tmp_path):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=["validatingadmissionpolicy-status"]).start()
    env = {**os.environ, "KUBECONFIG": str(srv.kubeconfig), "HOME": str(tmp_path)}

    def kubectl(*args, input=None):
        return subprocess.run(["kubectl", *args], capture_output=True, text=True, input=input, env=env, timeout=60,
                              check=True).stdout
    try:
        body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                **policy({"expression": "object.replicas > 1"})}
        kubectl("apply", "-f", "-", input=json.dumps(body))

        def status():
            got = json.loads(kubectl("get", "validatingadmissionpolicy", "p", "-o", "json"))
            return got.get("status") if (got.get("status") or {}).get("observedGeneration") == \
                got["metadata"]["generation"] else None
        assert wait_until(status, timeout=20)
        assert status()["typeChecking"]["expressionWarnings"] == [{
            "fieldRef": "spec.validations[0].expression",
            "warning": "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'replicas'\n"
                       " | object.replicas > 1\n | ......^\n"}]
        # fixed: a new generation, checked again, no warnings
        body["spec"]["validations"][0]["expression"] = "object.spec.replicas > 1"
        kubectl("apply", "-f", "-", input=json.dumps(body))
        assert wait_until(lambda: (status() or {}).get("observedGeneration") == 2, timeout=20)
        assert status() == {"observedGeneration": 2, "typeChecking": {}}
    finally:
        with host_lock(False):
            srv.stop()
