"""authentication.k8s.io/v1 TokenReview served, and the reviews going through admission.

Expected values from kubernetes v1.34: pkg/registry/authentication/tokenreview/storage.go
(REST.Create), staging/src/k8s.io/apiserver/pkg/authentication/authenticator/audiences.go
(WrapAudienceAgnosticToken), pkg/serviceaccount/jwt.go (the audience error),
pkg/registry/authorization/*/rest.go (createValidation).
"""

from __future__ import annotations

import json
import shutil

import pytest

from labkit.apiserver.authn import ISSUER
from labkit.apiserver.errors import ApiError
from support import embedded_server, kubectl

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home"),
                         controllers=["serviceaccount"]) as srv:
        yield srv


def review(server, spec: dict) -> dict:
    """kubectl create -f of a TokenReview, its answer as JSON."""
    doc = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    result = kubectl(server, "create", "-f", "-", "-o", "json", input=json.dumps(doc))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["status"]


def token(server, *args) -> str:
    result = kubectl(server, "create", "token", "default", "-n", "default", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_service_account_token_is_reviewed(server):
    status = review(server, {"token": token(server)})
    assert status["authenticated"] is True
    assert status["audiences"] == [ISSUER]
    user = status["user"]
    assert user["username"] == "system:serviceaccount:default:default"
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert user["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")


def test_audiences(server):
    for_vault = token(server, "--audience", "vault")
    status = review(server, {"token": for_vault, "audiences": ["vault", "other"]})
    assert status["authenticated"] is True and status["audiences"] == ["vault"]
    status = review(server, {"token": for_vault})      # the API audiences
    assert "authenticated" not in status
    assert status["error"] == f'token audiences ["vault"] is invalid for the target audiences ["{ISSUER}"]'


def test_bad_tokens(server):
    assert review(server, {"token": "not-a-token"}) == {"user": {}, "error": "invalid bearer token"}
    # the static token file answers only for the API audiences (WrapAudienceAgnosticToken)
    admin = review(server, {"token": server.token})
    assert admin["authenticated"] is True and admin["audiences"] == [ISSUER]
    assert review(server, {"token": server.token, "audiences": ["vault"]})["error"] == "invalid bearer token"
    with pytest.raises(ApiError) as info:
        server.client().create("authentication.k8s.io/v1", "tokenreviews",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})
    assert (info.value.code, info.value.message) == (400, "token is required for TokenReview in authentication")


def test_reviews_go_through_admission(server):
    """A ValidatingAdmissionPolicy on tokenreviews and selfsubjectaccessreviews refuses them: the
    REST's createValidation runs the validating phase although nothing is stored."""
    client = server.client()
    client.create("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", {
        "metadata": {"name": "no-reviews"}, "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [
                {"operations": ["CREATE"], "apiGroups": ["authentication.k8s.io", "authorization.k8s.io"],
                 "apiVersions": ["v1"], "resources": ["tokenreviews", "selfsubjectaccessreviews"]}]},
            "validations": [{"expression": "false", "message": "no reviews here"}]}})
    client.create("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", {
        "metadata": {"name": "no-reviews"}, "spec": {"policyName": "no-reviews", "validationActions": ["Deny"]}})
    try:
        denied = ""
        for _ in range(50):     # the policy is read when it is used
            result = kubectl(server, "auth", "can-i", "get", "pods")
            denied = result.stderr
            if "no reviews here" in denied:
                break
        assert "ValidatingAdmissionPolicy 'no-reviews' with binding 'no-reviews' denied request: no reviews here" \
            in denied
        with pytest.raises(ApiError) as info:
            client.create("authentication.k8s.io/v1", "tokenreviews",
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                           "spec": {"token": "x"}})
        # a validation without a reason is Invalid (422), the message admission.NewForbidden's
        assert (info.value.code, info.value.message) == (
            422, 'tokenreviews.authentication.k8s.io "Unknown" is forbidden: ValidatingAdmissionPolicy '
                 "'no-reviews' with binding 'no-reviews' denied request: no reviews here")
    finally:
        client.delete("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "no-reviews")
        client.delete("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "no-reviews")
