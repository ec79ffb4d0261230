from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import JSON_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import FACT_FIELDS
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.json_query import evaluate
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_QUERY,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class JsonFilter(BaseHostFilter):
    """Scheduler hint query: a JSON expression over the host state,
    e.g. [">=", "$free_ram_mb", 1024]."""

    name = JSON_FILTER
    # A query may name any fact.
    host_fields = FACT_FIELDS
    run_filter_once_per_request = True

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.scheduler_hints.get("query")

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        query = spec.scheduler_hints.get("query")
        if not query:
            return None
        result = evaluate(query, host_state)
        if isinstance(result, list):
            result = any(result)
        if result:
            return None
        return self.reject(host_state, REASON_QUERY, detail=json.dumps(query))
