"""labkit.apiserver.process, in-process: what the embedded server writes once it listens
(server.json) is what a check reads to reach it, and says nothing once the server has stopped."""

from __future__ import annotations

import os

from labkit.apiserver import process
from labkit.apiserver.server import EmbeddedServer


def test_a_reader_finds_the_listening_server_from_its_server_json_and_nothing_once_it_stopped(tmp_path):
    state = tmp_path / "apiserver"
    assert process.read_server_info(state) is None and not process.server_alive(state)
    server = EmbeddedServer(state, controllers=[]).start()
    try:
        info = process.read_server_info(state)
        assert (info.url, info.port, info.pid, info.kubeconfig, info.state_dir) == \
            (server.url, server.port, os.getpid(), server.kubeconfig, state)
        assert info.token == server.token                          # the admin's, from the kubeconfig it wrote
        assert process.server_alive(state)
        assert info.client().get("v1", "namespaces", "default")["metadata"]["name"] == "default"
    finally:
        server.stop()
    assert process.read_server_info(state) is None and not process.server_alive(state)
