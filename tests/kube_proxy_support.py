"""A running kube-proxy lab shared by the tests of one module (building it takes about a second)."""

from __future__ import annotations

import os
from contextlib import contextmanager

from conftest import fresh_environment
from support import host_lock, labkit


@contextmanager
def kube_proxy_lab(base):
    """`labkit run kube-proxy` in an isolated labkit instance under `base`; yields its environment
    variables. The shared host lock is held while building and while cleaning up."""
    env = {**os.environ, **fresh_environment(base)}
    with host_lock(False):
        labkit("run", "kube-proxy", env=env, check=0)
    try:
        yield env
    finally:
        with host_lock(False):
            labkit("cleanup", "kube-proxy", env=env, check=0)


def use(monkeypatch, env: dict):
    """Point in-process labkit calls of one test at the shared lab; returns its LabEnv."""
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    for key in ("LABKIT_STATE_DIR", "LABKIT_ANSWERS_DIR", "LABKIT_PREFIX", "LABKIT_LABS_PATH"):
        monkeypatch.setenv(key, env[key])
    lab = get_lab("kube-proxy")
    return LabEnv(lab, LabState(lab.id))
