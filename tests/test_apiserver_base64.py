"""Go's base64 error where the API server decodes a `[]byte` field, read by real kubectl: a
Secret's data, a ConfigMap's binaryData, a CSR's request, a webhook's and an APIService's
caBundle (encoding/base64 CorruptInputError through the JSON decoder, wrapped by
handlers/create.go transformDecodeError)."""

from __future__ import annotations

import functools
import shutil

import pytest

import support
from support import embedded_server

from labkit.apiserver import gobase64

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

kubectl = functools.partial(support.kubectl, check=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home"),
                         controllers=[]) as srv:
        yield srv


# encoding/base64/base64_test.go TestDecodeCorrupt: input, offset of the error (-1: none)
GO_CORRUPT = [("", -1), ("\n", -1), ("AAA=\n", -1), ("AAAA\n", -1), ("!!!!", 0), ("====", 0), ("x===", 1),
              ("=AAA", 0), ("A=AA", 1), ("AA=A", 2), ("AA==A", 4), ("AAA=AAAA", 4), ("AAAAA", 4), ("AAAAAA", 4),
              ("A=", 1), ("A==", 1), ("AA=", 3), ("AA==", -1), ("AAA=", -1), ("AAAA", -1), ("AAAAAA=", 7),
              ("YWJjZA=====", 8), ("A!\n", 1), ("A=\n", 1)]


@pytest.mark.parametrize("text,offset", GO_CORRUPT)
def test_go_decoder_offsets(text, offset):
    if offset < 0:
        gobase64.decode(text)
    else:
        with pytest.raises(gobase64.CorruptInputError) as e:
            gobase64.decode(text)
        assert str(e.value) == f"illegal base64 data at input byte {offset}"


def test_valid_values_are_stored_as_go_encodes_them(server):
    c = server.client()
    c.create("v1", "namespaces", {"metadata": {"name": "b64"}})
    secret = c.create("v1", "secrets", {"metadata": {"name": "s"}, "data": {"k": "aGVs\nbG8="}}, "b64")
    assert secret["data"] == {"k": "aGVsbG8="}


CASES = {
    "Secret": ("apiVersion: v1\nkind: Secret\nmetadata: {name: bad, namespace: default}\n"
               "data: {password: czNjcmV0}\n", 'Secret in version "v1" cannot be handled as a Secret: '
               "illegal base64 data at input byte 4"),
    "ConfigMap": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: default}\n"
                  "binaryData: {blob: 'AAAA!AAA'}\n", 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                  "illegal base64 data at input byte 4"),
    "CertificateSigningRequest": (
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata: {name: bad}\n"
        "spec: {request: 'LS0tLS0tLS', signerName: kubernetes.io/kube-apiserver-client, usages: [client auth]}\n",
        'CertificateSigningRequest in version "v1" cannot be handled as a CertificateSigningRequest: '
        "illegal base64 data at input byte 8"),
    "ValidatingWebhookConfiguration": (
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: bad}\n"
        "webhooks:\n- name: a.example.com\n  clientConfig: {url: 'https://127.0.0.1:1/', caBundle: 'Y2E'}\n"
        "  sideEffects: None\n  admissionReviewVersions: [v1]\n",
        'ValidatingWebhookConfiguration in version "v1" cannot be handled as a ValidatingWebhookConfiguration: '
        "illegal base64 data at input byte 0"),
    "APIService": (
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.bad.example.com}\n"
        "spec: {group: bad.example.com, version: v1, groupPriorityMinimum: 1, versionPriority: 1,\n"
        "  service: {name: s, namespace: default}, caBundle: 'Y2E=Y2E='}\n",
        'APIService in version "v1" cannot be handled as a APIService: illegal base64 data at input byte 4'),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_kubectl_reads_go_base64_error(server, kind):
    manifest, message = CASES[kind]
    # data: {password: czNjcmV0} is fine; the Secret's case breaks it on purpose
    manifest = manifest.replace("czNjcmV0", "czNj_mV0")
    r = kubectl(server, "create", "-f", "-", input=manifest)
    assert r.returncode == 1
    assert r.stderr.strip() == f'Error from server (BadRequest): error when creating "STDIN": {message}'
