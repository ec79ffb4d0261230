"""No test decides pass or fail by the wall clock: a timing assertion fails on a loaded machine
and measures what belongs in benchmarks/. The rule, checked on every Python file under tests/:

- A clock read is a call of time.time, time.monotonic, time.perf_counter, time.process_time,
  time.thread_time, time.clock_gettime (and their _ns forms), of ``now``, ``utcnow`` or
  ``today`` on anything named ``datetime`` or ``date``, or of such a function imported by its
  bare name (``from time import monotonic``; the ledger's ``utcnow``).
- A value is timed if it is a clock read, or a local name assigned from an expression holding a
  timed value (``started = time.monotonic()``, ``took_s = time.monotonic() - started``) through
  operators, comparisons, containers, comprehensions and the builtins abs, round, int, float,
  min, max, sum, all, any, sorted, list, tuple and set; a timed value given to any other call is
  data, and the call's result is not timed.
- So is a duration the code under test measured on its own clock and reports under a key that
  says so (``result["summary"]["duration_s"]``: a string key holding "duration" or "elapsed"),
  when it is compared by order (<, <=, >, >=); equal to what an injected clock gave is fine.
- A decision is an ``assert``'s condition, or the condition of an ``if`` or ``while`` whose body
  asserts, raises or calls ``pytest.fail``.
- No timed value may appear in a decision, but for one form: a polling deadline, a comparison
  (<, <=, >, >=) of a clock read with a local name assigned ``<clock read> + <seconds>``, inside
  a ``for`` or ``while`` loop of the same function. That fails a test whose awaited event never
  came (a guest that printed no boot marker in 300 s), not one that came late.

Allowed, then: clocks a test injects (``clock=time.monotonic`` passes no reading), readings given
to the code as data (facts gathered an hour ago), waits and sleeps, and polling deadlines.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import pytest

TESTS = Path(__file__).resolve().parents[1]
_TIME_NAMES = ("time", "monotonic", "perf_counter", "process_time", "thread_time", "clock_gettime")
_TIME_FUNCTIONS = {f"{name}{suffix}" for name in _TIME_NAMES for suffix in ("", "_ns")}
_DATETIME_FUNCTIONS = {"now", "utcnow", "today"}
# Calls whose result is still the timed value they were given (or a verdict on it).
_PASS_THROUGH = {"abs", "round", "int", "float", "min", "max", "sum", "all", "any", "sorted", "list", "tuple", "set"}
_DURATION_KEYS = ("duration", "elapsed")
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain of names; '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _bare_clocks(tree: ast.AST) -> set[str]:
    """The names a module imported a clock function under (``from time import monotonic``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (node.module == "time" and alias.name in _TIME_FUNCTIONS) or alias.name == "utcnow":
                    names.add(alias.asname or alias.name)
    return names


def _is_clock_read(node: ast.AST, bare: set[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _dotted(node.func)
    parts = name.split(".")
    if len(parts) == 1:
        return name in bare
    if parts[-2] == "time" and parts[-1] in _TIME_FUNCTIONS:
        return True
    return parts[-2] in ("datetime", "date") and parts[-1] in _DATETIME_FUNCTIONS


def _timed_nodes(expression: ast.AST, bare: set[str], skip: Callable[[ast.AST], bool] = lambda node: False):
    """The nodes of ``expression`` a timed value flows through (not into the arguments of a call
    other than _PASS_THROUGH's, whose result is the callee's), leaving out those ``skip`` takes."""
    pending = [expression]
    while pending:
        node = pending.pop()
        if skip(node):
            continue
        yield node
        if isinstance(node, ast.Call) and not _is_clock_read(node, bare) and _dotted(node.func) not in _PASS_THROUGH:
            pending.append(node.func)
        else:
            pending.extend(ast.iter_child_nodes(node))


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, not those of the functions and classes defined in it."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))


def _assigned(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) of each local name a statement or expression assigns."""
    if isinstance(node, ast.Assign):
        return [(target.id, node.value) for target in node.targets if isinstance(target, ast.Name)]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value)] if node.value is not None else []
    return []


def _orders_a_reported_duration(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Compare) and any(isinstance(op, _ORDER) for op in node.ops)):
        return False
    return any(isinstance(part, ast.Subscript) and isinstance(part.slice, ast.Constant)
               and isinstance(part.slice.value, str) and any(key in part.slice.value for key in _DURATION_KEYS)
               for side in (node.left, *node.comparators) for part in ast.walk(side))


def _is_decider(node: ast.AST) -> bool:
    if isinstance(node, (ast.Assert, ast.Raise)):
        return True
    return isinstance(node, ast.Call) and _dotted(node.func) == "pytest.fail"


def _body_decides(statement: ast.If | ast.While) -> bool:
    return any(_is_decider(node) for part in statement.body for node in [part, *_own_nodes(part)])


def timing_decisions(source: str) -> list[int]:
    """The line of each decision in ``source`` that a timed value reaches, outside a polling
    deadline (the module's docstring has the rule)."""
    tree = ast.parse(source)
    bare = _bare_clocks(tree)
    found = []
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in [tree, *functions]:
        nodes = list(_own_nodes(function))
        parents = {child: node for node in [function, *nodes] for child in ast.iter_child_nodes(node)}

        def holds(expression: ast.AST, names: set[str]) -> bool:
            return any(_is_clock_read(node, bare) or (isinstance(node, ast.Name) and node.id in names)
                       for node in _timed_nodes(expression, bare))

        timed: set[str] = set()
        while True:  # until no assignment adds a name: the order of the statements does not matter
            more = {name for node in nodes for name, value in _assigned(node) if holds(value, timed)}
            if more <= timed:
                break
            timed |= more
        deadlines = {name for node in nodes for name, value in _assigned(node)
                     if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
                     and (_is_clock_read(value.left, bare) or _is_clock_read(value.right, bare))}

        def in_loop(node: ast.AST) -> bool:
            while node in parents:
                node = parents[node]
                if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                    return True
            return False

        def polling_deadline(node: ast.AST) -> bool:
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], _ORDER)):
                return False
            sides = (node.left, node.comparators[0])
            return (any(_is_clock_read(side, bare) for side in sides)
                    and any(isinstance(side, ast.Name) and side.id in deadlines for side in sides)
                    and in_loop(node))

        def timed_outside_deadlines(condition: ast.AST) -> bool:
            return any(_is_clock_read(node, bare) or (isinstance(node, ast.Name) and node.id in timed)
                       or _orders_a_reported_duration(node)
                       for node in _timed_nodes(condition, bare, skip=polling_deadline))

        for node in nodes:
            if isinstance(node, ast.Assert):
                condition = node.test
            elif isinstance(node, (ast.If, ast.While)) and _body_decides(node):
                condition = node.test
            else:
                continue
            if timed_outside_deadlines(condition):
                found.append(node.lineno)
    return sorted(set(found))


def test_no_test_decides_by_the_wall_clock():
    offending = {}
    for path in sorted(TESTS.rglob("*.py")):
        lines = timing_decisions(path.read_text())
        if lines:
            offending[str(path.relative_to(TESTS))] = lines
    assert offending == {}, ("decisions on the wall clock (assert behaviour with an injected clock, and "
                             f"measure the time in benchmarks/): {offending}")


# ---- the rule's own cases: what it finds, and what it lets be --------------------------------------

FOUND = {
    "elapsed": """
def test():
    started = time.monotonic()
    work()
    took_s = time.monotonic() - started
    assert took_s < 5
""",
    "inline": """
def test():
    started = time.perf_counter()
    work()
    assert 0.3 <= time.perf_counter() - started < 5
""",
    "a deadline outside a loop": """
def test():
    deadline = time.monotonic() + 5
    work()
    assert time.monotonic() < deadline
""",
    "datetime": """
def test():
    began = dt.datetime.now(dt.timezone.utc)
    assert all(row["synced_at"] >= began for row in rows)
""",
    "a duration the code measured": """
def test():
    result = sync()
    assert result["summary"]["duration_s"] < 6 + 3
""",
    "if then fail": """
import pytest
def test():
    started = time.time()
    work()
    if time.time() - started > 1:
        pytest.fail("slow")
""",
    "through round": """
def test():
    started = time.monotonic()
    work()
    took_s = round(time.monotonic() - started, 1)
    assert took_s <= 5.0
""",
    "bare import": """
from time import monotonic as now
def test():
    started = now()
    work()
    assert now() - started < 1
""",
}

LET_BE = {
    "polling deadline": """
def wait_for(path):
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, "never came"
        time.sleep(0.1)
""",
    "polling deadline in an if": """
def wait_for(proc):
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("did not start")
""",
    "an injected clock": """
def test():
    barrier = Barrier(clock=time.monotonic, sleep=time.sleep)
    assert barrier.wait() is None
""",
    "a duration from an injected clock": """
def test():
    result = Sync(clock=clock).run()
    assert result["summary"]["duration_s"] == 1.0
""",
    "a reading as data": """
def test(ledger):
    state = host_state(gathered_at=time.time() - 3600)
    assert ledger.tracker_sync([state]) == []
    assert ledger.stale(now=time.time()) == ["hv1"]
""",
    "a cache that decides no outcome": """
def keep_synced(self):
    if time.monotonic() - self.synced > 60:
        self.gather()
""",
}


@pytest.mark.parametrize("source", FOUND.values(), ids=FOUND.keys())
def test_the_rule_finds_a_timing_decision(source):
    assert timing_decisions(source) != []


@pytest.mark.parametrize("source", LET_BE.values(), ids=LET_BE.keys())
def test_the_rule_lets_injected_clocks_data_and_polling_deadlines_be(source):
    assert timing_decisions(source) == []
