"""The tree as pyflakes reads it (ruff's F rules): no name used that is never defined (a merge that
drops an import leaves a check that raises NameError only when a student reaches that line), no
import or variable left unused, no f-string without a placeholder."""

import subprocess
import sys

from support import REPO


def test_no_undefined_or_unused_names():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "F",
                             "--output-format", "concise", "labkit", "labs", "tests", "scripts", "instructor",
                             "deploy"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
