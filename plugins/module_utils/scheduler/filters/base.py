from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )


class BaseHostFilter:
    """A Nova-style host filter that says why, instead of only True or False.

    A filter may record what it admitted against in host_state.limits, as Nova's do, so the
    claim can enforce the same oversubscription limits.
    """

    name = ""
    # Facts that cannot change between the instances of one request (is the host up?) are
    # checked for the first instance only, as in Nova.
    run_filter_once_per_request = False

    def run_filter_for_index(self, index: int) -> bool:
        return index == 0 or not self.run_filter_once_per_request

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        """None if the host can take one more instance of the request, else why not."""
        raise NotImplementedError

    def reject(self, host_state: HostState, reason: str, **numbers: Any) -> Rejection:
        return Rejection(host=host_state.host, filter=self.name, reason=reason, **numbers)
