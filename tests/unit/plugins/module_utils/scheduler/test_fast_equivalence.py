"""The vectorised path decides, explains and ranks exactly as the plain path does."""
from __future__ import annotations

import random

import pytest
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (
    RequestSpec,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState

from .scenarios import random_fleet, random_request

SCENARIOS = 1200


def decide(fleet, request, engine):
    hosts = [HostState.from_dict(host) for host in fleet]
    decision = schedule(hosts, RequestSpec.from_dict({**request, "engine": engine}))
    data = decision.to_dict()
    assert data.pop("engine") == engine
    return data


@pytest.mark.parametrize("block", range(12))
def test_vectorized_and_plain_paths_agree_on_random_scenarios(block):
    per_block = SCENARIOS // 12
    outcomes = {"ok": 0, "failed": 0}
    for number in range(block * per_block, (block + 1) * per_block):
        rng = random.Random(number)
        fleet = random_fleet(rng, rng.choice([1, 2, 3, 5, 8, 20, 40]))
        request = random_request(rng, sorted({host["host"] for host in fleet}))
        plain = decide(fleet, request, "plain")
        vectorized = decide(fleet, request, "vectorized")
        assert vectorized == plain, f"scenario {number} differs"
        outcomes["ok" if plain["ok"] else "failed"] += 1
    # The generator must exercise both outcomes, or the comparison proves little.
    assert outcomes["ok"] > per_block // 10 and outcomes["failed"] > per_block // 10
