"""The requests lab's alice check on a kubeconfig whose private key is not its certificate's: it
says so in words, with the text the student's kubectl gives (Go's crypto/tls X509KeyPair), not a
TLS library's error code."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from labkit.exercises import CheckFailed
from labkit.labs import load_lab
from support import REPO


def test_a_key_that_is_not_the_certificates_is_named_with_kubectls_words():
    checks = load_lab(REPO / "labs" / "requests")._load("checks.py")
    ctx = SimpleNamespace(params={"user": "alice", "namespace": "dev"})
    obs = {"kubeconfig": "alice.kubeconfig", "problem": "", "token": None, "certificate": True,
           "subject": ("alice", []), "encrypted": False, "key_matches": False, "refused": []}
    with pytest.raises(CheckFailed) as info:
        checks.judge_alice(ctx, obs)
    message = str(info.value)
    assert "the private key in the kubeconfig alice.kubeconfig does not belong to its client certificate" in message
    assert "`tls: private key does not match public key`" in message
    assert "KEY_VALUES_MISMATCH" not in message
