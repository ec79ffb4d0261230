"""The shipped scenario files, decided by berth.fleet.schedule through a real ansible-playbook.

Each file under scenarios/ holds one YAML document, a case or a list of cases: a request, host states, and the
expected answer worked out by hand in the file's comments (which filter removes which host,
the weights arithmetic). No ledger and no lab are involved: `hosts:` and `ledger: false`.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ansible_env, item_failed

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).with_name("scenarios")
# Weights in the files are written to 6 decimals.
TOLERANCE = 1e-6


# The request keys run.yml hands to the module; a scenario using another would be decided
# without it.
PASSED_KEYS = {"name", "count", "flavor", "engine", "enabled_filters", "weighers",
               "availability_zone", "image_properties", "scheduler_hints", "server_group",
               "soft_anti_affinity_weight_multiplier", "image_props_weight_multiplier",
               "image_props_weight_setting", "project_id",
               "aggregate_image_properties_isolation_namespace", "metrics_weight_setting",
               "metrics_required"}


def load_cases() -> list[dict]:
    cases = []
    for path in sorted(SCENARIOS.glob("*.yml")):
        if path.name == "run.yml":
            continue
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
            # One document per file (ansible-test's yamllint); several cases are a list.
            for number, document in enumerate(loaded if isinstance(loaded, list) else [loaded]):
                unknown = set(document["request"]) - PASSED_KEYS
                assert not unknown, f"{path.name}: run.yml does not pass {sorted(unknown)}"
                # Each case on both of the engine's paths: small fleets would only ever take
                # the plain one.
                for engine in ("plain", "vectorized"):
                    cases.append({**document, "request": {**document["request"], "engine": engine},
                                  "file": f"{path.stem}#{number}-{engine}"})
    return cases


CASES = load_cases()
# The hosts of spread_default_weighers.yml, asked how many more 2 vCPU / 2048 MB / 10 GB fit:
#   hv1 disabled -> 0 (ComputeFilter); hv2 1536 MB usable < 2048 -> 0 (RamFilter)
#   hv3 RAM 8192 / 2048 = 4; vCPUs (8 x 4.0 - 4) / 2 = 14; disk 51200 / 10240 = 5  -> 4 (RAM)
#   hv4 RAM 12288 / 2048 = 6; vCPUs 32 / 2 = 16; disk 102400 / 10240 = 10          -> 6 (RAM)
#   total 10
CAPACITY_CASE = {"request": {"flavor": {"name": "small", "vcpus": 2, "memory_mb": 2048,
                                        "root_gb": 10}},
                 "hosts": next(case["hosts"] for case in CASES
                               if case["file"].startswith("spread_default_weighers"))}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Run the playbook once for every case; the results keyed by case."""
    directory = tmp_path_factory.mktemp("scenarios")
    variables = directory / "cases.json"
    variables.write_text(json.dumps({"berth_scenario_cases": CASES,
                                     "berth_capacity_case": CAPACITY_CASE}))
    env = ansible_env()
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(SCENARIOS / "run.yml"), "-e", f"@{variables}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    try:
        output = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(f"no JSON from ansible-playbook (rc {proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}") from None
    tasks = output["plays"][0]["tasks"]
    loop_results = tasks[0]["hosts"]["localhost"]["results"]
    assert len(loop_results) == len(CASES)
    answers = {case["file"]: result for case, result in zip(CASES, loop_results)}
    answers["capacity"] = tasks[1]["hosts"]["localhost"]
    return answers


def close(actual, expected) -> bool:
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        return abs(actual - expected) <= TOLERANCE
    return actual == expected


def check_subset(actual: dict, expected: dict, where: str) -> None:
    for key, value in expected.items():
        assert key in actual, f"{where}: no {key!r} in {actual}"
        if isinstance(value, list) and value and isinstance(value[0], dict):
            assert len(actual[key]) == len(value), f"{where}.{key}: {actual[key]}"
            for number, (item, wanted) in enumerate(zip(actual[key], value)):
                check_subset(item, wanted, f"{where}.{key}[{number}]")
        else:
            assert close(actual[key], value), f"{where}.{key}: {actual[key]!r} != {value!r}"


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_scenario_gives_the_hand_worked_answer(case, results):
    result = results[case["file"]]
    expect = case["expect"]
    if "error" in expect:
        # The engine refused to decide (bad input, or a metric metrics_required requires):
        # a failed task naming the field, and nothing decided.
        assert item_failed(result) and result["changed"] is False
        assert result["field"] == expect["error"]["field"]
        assert expect["error"]["message"] in result["msg"], result["msg"]
        assert "decision" not in result
        return
    decision = result["decision"]
    assert decision["ok"] is expect["ok"]
    assert result["summary"] == expect["summary"]
    assert item_failed(result) is (not expect["ok"])
    assert result["changed"] is False  # ledger: false claims nothing
    if not expect["ok"]:
        assert result["msg"].startswith(f"no valid host: {expect['summary']}")
    if "failed_index" in expect:
        assert decision["failed_index"] == expect["failed_index"]
    for number, wanted in enumerate(expect.get("placements", [])):
        placement = decision["placements"][number]
        where = f"placements[{number}]"
        assert placement["host"] == wanted["host"], where
        assert result["placements"][number]["host"] == wanted["host"]
        if "weight" in wanted:
            assert close(placement["weight"], wanted["weight"]), (where, placement["weight"])
        for key in ("alternates", "limits"):
            if key in wanted:
                assert placement[key] == wanted[key], (where, key, placement[key])
        if "runners_up" in wanted:
            check_subset(placement, {"runners_up": wanted["runners_up"]}, where)
        if "weights" in wanted:
            weights = {detail["name"]: detail for detail in placement["weights"]}
            if not wanted["weights"]:
                assert weights == {}, where
            for name, numbers in wanted["weights"].items():
                check_subset(weights[name], numbers, f"{where}.weights.{name}")
                assert close(weights[name]["weighted"],
                             numbers["normalized"] * numbers["multiplier"])
    if "rejections" in expect:
        check_subset(decision, {"rejections": expect["rejections"]}, "decision")
    if "reasons" in expect:
        check_subset(decision, {"reasons": expect["reasons"]}, "decision")
    if "closest_misses" in expect:
        assert [miss["host"] for miss in decision["closest_misses"]] == expect["closest_misses"]


def test_capacity_module_counts_by_hand(results):
    answer = results["capacity"]
    assert not answer.get("failed"), answer
    assert answer["changed"] is False
    assert [(host["host"], host["fits"], host["limited_by"]) for host in answer["hosts"]] == [
        ("hv1", 0, "ComputeFilter"), ("hv2", 0, "RamFilter"), ("hv3", 4, "RamFilter"),
        ("hv4", 6, "RamFilter")]
    assert answer["total"] == 10
    assert answer["summary"] == "10 more small fit on 4 hosts"
