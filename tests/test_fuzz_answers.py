"""Bad answer files: whatever a student writes, the check answers pass or fail with a message,
never crashes (status "error"). Every exercise that reads an answer file is checked against many
generated files: the reference solution's answer with random mutations (a value of another type,
a key deleted or added), random YAML of every shape, text and bytes.

Each lab is driven in the build it shares with test_mistakes and test_mutants (conftest.py
LAB_DRIVERS: `python test_fuzz_answers.py LAB` fuzzes the running lab's answer exercises, each
reset and solved first and left reset, and prints what it found as JSON)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import drive_labs  # noqa: E402
from labkit.labs import discover, get_lab  # noqa: E402
from support import REPO  # noqa: E402
from test_fuzz_inputs import VALUES, mutated  # noqa: E402

LABS = sorted(lab for lab, directory in discover().items() if directory.parent == REPO / "labs")

ANSWERS = st.one_of(
    VALUES.map(lambda v: yaml.safe_dump(v).encode()),
    st.dictionaries(st.sampled_from(["qos", "hints", "cpus", "answer", "chain", "rules", "matrix", "pods",
                                     "node", "numa", "memory", "endpoints", "policy", "mounts"]),
                    VALUES, max_size=4).map(lambda v: yaml.safe_dump(v).encode()),
    st.text(max_size=80).map(str.encode),
    st.binary(max_size=40),
)


def drive(lab_id: str) -> list[dict]:
    """Fuzz the answer file of each answer exercise of the running lab: one record per exercise,
    {"exercise", "problem"} (None, or the falsifying answer file and what the check said)."""
    from labkit import runner
    from labkit.exercises import answer_path

    lab = get_lab(lab_id)
    records = []
    for ex in [ex for ex in lab.exercises if ex.answer]:
        path = answer_path(lab_id, ex.id)
        problem = None
        try:
            path.unlink(missing_ok=True)
            runner.reset(lab, exercise_id=ex.id)
            runner.solve(lab, ex.id)
            seed = [d for d in yaml.safe_load_all(path.read_text())]
            contents = st.one_of(mutated(seed).map(lambda docs: yaml.safe_dump_all(docs).encode()),
                                 mutated(seed).map(lambda docs: yaml.safe_dump_all(docs).encode()), ANSWERS)

            @settings(max_examples=int(os.environ.get("FUZZ_N", "10")), deadline=None, derandomize=True,
                      database=None, suppress_health_check=list(HealthCheck))
            @given(content=contents)
            def run(content):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
                (result,) = runner.check(lab, ex.id)
                assert result.status in ("pass", "fail"), f"{lab_id}/{ex.id} on {content[:200]!r}: {result.message}"
                assert "Traceback" not in result.message

            run()
        except Exception as exc:     # hypothesis raises the falsifying example's assertion
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            path.unlink(missing_ok=True)
            try:
                runner.reset(lab, exercise_id=ex.id)
            except Exception as exc:
                problem = problem or f"resetting {ex.id} afterwards failed: {type(exc).__name__}: {exc}"
        records.append({"exercise": ex.id, "problem": problem})
    return records


@pytest.fixture(scope="module")
def fuzzed(request, tmp_path_factory):
    return drive_labs(request, tmp_path_factory, __file__, "fuzz-answers", timeout=600)


@pytest.mark.parametrize("lab_id", LABS)
def test_no_answer_file_makes_a_check_crash(fuzzed, lab_id):
    records = fuzzed[lab_id]
    assert [r["exercise"] for r in records] == [ex.id for ex in get_lab(lab_id).exercises if ex.answer]
    problems = {r["exercise"]: r["problem"] for r in records if r["problem"]}
    assert not problems, f"{lab_id}: " + "\n".join(f"{ex}: {why}" for ex, why in problems.items())


if __name__ == "__main__":
    sys.stdout.write(json.dumps(drive(sys.argv[1])))
