"""What loading a lab for `labkit check` imports: a lab whose objects live on labkit's embedded API
server reaches the running server over HTTPS (labkit.apiserver.process and target read where it
listens), so loading its lab.py and checks must not import the server itself (labkit.apiserver.server
with its handler and registry: some 150 ms of imports on every check)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO

SERVER_MODULES = ("labkit.apiserver.server", "labkit.apiserver.handler", "labkit.apiserver.registry.store")
LOAD = """
import sys
from labkit.labs import get_lab
lab = get_lab(sys.argv[1])
lab.environment_module()
for exercise in lab.exercises:
    lab.check_function(exercise)
print(" ".join(m for m in sys.argv[2:] if m in sys.modules))
"""


@pytest.mark.parametrize("lab_id", ["gc", "namespace", "requests", "device-plugins", "scheduler"])
def test_loading_a_lab_and_its_checks_does_not_import_the_api_server(lab_id):
    result = subprocess.run([sys.executable, "-c", LOAD, lab_id, *SERVER_MODULES], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []
