"""The fast YAML reader gives exactly what PyYAML's SafeLoader gives, or declines.

`labkit.yaml_fast.documents` reads large files with rapidyaml when a scan of the text shows that
no scalar in it can be read differently under YAML 1.1 (PyYAML) and rapidyaml's rules. These tests
compare both readers on generated documents full of the scalars where the two disagree, on every
YAML file the project ships, and on the kube-proxy benchmark's cluster, which must take the fast
path.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labkit import yaml_fast

REPO = Path(__file__).resolve().parents[1]

# Plain tokens where YAML 1.1 and 1.2 readers disagree, and ones they read alike.
TOKENS = [
    "yes", "No", "on", "OFF", "y", "n", "True", "FALSE", "true", "false", "null", "Null", "~", "",
    "0", "-0", "00", "0777", "0o17", "0x1F", "0b101", "1_000", "+1", "-1", "1", "12", "1.5", "-.5", ".5",
    "1.", "-1.", "1e3", "1E3", "1.5e+3", "5e-1", "0e0", ".inf", "-.Inf", "inf", "Infinity", ".nan", "NaN",
    "12:30", "1:2:3", "2025-06-01", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
    "172.30.0.1", "10.0.0.0/8", "::1/128", "fd00::1", "::", "1:20", "1:2:3:4:5:6:7:8", "1::2", "a::", "# c", "a #c", "a#c", "100Mi", "500m", "a b", "a,b", "x # c", "http://x:80/", "<<", "=",
    "'yes'", "'0777'", "\"1e3\"", "\"a\\tb\"", "\"\\u00e9\"", "'it''s'", "\"x\\\\y\"", "\"\\x41\"",
    "{}", "[]", "[1, yes, '2']", "{a: 1, on: 2}", "&a x", "*a", "!!str 1", "! x", "? x", "-x", "--",
]
KEYS = ["a", "name", "on", "yes", "1", "0x1", "1.5", "true", "null", "~", "'k'", "\"1\"", "k-1", "k.v", "2025-06-01"]


def _node(draw, depth: int, indent: int) -> list[str]:
    kind = draw(st.sampled_from(["map", "seq", "scalar", "block"] if depth < 3 else ["scalar"]))
    pad = " " * indent
    if kind == "scalar":
        return [draw(st.sampled_from(TOKENS))]
    if kind == "block":
        body = draw(st.lists(st.sampled_from(TOKENS + ["  indented", "key: yes"]), min_size=1, max_size=3))
        return [draw(st.sampled_from(["|", "|-", ">", ">-", "|+"]))] + [pad + "  " + line for line in body]
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        child = _node(draw, depth + 1, indent + 2)
        if kind == "map":
            head = f"{pad}{draw(st.sampled_from(KEYS))}:"
        else:
            head = f"{pad}-"
        if len(child) == 1 and not child[0].startswith(" "):
            lines.append(f"{head} {child[0]}".rstrip())
        elif child[0] in ("|", "|-", ">", ">-", "|+"):
            lines.append(f"{head} {child[0]}")
            lines += child[1:]
        else:
            lines.append(head)
            lines += child
    return lines


@st.composite
def yaml_texts(draw) -> str:
    documents = ["\n".join(_node(draw, 0, 0)) + "\n" for _ in range(draw(st.integers(1, 3)))]
    separator = draw(st.sampled_from(["---\n", "\n---\n", "...\n---\n"]))
    return draw(st.sampled_from(["", "---\n"])) + separator.join(documents)


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def assert_agrees(text: str) -> bool:
    """The fast reader declines, or gives what PyYAML gives; True when it read the text."""
    fast = yaml_fast.documents(text)
    try:
        slow = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        assert fast is None, f"rapidyaml read text PyYAML refuses:\n{text}\n-> {fast!r}"
        return False
    assert fast is None or same(fast, slow), f"{text}\nfast: {fast!r}\nPyYAML: {slow!r}"
    return fast is not None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_texts())
def test_generated_documents_read_alike_or_declined(text):
    assert_agrees(text)


@st.composite
def broken_yaml_texts(draw) -> str:
    """Generated documents with a few characters inserted or removed: often not YAML at all."""
    text = draw(yaml_texts())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()) and at < len(text):
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + draw(st.sampled_from([":", ": ", " ", "  ", "-", "- ", "\"", "'", "\n", "[", "}", "#", "---\n"])) + text[at:]
    return text


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_yaml_texts())
def test_broken_documents_are_refused_as_pyyaml_refuses_them(text):
    assert_agrees(text)


@pytest.mark.parametrize("token", TOKENS)
def test_every_token_as_a_value_and_a_key(token):
    assert_agrees(f"k: {token}\n")
    assert_agrees(f"- {token}\n")
    assert_agrees(f"{token}: v\n")
    assert_agrees(f"k: [{token}, x]\n")


def test_every_yaml_file_of_the_project_reads_alike():
    files = sorted(p for p in REPO.glob("**/*.y*ml") if ".venv" not in p.parts and ".git" not in p.parts)
    assert len(files) > 20
    fast = sum(assert_agrees(path.read_text()) for path in files)
    assert fast > 0, "no shipped file took the fast path: the scan refuses everything"


def test_what_rapidyaml_refuses_prints_nothing(capfd):
    assert yaml_fast.documents("a: [1\n") is None
    assert capfd.readouterr().err == ""


def test_the_benchmark_cluster_takes_the_fast_path():
    import sys

    sys.path.insert(0, str(REPO / "scripts" / "benchmarks"))
    import kube_proxy_rules

    objects = kube_proxy_rules.cluster(services=40)
    text = yaml.dump_all(objects, Dumper=yaml.SafeDumper, default_flow_style=False)
    assert yaml_fast.documents(text) == objects
