"""assignment.per_state: one call per distinct host state, each host its own answer."""
from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import per_state


def test_hosts_sharing_facts_and_assignments_share_one_call_and_the_others_get_their_own():
    small, large = {"cells": [{"id": 0}]}, {"cells": [{"id": 0}, {"id": 1}]}
    pinned = {"numa": {"cells": [{"host_cell": 0, "pinning": {"0": 2}}]}}
    same_text_other_object = {"cells": [{"id": 0}]}  # equal, but not the ledger's shared value
    hosts = [  # (assignments, topology, cpu_allocation_ratio)
        ([], small, 4.0), ([], small, 4.0), ([pinned], small, 4.0), ([pinned], small, 4.0),
        ([], large, 4.0), ([], small, 16.0), ([], same_text_other_object, 4.0), ([pinned, pinned], small, 4.0)]
    calls = []

    def answer(held, topology, ratio):
        calls.append((len(held), id(topology), ratio))
        return (len(held), len(topology["cells"]), ratio)

    answers = per_state(answer, [held for held, _topology, _ratio in hosts], [[topology for _held, topology, _ratio in hosts]],
                        [[ratio for _held, _topology, ratio in hosts]])
    assert answers == [(len(held), len(topology["cells"]), ratio) for held, topology, ratio in hosts]
    # Hosts 0-1 and 2-3 share a state; the ratio is compared by value, the rest by identity.
    assert len(calls) == 6
