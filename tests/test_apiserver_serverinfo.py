"""Where a running embedded API server listens (labkit.apiserver.serverinfo): read by every
lab's checks through labkit.apiserver.target without importing the server itself, whose import
was a fifth of a device-plugins check's own start."""

from __future__ import annotations

import json
import subprocess
import sys

from support import REPO

PROBE = """
import json, sys
from types import SimpleNamespace
from labkit.apiserver.target import for_env
target = for_env(SimpleNamespace(dir=sys.argv[1], options={}))
print(json.dumps({"kubeconfig": str(target.kubeconfig), "state_dir": str(target.state_dir),
                  "server_imported": "labkit.apiserver.server" in sys.modules}))
"""


def test_a_labs_target_is_read_without_importing_the_server(tmp_path):
    state = tmp_path / "apiserver"
    state.mkdir()
    (state / "server.json").write_text(json.dumps({"url": "https://127.0.0.1:1", "port": 1, "pid": 1,
                                                   "kubeconfig": str(state / "kubeconfig")}))
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         check=True)
    seen = json.loads(out.stdout)
    assert seen == {"kubeconfig": str(state / "kubeconfig"), "state_dir": str(state), "server_imported": False}


def test_the_server_module_still_offers_what_labs_import_from_it():
    from labkit.apiserver import server, serverinfo
    assert server.read_server_info is serverinfo.read_server_info and server.ServerInfo is serverinfo.ServerInfo
    assert server.server_alive is serverinfo.server_alive and server.ADMIN_USER == "labkit-admin"
