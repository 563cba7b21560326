"""`labkit run` shows what a build is doing on a terminal (a pseudo-terminal here), is quiet
about it when its output goes elsewhere, and ends with one summary line either way."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap

from support import REPO

SUMMARY = re.compile(r"^lab slow is up: built in [0-9.]+ s \(([0-9]+) steps\)$", re.M)

LAB = {
    "lab.yaml": """\
        id: slow
        title: A lab that takes its time
        summary: plain files
        exercises:
          - id: one
            title: One
            points: 1
            prompt: Nothing.
            check: check_one
        """,
    "lab.py": """\
        import time


        def up(env):
            env.log("writing the first file")
            (env.dir / "a").write_text("a")
            time.sleep(0.6)
            env.log("writing the second file")
            (env.dir / "b").write_text("b")
            time.sleep(0.6)
        """,
    "checks.py": """\
        def check_one(ctx):
            return ctx.passed("ok")
        """,
}


def make_lab(root):
    lab = root / "slow"
    lab.mkdir(parents=True)
    for name, text in LAB.items():
        (lab / name).write_text(textwrap.dedent(text))


def test_a_build_shows_its_steps_on_a_terminal_and_only_the_summary_elsewhere(tmp_path, monkeypatch):
    make_lab(tmp_path / "labs")
    monkeypatch.setenv("LABKIT_LABS_PATH", str(tmp_path / "labs"))
    command = f"{shlex.quote(sys.executable)} -m labkit run slow > /dev/null"
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    shown = subprocess.run(["script", "-qec", command, "/dev/null"], capture_output=True, text=True, env=env,
                           cwd=REPO, timeout=60)
    assert shown.returncode == 0, shown.stdout
    assert "building lab slow" in shown.stdout
    assert "writing the first file" in shown.stdout and "writing the second file" in shown.stdout
    on_terminal = SUMMARY.findall(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.stdout).replace("\r", ""))
    assert len(on_terminal) == 1 and int(on_terminal[0]) >= 2     # the two logged steps, and the ledger's
    subprocess.run([sys.executable, "-m", "labkit", "cleanup", "slow"], cwd=REPO, check=True, capture_output=True)
    piped = subprocess.run([sys.executable, "-m", "labkit", "run", "slow"], capture_output=True, text=True, cwd=REPO)
    assert piped.returncode == 0, piped.stderr
    assert "writing the" not in piped.stderr and "\x1b[" not in piped.stderr
    assert SUMMARY.findall(piped.stderr) == on_terminal
