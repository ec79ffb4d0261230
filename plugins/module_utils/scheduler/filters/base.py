from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import Rejection

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )

# One way a filter rejects, in its vectorised form: (reason, resource, requested, rejected
# mask, free amounts or None). The masks are checked in order; the first that holds wins, as
# the first `return` of host_passes does.
VectorReject = Tuple[str, Optional[str], Any, Any, Any]


@dataclass(frozen=True)
class HostNumber:
    """One of a filter's own per-host numbers (an allocation ratio, a limit), declared once and
    read by both paths: ``value`` gives it for one host (host_passes), and the vectorised path builds
    it for every host at once, once per request, with NumPy (vector.Columns).

    The value is the host's HostState field `field` (one of vector.py's _NUMBER_COLUMNS), or
    else the request's option `option` (a RequestSpec attribute); with `aggregate_key`, a host
    whose aggregates give that metadata key takes the smallest of their values instead
    (HostState.aggregate_number, an int with `integer`, as Nova casts its count limits).
    """

    field: Optional[str] = None
    option: Optional[str] = None
    aggregate_key: Optional[str] = None
    integer: bool = False

    def value(self, host_state: HostState, spec: RequestSpec) -> Any:
        default = (getattr(host_state, self.field) if self.field is not None
                   else getattr(spec, str(self.option)))
        if self.aggregate_key is None:
            return default
        return host_state.aggregate_number(self.aggregate_key, default, self.integer)


class BaseHostFilter:
    """A Nova-style host filter that says why, instead of only True or False.

    A filter may record what it admitted against in host_state.limits, as Nova's do, so the
    claim can enforce the same oversubscription limits.

    The vectorised path (vector.py) may use `vector_rejects` instead of calling host_passes per host:
    it gets the candidates' numbers as arrays (HostState field names plus the filter's own
    `host_numbers`) and must reject exactly the hosts host_passes rejects, for the same
    reason; both reach their arithmetic through the same functions of rules.py. A filter
    without it is run host by host there too.
    """

    name = ""
    # Facts that cannot change between the instances of one request (is the host up?) are
    # checked for the first instance only, as in Nova.
    run_filter_once_per_request = False
    # Whether a host's answer can change because another host was chosen (affinity: once a
    # group member lands somewhere, every other host is out). The vectorised path re-runs such
    # filters on every candidate; the others only on the host that was just consumed.
    depends_on_other_hosts = False
    # The filter's own per-host numbers: name -> HostNumber. host_passes reads one with
    # self.number(name, ...); vector_rejects finds them as columns of the same name.
    host_numbers: dict[str, HostNumber] = {}
    # HostState fields this filter reads beyond those every host-state read gives (names,
    # status, the resource numbers, zone, aggregates, hypervisor version): the ledger reads
    # them only for requests whose filters need them.
    host_fields: frozenset[str] = frozenset()

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

    def number(self, name: str, host_state: HostState, spec: RequestSpec) -> Any:
        """One of this filter's host_numbers for one host."""
        return self.host_numbers[name].value(host_state, spec)

    def reject(self, host_state: HostState, reason: str, **numbers: Any) -> Rejection:
        return Rejection(host=host_state.host, filter=self.name, reason=reason, **numbers)
