"""Bad answer files: whatever a student writes, the check answers pass or fail with a message,
never crashes (status "error"). Each lab runs once; every exercise that reads an answer file is
checked against many generated files: the reference solution's answer with random mutations (a
value of another type, a key deleted or added), random YAML of every shape, text and bytes."""

from __future__ import annotations

import os

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from labkit import runner
from labkit.exercises import answer_path
from labkit.labs import discover, get_lab
from support import REPO, labkit
from test_fuzz_inputs import VALUES, mutated

LABS = sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")

ANSWERS = st.one_of(
    VALUES.map(lambda v: yaml.safe_dump(v).encode()),
    st.dictionaries(st.sampled_from(["qos", "hints", "cpus", "answer", "chain", "rules", "matrix", "pods",
                                     "node", "numa", "memory", "endpoints", "policy", "mounts"]),
                    VALUES, max_size=4).map(lambda v: yaml.safe_dump(v).encode()),
    st.text(max_size=80).map(str.encode),
    st.binary(max_size=40),
)


@pytest.mark.parametrize("lab_id", LABS)
def test_no_answer_file_makes_a_check_crash(lab_id):
    lab = get_lab(lab_id)
    exercises = [ex for ex in lab.exercises if ex.answer]
    if not exercises:
        return   # this lab asks for no answer files: nothing to read
    labkit("run", lab_id, check=0)
    try:
        for ex in exercises:
            path = answer_path(lab_id, ex.id)
            labkit("solve", lab_id, ex.id, check=0)
            seed = [d for d in yaml.safe_load_all(path.read_text())]
            contents = st.one_of(mutated(seed).map(lambda docs: yaml.safe_dump_all(docs).encode()),
                                 mutated(seed).map(lambda docs: yaml.safe_dump_all(docs).encode()), ANSWERS)

            @settings(max_examples=int(os.environ.get("FUZZ_N", "25")), deadline=None, derandomize=True,
                      database=None, suppress_health_check=list(HealthCheck))
            @given(content=contents)
            def run(content):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
                (result,) = runner.check(lab, ex.id)
                assert result.status in ("pass", "fail"), f"{lab_id}/{ex.id} on {content[:200]!r}: {result.message}"
                assert "Traceback" not in result.message

            run()
            path.unlink(missing_ok=True)
    finally:
        labkit("cleanup", "--all", check=0)
