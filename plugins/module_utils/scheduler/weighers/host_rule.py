from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import aggregate_names
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    HOST_RULE_WEIGHER,
    HOST_RULE_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import BaseWeigher

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class HostRuleWeigher(BaseWeigher):
    """The operator's soft host rules (should, should_not) that select the request's instances:
    a host's raw value is the sum of the weights of the rules it satisfies, less those of the
    rules it breaks, so a host in a should rule's aggregate outweighs one outside it, and one in
    a should_not rule's aggregate weighs less. Every host weighs 0 without soft rules."""

    name = HOST_RULE_WEIGHER
    multiplier_option = HOST_RULE_WEIGHT_MULTIPLIER
    default_multiplier = 1.0

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        soft = [rule for rule in spec.host_rules if not rule.hard]
        if not soft:
            return 0.0
        aggregates = aggregate_names(host_state.aggregates)
        total = 0.0
        for rule in soft:
            total += rule.weight if rule.holds_on(aggregates) else -rule.weight
        return total
