"""labkit reads the YAML files it ships with libyaml's parser and a student's files with PyYAML's
pure-Python one (labkit/inputs.py): both must give the same for every file shipped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labkit import inputs
from labkit.paths import BUILTIN_LABS

PACKAGE = Path(inputs.__file__).resolve().parent
SHIPPED_YAML = sorted(p for root in (BUILTIN_LABS, PACKAGE) for pattern in ("*.yaml", "*.yml")
                      for p in root.rglob(pattern))


def test_there_are_shipped_files_to_compare():
    labs = [d for d in BUILTIN_LABS.iterdir() if (d / "lab.yaml").is_file()]
    assert len(labs) >= 9
    assert all(lab / "lab.yaml" in SHIPPED_YAML for lab in labs)


@pytest.mark.parametrize("path", SHIPPED_YAML, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_both_parsers_read_a_shipped_file_alike(path):
    text = path.read_text()
    assert inputs.shipped(path)
    assert list(yaml.load_all(text, Loader=yaml.CSafeLoader)) == list(yaml.safe_load_all(text))
    assert inputs.load_yaml_all(path) == list(yaml.safe_load_all(text))


def test_a_students_file_is_read_by_the_pure_python_parser(tmp_path, monkeypatch):
    answer = tmp_path / "answer.yaml"
    answer.write_text("reason: x\n")
    assert not inputs.shipped(answer) and not inputs.shipped("-")
    monkeypatch.setattr(inputs, "_PARSED", {})        # texts this process parsed before: not parsed again
    used = []
    real = yaml.load
    monkeypatch.setattr(yaml, "load", lambda text, Loader: used.append(Loader) or real(text, Loader=Loader))
    assert inputs.load_yaml(answer) == {"reason": "x"}
    assert used == [yaml.SafeLoader]
    inputs.load_yaml(BUILTIN_LABS / "gc" / "lab.yaml")
    assert used[-1] is yaml.CSafeLoader
