from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.explain import (
    failure_summary,
    success_summary,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.registry import (
    DEFAULT_FILTERS,
    DEFAULT_WEIGHERS,
    FILTERS,
    WEIGHERS,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IGNORED,
    REASON_NOT_FORCED,
    Rejection,
    WeightDetail,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_integer,
    check_names,
    check_number,
    check_string_list,
    is_integer,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    weigh_hosts,
)

RUNNERS_UP_SHOWN = 3


@dataclass
class RequestSpec:
    """One placement request: `count` instances of `flavor`, as Nova's RequestSpec."""

    flavor: Flavor
    count: int = 1
    enabled_filters: list[str] = field(default_factory=lambda: list(DEFAULT_FILTERS))
    weighers: list[str] = field(default_factory=lambda: list(DEFAULT_WEIGHERS))
    # Option name (ram_weight_multiplier...) → value; a weigher not named here uses its default.
    weight_multipliers: dict[str, float] = field(default_factory=dict)
    host_subset_size: int = 1
    seed: int | None = None
    max_attempts: int = 3
    ignore_hosts: list[str] = field(default_factory=list)
    force_hosts: list[str] = field(default_factory=list)
    force_nodes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.flavor, Flavor):
            raise SchedulerInputError(
                "flavor", f"flavor must be a Flavor or a mapping, got {self.flavor!r}"
            )
        check_integer("count", self.count, minimum=1)
        check_integer("host_subset_size", self.host_subset_size, minimum=1)
        check_integer("max_attempts", self.max_attempts, minimum=1)
        if self.seed is not None and not is_integer(self.seed):
            raise SchedulerInputError("seed", f"seed must be an integer or null, got {self.seed!r}")
        self.enabled_filters = check_names("enabled_filters", self.enabled_filters, list(FILTERS),
                                           "filter")
        self.weighers = check_names("weighers", self.weighers, list(WEIGHERS), "weigher")
        self.weight_multipliers = _check_multipliers(self.weight_multipliers)
        self.ignore_hosts = check_string_list("ignore_hosts", self.ignore_hosts)
        self.force_hosts = check_string_list("force_hosts", self.force_hosts)
        self.force_nodes = check_string_list("force_nodes", self.force_nodes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestSpec:
        """Build from plain data (module arguments); `flavor` may be a mapping."""
        if not isinstance(data, Mapping):
            raise SchedulerInputError("request", f"a request must be a mapping, got {data!r}")
        allowed = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in allowed:
                raise SchedulerInputError(
                    key, f"unknown request option {key!r}; allowed: {', '.join(allowed)}"
                )
        if data.get("flavor") is None:
            raise SchedulerInputError("flavor", "flavor is required")
        values = dict(data)
        if isinstance(values["flavor"], Mapping):
            values["flavor"] = Flavor.from_dict(values["flavor"])
        # An explicit null means "not given", as Ansible passes unset options.
        return cls(**{key: value for key, value in values.items() if value is not None})


def _check_multipliers(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise SchedulerInputError(
            "weight_multipliers", f"weight_multipliers must be a mapping, got {value!r}"
        )
    allowed = sorted(weigher.multiplier_option for weigher in WEIGHERS.values())
    for option, multiplier in value.items():
        if option not in allowed:
            raise SchedulerInputError(
                "weight_multipliers",
                f"weight_multipliers names an unknown option {option!r}; "
                f"allowed: {', '.join(allowed)}",
            )
        check_number(f"weight_multipliers.{option}", multiplier)
    return dict(value)


@dataclass
class Placement:
    """Where one instance goes, and why there."""

    index: int
    host: str
    nodename: str
    uuid: str | None
    weight: float
    weights: list[WeightDetail]
    limits: dict[str, float]
    alternates: list[str]  # next best hosts to retry on, best first
    runners_up: list[dict[str, Any]]  # [{"host", "weight"}], to show how close the choice was

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["weights"] = [detail.to_dict() for detail in self.weights]
        return data


@dataclass
class Decision:
    """The answer to one request: all placements, or none and why.

    `rejections` holds every host that was not a candidate at the end, each with the
    rejection from the pass that dropped it, in the order the hosts were given.
    """

    ok: bool
    placements: list[Placement]
    summary: str
    failed_index: int | None
    hosts_total: int
    rejections: list[Rejection]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "placements": [placement.to_dict() for placement in self.placements],
            "summary": self.summary,
            "failed_index": self.failed_index,
            "hosts_total": self.hosts_total,
            "rejections": [rejection.to_dict() for rejection in self.rejections],
        }


def schedule(hosts: Sequence[HostState], spec: RequestSpec) -> Decision:
    """Place spec.count instances on hosts, as Nova's FilterScheduler._schedule does.

    Works on copies: the caller's host states are left as they were, so the same snapshot
    can be scheduled again (check mode, then the real run).
    """
    working = [host.copy() for host in hosts]
    filters = [FILTERS[name]() for name in spec.enabled_filters]
    weighers = [WEIGHERS[name]() for name in spec.weighers]
    rng = random.Random(spec.seed)
    # Keyed by position in `hosts`: Nova allows several nodes per host name.
    rejections: dict[int, Rejection] = {}
    candidates = _select_candidates(working, spec, rejections)
    # As in Nova, forcing a host or node skips the filters (the claim still checks capacity).
    skip_filters = bool(spec.force_hosts or spec.force_nodes)
    placements: list[Placement] = []

    for index in range(spec.count):
        survivors = []
        for position, host_state in candidates:
            rejection = None if skip_filters else _first_rejection(filters, host_state, spec,
                                                                   index)
            if rejection is None:
                survivors.append((position, host_state))
            else:
                rejections[position] = rejection
        if not survivors:
            ordered = [rejections[position] for position in sorted(rejections)]
            return Decision(
                ok=False,
                placements=[],
                summary=failure_summary(ordered, len(hosts), index, spec.count),
                failed_index=index,
                hosts_total=len(hosts),
                rejections=ordered,
            )

        weighed = weigh_hosts([host_state for _, host_state in survivors], weighers, spec)
        best = weighed[:spec.host_subset_size]
        chosen = best[0] if len(best) == 1 else rng.choice(best)
        others = [candidate for candidate in weighed if candidate is not chosen]
        chosen_state = chosen.host_state
        placements.append(Placement(
            index=index,
            host=chosen_state.host,
            nodename=chosen_state.nodename,
            uuid=chosen_state.uuid,
            weight=chosen.weight,
            weights=chosen.weights,
            limits=dict(chosen_state.limits),
            alternates=[other.host_state.host for other in others[:spec.max_attempts - 1]],
            runners_up=[{"host": other.host_state.host, "weight": other.weight}
                        for other in others[:RUNNERS_UP_SHOWN]],
        ))
        # The next instance must see this one's resources gone.
        chosen_state.consume(spec.flavor)
        # Nova filters the next instance from this one's survivors, not from all hosts.
        candidates = survivors

    return Decision(
        ok=True,
        placements=placements,
        summary=success_summary([placement.host for placement in placements]),
        failed_index=None,
        hosts_total=len(hosts),
        rejections=[rejections[position] for position in sorted(rejections)],
    )


def _select_candidates(
    working: list[HostState], spec: RequestSpec, rejections: dict[int, Rejection]
) -> list[tuple[int, HostState]]:
    """Apply ignore_hosts, then force_hosts and force_nodes, recording whom they drop.

    Host names match case-insensitively and node names exactly, as in Nova.
    """
    ignored = {name.lower() for name in spec.ignore_hosts}
    forced_hosts = {name.lower() for name in spec.force_hosts}
    forced_nodes = set(spec.force_nodes)
    candidates = []
    for position, host_state in enumerate(working):
        if host_state.host.lower() in ignored:
            rejections[position] = Rejection(host_state.host, "ignore_hosts", REASON_IGNORED)
        elif forced_hosts and host_state.host.lower() not in forced_hosts:
            rejections[position] = Rejection(host_state.host, "force_hosts", REASON_NOT_FORCED)
        elif forced_nodes and host_state.nodename not in forced_nodes:
            rejections[position] = Rejection(host_state.host, "force_nodes", REASON_NOT_FORCED)
        else:
            candidates.append((position, host_state))
    return candidates


def _first_rejection(
    filters: Sequence[BaseHostFilter], host_state: HostState, spec: RequestSpec, index: int
) -> Rejection | None:
    for host_filter in filters:
        if not host_filter.run_filter_for_index(index):
            continue
        rejection = host_filter.host_passes(host_state, spec)
        if rejection is not None:
            return rejection
    return None
