"""Every lab's common wrong solutions (labs/<lab>/mistakes/<exercise>.py): each, applied to a
freshly reset lab, makes its exercise's check fail with a message that names the mistake."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import TEST_LABS, fresh_environment
from labkit import runner
from labkit.labs import discover, load_lab
from support import host_lock, labkit


def _all_mistakes():
    """(lab id, exercise id, mistake name) for every mistake of every lab on the labs path."""
    os.environ.setdefault("LABKIT_LABS_PATH", str(TEST_LABS))
    cases = []
    for lab_id, directory in discover().items():
        lab = load_lab(directory)
        for exercise in lab.exercises:
            cases += [pytest.param(lab_id, exercise.id, m.name, id=f"{lab_id}/{exercise.id}/{m.name}")
                      for m in lab.mistakes(exercise)]
    return cases


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """One isolated instance per lab, started on first use and cleaned up at the end."""
    running: dict[str, dict] = {}

    def get(lab_id: str) -> dict:
        if lab_id not in running:
            env = {**os.environ, **fresh_environment(tmp_path_factory.mktemp(f"mistakes-{lab_id}"))}
            running[lab_id] = env
            with host_lock(False):
                labkit("run", lab_id, env=env, check=0, timeout=300)
        return running[lab_id]

    try:
        yield get
    finally:
        with host_lock(False):
            for lab_id, env in running.items():
                labkit("cleanup", lab_id, env=env, check=0)


def test_the_demo_lab_declares_its_mistakes():
    lab = load_lab(TEST_LABS / "demo")
    found = {m.name: m for m in lab.mistakes(lab.exercise("find-address"))}
    assert list(found) == ["with_prefix_length", "host_a_address"]
    assert found["with_prefix_length"].names == ("without /prefix",)
    assert found["with_prefix_length"].description == "Copies the address as `ip addr` prints it, prefix length included."
    assert lab.mistakes(lab.exercise("container-mount")) == []


@pytest.mark.parametrize("lab_id,exercise,name", _all_mistakes())
def test_a_common_mistake_fails_its_check_and_is_named(labs, monkeypatch, lab_id, exercise, name):
    env = labs(lab_id)
    # answer files survive a reset: start the exercise without one
    (Path(env["LABKIT_ANSWERS_DIR"]) / lab_id / f"{exercise}.yaml").unlink(missing_ok=True)
    with host_lock(False):
        labkit("reset", lab_id, env=env, check=0, timeout=300)
        labkit("solve", lab_id, exercise, "--mistake", name, env=env, check=0, timeout=300)
    for key in ("LABKIT_STATE_DIR", "LABKIT_ANSWERS_DIR", "LABKIT_PREFIX", "LABKIT_LABS_PATH"):
        monkeypatch.setenv(key, env[key])
    lab = load_lab(discover()[lab_id])
    mistake = lab.mistake(lab.exercise(exercise), name)
    [result] = runner.check(lab, exercise)
    assert result.status == "fail", f"{lab_id}/{exercise}: the wrong solution {name!r} ({mistake.description}) " \
                                    f"got {result.status}: {result.message}"
    missing = [w for w in mistake.names if w.lower() not in result.message.lower()]
    assert not missing, f"{lab_id}/{exercise}/{name}: the failure does not name the mistake " \
                        f"(missing {missing}): {result.message}"
