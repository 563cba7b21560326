"""The order in which scripts/test hands test files to its workers (tests/conftest.py
LONGEST_FIRST): the longest files first, each file's tests together."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import BESIDE_THE_DRIVES, DRIVES_FIRST, LAB_DRIVERS, LONGEST_FIRST, longest_first

HERE = Path(__file__).resolve().parent


def test_longest_first_names_test_files_that_exist_each_once():
    missing = [name for name in LONGEST_FIRST if not (HERE / name).is_file()]
    assert not missing, f"LONGEST_FIRST names test files that are not in tests/ (renamed? remove them): {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST), "LONGEST_FIRST names a file twice"


def test_the_longest_files_come_first_and_each_file_stays_together_in_its_order():
    first, second = LONGEST_FIRST[0], LONGEST_FIRST[1]

    def item(name, n):
        return SimpleNamespace(path=Path("tests") / name, n=n)
    items = [item("test_a.py", 1), item(second, 1), item("test_b.py", 1), item(first, 1), item(second, 2),
             item("test_a.py", 2), item(first, 2)]
    longest_first(items)
    assert [(i.path.name, i.n) for i in items] == [(first, 1), (first, 2), (second, 1), (second, 2),
                                                  ("test_a.py", 1), ("test_b.py", 1), ("test_a.py", 2)]


def test_the_drives_come_first_and_the_files_that_read_them_after_the_files_beside_them():
    """The first file drives every lab (minutes); the files the other workers run meanwhile come
    next, and the other drivers' files (which read the drives' outputs) after them."""
    assert LONGEST_FIRST[0] == DRIVES_FIRST and DRIVES_FIRST in LAB_DRIVERS
    assert LONGEST_FIRST[1:1 + len(BESIDE_THE_DRIVES)] == BESIDE_THE_DRIVES
    assert not set(BESIDE_THE_DRIVES) & set(LAB_DRIVERS)
    later = LONGEST_FIRST[1 + len(BESIDE_THE_DRIVES):]
    assert all(name in later for name in LAB_DRIVERS if name != DRIVES_FIRST)
