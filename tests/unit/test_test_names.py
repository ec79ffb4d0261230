"""pytest collects every test file under tests/ in one session (scripts/test), where two files of
the same name in directories without __init__.py stop the whole run at collection: a unit test and
an integration test must be named apart."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_files_share_a_name():
    places = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in places.items() if len(paths) > 1}
    assert not shared, f"test files sharing a name (rename one of each): {shared}"
