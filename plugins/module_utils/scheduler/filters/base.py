from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import RequestSpec
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )

# One way a filter rejects, in its vectorised form: (reason, resource, requested, rejected
# mask, free amounts or None). The masks are checked in order; the first that holds wins, as
# the first `return` of host_passes does.
VectorReject = Tuple[str, Optional[str], Any, Any, Any]


class BaseHostFilter:
    """A Nova-style host filter that says why, instead of only True or False.

    A filter may record what it admitted against in host_state.limits, as Nova's do, so the
    claim can enforce the same oversubscription limits.

    The fast path (fast.py) may use `vector_rejects` instead of calling host_passes per host:
    it gets the candidates' numbers as arrays (HostState field names plus the filter's own
    `vector_columns`) and must reject exactly the hosts host_passes rejects, for the same
    reason. A filter without it is run host by host there too.
    """

    name = ""
    # Facts that cannot change between the instances of one request (is the host up?) are
    # checked for the first instance only, as in Nova.
    run_filter_once_per_request = False
    # Whether a host's answer can change because another host was chosen (affinity: once a
    # group member lands somewhere, every other host is out). The fast path re-runs such
    # filters on every candidate; the others only on the host that was just consumed.
    depends_on_other_hosts = False
    # Extra per-host numbers for vector_rejects: column name -> function(host_state, spec).
    vector_columns: dict[str, Callable[[Any, Any], Any]] = {}

    def run_filter_for_index(self, index: int) -> bool:
        return index == 0 or not self.run_filter_once_per_request

    def is_noop(self, spec: RequestSpec) -> bool:
        """True when this request gives the filter nothing to check (every host passes)."""
        return False

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        """None if the host can take one more instance of the request, else why not."""
        raise NotImplementedError

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject] | None:
        return None

    def fits(self, host_state: HostState, spec: RequestSpec) -> Callable[[int], bool] | None:
        """For filters whose answer changes as instances are consumed: a test of whether the
        host still passes after `count` more instances of the request (used by capacity.py).
        None for filters whose answer consumption does not change."""
        return None

    def reject(self, host_state: HostState, reason: str, **numbers: Any) -> Rejection:
        return Rejection(host=host_state.host, filter=self.name, reason=reason, **numbers)
