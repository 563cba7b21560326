"""Where a running embedded API server listens (labkit.apiserver.process): read by every
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

