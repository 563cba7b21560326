"""The csrsigning controller for the signer kubernetes.io/kube-apiserver-client
(pkg/controller/certificates/signer/signer.go `signer.handle`, run by kube-controller-manager
with --cluster-signing-cert-file/--cluster-signing-key-file; here the lab CA). An approved
request that has not failed and has no certificate yet gets one: signed by the CA, for the
subject of the request, with the requested usages and spec.expirationSeconds (at most the
signer's one-year TTL, at least 10 minutes), written with an update of the `status`
subresource. A request whose usages this signer may not give gets the condition Failed with
reason SignerValidationFailure instead. Requests for other signers are left alone."""

from __future__ import annotations

import base64
from datetime import datetime, timezone

from labkit.apiserver import certificates
from labkit.controllers.base import KeyedController

CONTROLLER = "csrsigning"


class CSRSigningController(KeyedController):
    name = CONTROLLER
    user = "system:serviceaccount:kube-system:certificate-controller"

    def __init__(self, client, log, pki):
        super().__init__(client, log)
        self.ca_cert, self.ca_key = certificates.load_ca(pki)

    def make_informers(self):
        return {"csrs": self.informer("certificates.k8s.io/v1", "certificatesigningrequests",
                                      "CertificateSigningRequest", namespaced=False, on_add=self.enqueue,
                                      on_update=lambda _old, new: self.enqueue(new))}

    def sync(self, key: str) -> None:
        csr = self.informers["csrs"].get(key)
        if csr is None or not certificates.has_condition(csr, certificates.APPROVED) \
                or certificates.has_condition(csr, certificates.FAILED):
            return
        if (csr.get("spec") or {}).get("signerName") != certificates.KUBE_APISERVER_CLIENT \
                or (csr.get("status") or {}).get("certificate"):
            return
        certificate, problem = certificates.sign_request(csr, self.ca_cert, self.ca_key)
        status = dict(csr.get("status") or {})
        if problem:
            now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            status["conditions"] = list(status.get("conditions") or []) + [{
                "type": certificates.FAILED, "status": "True", "reason": "SignerValidationFailure",
                "message": problem, "lastUpdateTime": now}]
            self.client.update("certificates.k8s.io/v1", "certificatesigningrequests", dict(csr, status=status),
                               subresource="status")
            self.log.record(self.name, "fail", None, f"CertificateSigningRequest {key}: {problem} → condition Failed "
                            "(SignerValidationFailure)")
            return
        status["certificate"] = base64.b64encode(certificate).decode()
        self.client.update("certificates.k8s.io/v1", "certificatesigningrequests", dict(csr, status=status),
                           subresource="status")
        self.log.record(self.name, "sign", None, f"CertificateSigningRequest {key}: approved for "
                        f"{certificates.KUBE_APISERVER_CLIENT} → certificate signed by the cluster CA")
