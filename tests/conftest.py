"""Test configuration shared by every test.

Every test runs with its own labkit state directory, answers directory and name prefix, so tests
never see each other's labs (nor a workshop's labs on the same machine). The labs under
tests/labs/ (the demo lab) are on the labs path.

Host lock (see support.py): each test holds the shared host lock; tests marked
`host_exclusive` hold it exclusively, so their before/after comparison of the host's mount table
and root iptables is not disturbed by other labkit activity. Module-scoped fixtures that build
labs take the shared lock themselves around setup and teardown (`support.host_lock(False)`).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import REPO, diff_snapshots, host_lock, host_snapshot  # noqa: E402

TEST_LABS = REPO / "tests" / "labs"


def fresh_environment(base: Path) -> dict[str, str]:
    """Environment variables for an isolated labkit instance rooted at `base`."""
    return {
        "LABKIT_STATE_DIR": str(base / "state"),
        "LABKIT_ANSWERS_DIR": str(base / "answers"),
        "LABKIT_PREFIX": "t" + secrets.token_hex(2),
        "LABKIT_LABS_PATH": str(TEST_LABS),
    }


@pytest.fixture(autouse=True)
def isolated_labkit(tmp_path, monkeypatch, request):
    """Per-test labkit instance (state, answers, prefix) and the host lock."""
    for key, value in fresh_environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    exclusive = request.node.get_closest_marker("host_exclusive") is not None
    with host_lock(exclusive):
        yield tmp_path


@pytest.fixture
def host_unchanged(request):
    """Asserts that the host (mount table, root iptables, netns, cgroups, processes) is unchanged."""
    assert request.node.get_closest_marker("host_exclusive"), "tests using host_unchanged must be marked host_exclusive"
    before = host_snapshot()
    yield before
    after = host_snapshot()
    problems = diff_snapshots(before, after)
    assert not problems, "the host changed:\n" + "\n".join(problems)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="labkit's tests need root (network and mount namespaces, netfilter, cgroups)")
        for item in items:
            item.add_marker(skip)
