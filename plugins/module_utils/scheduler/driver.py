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
    ReasonCount,
    closest_misses,
    count_reasons,
    failure_summary,
    success_summary,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.image_properties import (
    VERSION_KEY,
    canonical_image_properties,
    parse_version_requirement,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.json_filter import (
    parse_query,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.retry import (
    check_retry_hosts,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.simple_cidr_affinity import (
    affinity_network,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
    Flavor,
    HostState,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
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
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (
    ServerGroup,
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_bool,
    check_integer,
    check_names,
    check_number,
    check_optional_string,
    check_string_list,
    is_integer,
    is_number,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
    WeighedHost,
    weigh_hosts,
)

RUNNERS_UP_SHOWN = 3
DRIVERS = ("filter_scheduler", "chance")
EXPLAIN_MODES = ("auto", "full", "compact")
ENGINES = ("auto", "plain", "vectorized")
# With explain "auto", fleets up to this size get every rejected host in the answer; larger
# ones get the counts per reason and the closest misses, which stay small at 100,000 hosts.
AUTO_FULL_EXPLAIN_HOSTS = 100
# With engine "auto", the vectorised path takes over from this many hosts (when NumPy is
# there); below it, setting up arrays costs more than it saves.
AUTO_VECTORIZED_HOSTS = 200
HINT_KEYS = ("same_host", "different_host", "query", "group", "build_near_host_ip", "cidr")
# The project a launch belongs to when it names none: one team, one project. Recorded on the
# instance; AggregateMultiTenancyIsolation compares it with its aggregates' filter_tenant_id.
DEFAULT_PROJECT_ID = "default"


@dataclass
class RequestSpec:
    """One placement request: `count` instances of `flavor`, with Nova's option names."""

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
    driver: str = "filter_scheduler"
    availability_zone: str | None = None
    default_availability_zone: str = "nova"
    image_id: str | None = None
    image_properties: dict[str, Any] = field(default_factory=dict)
    scheduler_hints: dict[str, Any] = field(default_factory=dict)
    server_group: ServerGroup | None = None
    # Nova's project_id (AggregateMultiTenancyIsolation).
    project_id: str = DEFAULT_PROJECT_ID
    # [host, nodename] pairs this instance was already tried on (a host name alone: all its
    # nodes), for RetryFilter.
    retry_hosts: list[Any] = field(default_factory=list)
    max_instances_per_host: int = 50
    max_io_ops_per_host: int = 8
    isolated_hosts: list[str] = field(default_factory=list)
    isolated_images: list[str] = field(default_factory=list)
    restrict_isolated_hosts_to_isolated_images: bool = True
    # ["name=ratio", ...] as Nova's [metrics] weight_setting, or (name, ratio) pairs.
    metrics_weight_setting: list[Any] = field(default_factory=list)
    metrics_weight_of_unavailable: float = -10000.0
    # Nova's [metrics] required: a candidate without a weighed metric fails the request.
    metrics_required: bool = True
    # ["name=ratio", ...] as Nova's image_props_weight_setting (ImagePropertiesWeigher).
    image_props_weight_setting: list[Any] = field(default_factory=list)
    # Nova's options of AggregateImagePropertiesIsolation.
    aggregate_image_properties_isolation_namespace: str | None = None
    aggregate_image_properties_isolation_separator: str = "."
    explain: str = "auto"
    engine: str = "auto"
    # Nova's service_down_time: a host whose last tracker sync is older counts as down.
    service_down_time: int = 600
    # What the build needs on the host (Berth's PoolImageFilter and NetworkFilter): the image
    # volume its storage pool must hold (None when the launch uploads it where missing), and
    # the libvirt networks it must define.
    image_volume: str | None = None
    requested_networks: list[str] = field(default_factory=list)

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
        for name, allowed in (("driver", DRIVERS), ("explain", EXPLAIN_MODES),
                              ("engine", ENGINES)):
            if getattr(self, name) not in allowed:
                raise SchedulerInputError(
                    name, f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        for name in ("availability_zone", "image_id", "image_volume"):
            check_optional_string(name, getattr(self, name))
        check_integer("service_down_time", self.service_down_time, minimum=1)
        self.requested_networks = check_string_list("requested_networks", self.requested_networks)
        if not isinstance(self.default_availability_zone, str) or not self.default_availability_zone:
            raise SchedulerInputError("default_availability_zone",
                                      "default_availability_zone must be a non-empty string")
        if not isinstance(self.image_properties, Mapping):
            raise SchedulerInputError(
                "image_properties",
                f"image_properties must be a mapping, got {self.image_properties!r}")
        self.image_properties = canonical_image_properties(dict(self.image_properties))
        requirement = self.image_properties.get(VERSION_KEY)
        if requirement:
            try:
                parse_version_requirement(requirement)
            except ValueError as exc:
                raise SchedulerInputError(f"image_properties.{VERSION_KEY}", str(exc)) from None
        self.scheduler_hints = self._check_hints(self.scheduler_hints)
        if self.server_group is not None and not isinstance(self.server_group, ServerGroup):
            self.server_group = server_group_from_dict(self.server_group)
        group_hint = self.scheduler_hints.get("group")
        if group_hint is not None and (self.server_group is None
                                       or group_hint != self.server_group.name):
            raise SchedulerInputError(
                "scheduler_hints.group",
                f"scheduler_hints.group names server group {group_hint!r}, but server_group "
                f"describes {self.server_group.name if self.server_group else 'no group'}",
            )
        self.retry_hosts = check_retry_hosts(self.retry_hosts)
        if not isinstance(self.project_id, str) or not self.project_id:
            raise SchedulerInputError("project_id", f"project_id must be a non-empty string, "
                                                    f"got {self.project_id!r}")
        check_integer("max_instances_per_host", self.max_instances_per_host, minimum=0)
        check_integer("max_io_ops_per_host", self.max_io_ops_per_host, minimum=0)
        self.isolated_hosts = check_string_list("isolated_hosts", self.isolated_hosts)
        self.isolated_images = check_string_list("isolated_images", self.isolated_images)
        check_bool("restrict_isolated_hosts_to_isolated_images",
                   self.restrict_isolated_hosts_to_isolated_images)
        self.metrics_weight_setting = _check_ratio_setting("metrics_weight_setting",
                                                           self.metrics_weight_setting)
        check_number("metrics_weight_of_unavailable", self.metrics_weight_of_unavailable)
        check_bool("metrics_required", self.metrics_required)
        self.image_props_weight_setting = _check_ratio_setting("image_props_weight_setting",
                                                               self.image_props_weight_setting)
        check_optional_string("aggregate_image_properties_isolation_namespace",
                              self.aggregate_image_properties_isolation_namespace)
        if not isinstance(self.aggregate_image_properties_isolation_separator, str):
            raise SchedulerInputError(
                "aggregate_image_properties_isolation_separator",
                f"aggregate_image_properties_isolation_separator must be a string, got "
                f"{self.aggregate_image_properties_isolation_separator!r}")

    @staticmethod
    def _check_hints(hints: Any) -> dict[str, Any]:
        if not isinstance(hints, Mapping):
            raise SchedulerInputError("scheduler_hints",
                                      f"scheduler_hints must be a mapping, got {hints!r}")
        checked: dict[str, Any] = {}
        for key, value in hints.items():
            if key not in HINT_KEYS:
                raise SchedulerInputError(
                    f"scheduler_hints.{key}",
                    f"scheduler_hints has an unknown hint {key!r}; allowed: {', '.join(HINT_KEYS)}",
                )
            if value is None:
                continue
            if key in ("same_host", "different_host"):
                # Nova takes one uuid or a list of them.
                value = [value] if isinstance(value, str) else value
                checked[key] = check_string_list(f"scheduler_hints.{key}", value)
            elif key == "query":
                checked[key] = parse_query(value)
            elif key in ("build_near_host_ip", "cidr"):
                checked[key] = value
            else:
                check_optional_string("scheduler_hints.group", value)
                checked[key] = value
        # Checked together: the address and the prefix make one network.
        affinity_network(checked)
        return checked

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


def _check_ratio_setting(field_name: str, value: Any) -> list[tuple[str, float]]:
    """Nova's "name=ratio" list options (metrics and image properties weight settings)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SchedulerInputError(field_name, f"{field_name} must be a list of 'name=ratio', "
                                              f"got {value!r}")
    pairs = []
    for item in value:
        if isinstance(item, str):
            name, sep, ratio_text = item.partition("=")
            try:
                ratio = float(ratio_text) if sep else None
            except ValueError:
                ratio = None
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            name, ratio = item
        else:
            name, ratio = "", None
        if not isinstance(name, str) or not name.strip() or not is_number(ratio):
            raise SchedulerInputError(
                field_name, f"{field_name} items must look like 'name=1.0', got {item!r}")
        pairs.append((name.strip(), float(ratio)))  # type: ignore[arg-type]
    return pairs


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

    `reasons` counts the hosts that were not candidates at the end by reason; `closest_misses`
    are the rejected hosts that came nearest to fitting. `rejections` holds every rejected
    host, each with the rejection from the pass that dropped it, in the order the hosts were
    given, when the request asked for the full explanation (explain "full", or "auto" on a
    small fleet); otherwise it is None.
    """

    ok: bool
    placements: list[Placement]
    summary: str
    failed_index: int | None
    hosts_total: int
    rejected_total: int
    reasons: list[dict[str, Any]]
    closest_misses: list[Rejection]
    rejections: list[Rejection] | None
    engine: str = "plain"  # which implementation decided; both decide the same

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "placements": [placement.to_dict() for placement in self.placements],
            "summary": self.summary,
            "failed_index": self.failed_index,
            "hosts_total": self.hosts_total,
            "rejected_total": self.rejected_total,
            "reasons": self.reasons,
            "closest_misses": [rejection.to_dict() for rejection in self.closest_misses],
            "rejections": (None if self.rejections is None
                           else [rejection.to_dict() for rejection in self.rejections]),
            "engine": self.engine,
        }


@dataclass
class Ranked:
    """A candidate in weighed order: `slot` is the backend's handle for it."""

    slot: int
    weight: float


class Backend:
    """What the driver asks of an implementation; PlainBackend and fast.VectorBackend."""

    name = ""

    def __init__(self, hosts: Sequence[HostState], spec: RequestSpec,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> None:
        self.hosts = hosts
        self.spec = spec
        self.filters = filters
        self.weighers = weighers
        # Whether to keep every rejected host's Rejection (explain "full"); set by schedule().
        self.full_explain = False


class PlainBackend(Backend):
    """The reference implementation: every filter and weigher called per host, as Nova does."""

    name = "plain"

    def __init__(self, hosts: Sequence[HostState], spec: RequestSpec,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> None:
        super().__init__(hosts, spec, filters, weighers)
        self.candidates: list[tuple[int, HostState]] = []
        self.rejections: dict[int, Rejection] = {}
        self._weighed: list[WeighedHost] = []

    def start(self, positions: Sequence[int]) -> None:
        self.candidates = [(position, self.hosts[position].copy()) for position in positions]

    def reject(self, position: int, rejection: Rejection) -> None:
        self.rejections[position] = rejection

    def filter_pass(self, index: int, run_filters: bool) -> None:
        survivors = []
        for position, host_state in self.candidates:
            rejection = (first_rejection(self.filters, host_state, self.spec, index)
                         if run_filters else None)
            if rejection is None:
                survivors.append((position, host_state))
            else:
                self.rejections[position] = rejection
        self.candidates = survivors

    def candidate_count(self) -> int:
        return len(self.candidates)

    def rank(self, wanted: int | None) -> list[Ranked]:
        self._weighed = weigh_hosts([state for _position, state in self.candidates], self.weighers,
                                    self.spec)
        return [Ranked(item.position, item.weight) for item in self._weighed[:wanted]]

    def details(self, slot: int) -> list[WeightDetail]:
        for item in self._weighed:
            if item.position == slot:
                return item.weights
        return []

    def state(self, slot: int) -> HostState:
        return self.candidates[slot][1]

    def position(self, slot: int) -> int:
        return self.candidates[slot][0]

    def consume(self, slot: int) -> None:
        self.candidates[slot][1].consume(self.spec.flavor)

    def explanation(self) -> tuple[int, list[ReasonCount], list[Rejection], list[Rejection] | None]:
        pairs = sorted(self.rejections.items())
        misses = [rejection for _position, rejection in closest_misses(pairs)]
        return (len(pairs), count_reasons(pairs), misses,
                [rejection for _position, rejection in pairs] if self.full_explain else None)


def active_filters(spec: RequestSpec) -> list[Any]:
    """The request's enabled filters, without those that have nothing to do for it."""
    filters = [FILTERS[name]() for name in spec.enabled_filters]
    return [host_filter for host_filter in filters if not host_filter.is_noop(spec)]


def needed_host_fields(spec: RequestSpec) -> set[str]:
    """The HostState fields this request's filters and weighers read beyond the ones every
    host-state source gives (what the ledger must read besides its one table scan)."""
    fields: set[str] = set()
    for host_filter in active_filters(spec):
        fields.update(host_filter.host_fields)
    for name in spec.weighers:
        fields.update(WEIGHERS[name]().host_fields_for(spec))
    return fields


def schedule(hosts: Sequence[HostState] | HostTable, spec: RequestSpec) -> Decision:
    """Place spec.count instances on hosts, as Nova's FilterScheduler._schedule does.

    ``hosts`` is a list of HostStates or a HostTable (a fleet read as columns). Works on
    copies: the caller's host states and server group are left as they were, so the same
    snapshot can be scheduled again (check mode, then the real run).
    """
    hosts = HostTable.of(hosts)
    # The request's server group gains a member per placement; that is this run's business.
    if spec.server_group is not None:
        spec = dataclasses.replace(spec, server_group=spec.server_group.copy())
    weighers = [WEIGHERS[name]() for name in spec.weighers]
    backend = _backend(hosts, spec, active_filters(spec), weighers)
    rng = random.Random(spec.seed)
    backend.full_explain = spec.explain == "full" or (spec.explain == "auto"
                                                      and len(hosts) <= AUTO_FULL_EXPLAIN_HOSTS)
    backend.start(_select_candidates(hosts, spec, backend))
    # As in Nova, forcing a host or node skips the filters (the claim still checks capacity).
    run_filters = not (spec.force_hosts or spec.force_nodes)
    # The alternates and runners-up come from the best few; nothing below them is sorted.
    wanted = spec.host_subset_size + max(spec.max_attempts - 1, RUNNERS_UP_SHOWN)
    placements: list[Placement] = []

    def decision(failed_index: int | None) -> Decision:
        rejected, counts, misses, rejections = backend.explanation()
        if failed_index is None:
            summary = success_summary([placement.host for placement in placements])
        else:
            summary = failure_summary(counts, len(hosts), failed_index, spec.count, spec)
        return Decision(
            ok=failed_index is None, placements=placements if failed_index is None else [],
            summary=summary, failed_index=failed_index, hosts_total=len(hosts), rejected_total=rejected,
            reasons=[item.to_dict(spec) for item in counts], closest_misses=misses,
            rejections=rejections, engine=backend.name,
        )

    for index in range(spec.count):
        backend.filter_pass(index, run_filters)
        if not backend.candidate_count():
            return decision(index)

        if spec.driver == "chance":
            ranked = _chance_order(backend.candidate_count(), wanted, rng)
            chosen = ranked[0]
        else:
            ranked = backend.rank(wanted)
            best = ranked[:spec.host_subset_size]
            chosen = best[0] if len(best) == 1 else rng.choice(best)
        others = [candidate for candidate in ranked if candidate is not chosen]
        chosen_state = backend.state(chosen.slot)
        placements.append(Placement(
            index=index,
            host=chosen_state.host,
            nodename=chosen_state.nodename,
            uuid=chosen_state.uuid,
            weight=chosen.weight,
            weights=backend.details(chosen.slot) if spec.driver != "chance" else [],
            limits=dict(chosen_state.limits),
            alternates=[backend.state(other.slot).host for other in others[:spec.max_attempts - 1]],
            runners_up=[{"host": backend.state(other.slot).host, "weight": other.weight}
                        for other in others[:RUNNERS_UP_SHOWN]],
        ))
        # The next instance must see this one's resources gone, and its group member placed.
        backend.consume(chosen.slot)
        if spec.server_group is not None:
            spec.server_group.add(chosen_state.host)
        # Nova filters the next instance from this one's survivors, not from all hosts: the
        # backend keeps them as its candidates.

    return decision(None)


def _chance_order(candidates: int, wanted: int, rng: random.Random) -> list[Ranked]:
    """Nova's ChanceScheduler: a random host among those that passed; random alternates."""
    picked = rng.sample(range(candidates), min(wanted, candidates))
    return [Ranked(slot, 0.0) for slot in picked]


def _backend(hosts: Sequence[HostState], spec: RequestSpec,
             filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> Any:
    use_vectorized = spec.engine == "vectorized" or (
        spec.engine == "auto" and len(hosts) >= AUTO_VECTORIZED_HOSTS)
    if use_vectorized:
        try:
            from ansible_collections.berth.fleet.plugins.module_utils.scheduler import fast
            if fast.np is None:
                raise ImportError("numpy")
        except ImportError:
            # NumPy is a controller dependency; without it the plain path decides the same.
            if spec.engine == "vectorized":
                raise SchedulerInputError(
                    "engine", "engine 'vectorized' needs NumPy, which is not installed") from None
        else:
            return fast.VectorBackend(hosts, spec, filters, weighers)
    return PlainBackend(hosts, spec, filters, weighers)


def _select_candidates(hosts: HostTable, spec: RequestSpec, backend: Any) -> list[int]:
    """Apply ignore_hosts, then force_hosts and force_nodes, recording whom they drop.

    Host names match case-insensitively and node names exactly, as in Nova.
    """
    ignored = {name.lower() for name in spec.ignore_hosts}
    forced_hosts = {name.lower() for name in spec.force_hosts}
    forced_nodes = set(spec.force_nodes)
    if not (ignored or forced_hosts or forced_nodes):
        return list(range(len(hosts)))
    candidates = []
    for position, (host, nodename) in enumerate(zip(hosts.column("host"), hosts.column("nodename"))):
        # A table's nodename may be empty where a HostState would say its host name.
        nodename = nodename or host
        if host.lower() in ignored:
            backend.reject(position, Rejection(host, "ignore_hosts", REASON_IGNORED))
        elif forced_hosts and host.lower() not in forced_hosts:
            backend.reject(position, Rejection(host, "force_hosts", REASON_NOT_FORCED))
        elif forced_nodes and nodename not in forced_nodes:
            backend.reject(position, Rejection(host, "force_nodes", REASON_NOT_FORCED))
        else:
            candidates.append(position)
    return candidates


def first_rejection(
    filters: Sequence[BaseHostFilter], host_state: HostState, spec: RequestSpec, index: int
) -> Rejection | None:
    """The first filter that turns the host down for instance `index`, or None."""
    for host_filter in filters:
        if not host_filter.run_filter_for_index(index):
            continue
        rejection = host_filter.host_passes(host_state, spec)
        if rejection is not None:
            return rejection
    return None
