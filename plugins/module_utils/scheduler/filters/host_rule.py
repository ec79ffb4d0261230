from __future__ import annotations

from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_rules import aggregate_names
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import HOST_RULE_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import BaseHostFilter
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_HOST_RULE,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class HostRuleFilter(BaseHostFilter):
    """The operator's hard host rules (must, must_not) that select the request's instances
    (RequestSpec.host_rules): a host outside a must rule's aggregate, or inside a must_not
    rule's, is rejected, naming the rule. A fact of the host's configuration, so checked for
    the first instance only."""

    name = HOST_RULE_FILTER
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not any(rule.hard for rule in spec.host_rules)

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        aggregates = aggregate_names(host_state.aggregates)
        for rule in spec.host_rules:
            if rule.hard and not rule.holds_on(aggregates):
                return self.reject(host_state, REASON_HOST_RULE, detail=rule.describe())
        return None
