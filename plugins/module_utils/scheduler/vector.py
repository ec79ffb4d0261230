"""The vectorised path: the same decisions as PlainBackend, with NumPy arrays over the hosts.

Controller only (NumPy is a controller dependency; driver.py falls back to the plain path
without it). It gives exactly the plain path's decisions, weights, alternates and
explanations (tests/unit/plugins/module_utils/scheduler/test_vector_equivalence.py checks it on
random scenarios), because it leans on three facts of Nova's algorithm:

- Only the chosen host changes between the instances of a request (its usage is consumed, its
  group count grows). So after the first pass, only that host is filtered again, with the
  plain filters; the one exception is a filter whose answer depends on other hosts
  (affinity), which is re-run on every candidate.
- Weights are normalised per weigher over the candidates; when a weigher's bounds do not move
  and the candidates stay the same, only the chosen host's part changes.
- Every number is computed with the same IEEE operations, in the same order, as the plain
  path, so sums and ties come out bit for bit the same: the filters' vector_rejects call the
  same rules.py functions as their host_passes, on arrays.
- A weigher that raises (MetricsWeigher with metrics_required) meets its first offending
  candidate in the same order on both paths: the candidates only shrink between instances,
  so any offender is met at the first weighing.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    import numpy as np
except ImportError:  # the driver then takes the plain path (see driver._backend)
    np = None

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.assignment import take
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.backend import (
    Backend,
    Ranked,
    first_rejection,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.explain import (
    CLOSEST_MISSES_SHOWN,
    ReasonCount,
    sort_counts,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    HostNumber,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import HostState
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_table import HostTable
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    SHORTFALL_REASONS,
    Rejection,
    WeightDetail,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

_NUMBER_COLUMNS = (
    "vcpus_total", "vcpus_used", "total_usable_ram_mb", "free_ram_mb", "total_usable_disk_gb",
    "free_disk_mb", "num_instances", "num_io_ops", "cpu_allocation_ratio",
    "ram_allocation_ratio", "disk_allocation_ratio", "failed_builds",
)
_CONSUMED_COLUMNS = ("free_ram_mb", "free_disk_mb", "vcpus_used", "num_instances", "num_io_ops")
_MISSING = object()  # "no aggregate sets this key": no metadata value can be this object


class Columns:
    """The hosts' numbers as float64 arrays, one attribute per HostState field, and every
    per-host number that stays the same for the whole request (filters' own columns, such as
    allocation ratios), built once per request so that filtering is array operations only.
    Any other HostState field (images, networks...) is an object array, made on first use."""

    def __init__(self, hosts: HostTable, spec: RequestSpec,
                 filters: Sequence[BaseHostFilter]) -> None:
        count = len(hosts)
        self.hosts = hosts
        # Copies (the engine consumes into them), from the ledger's arrays where it gave some.
        for name in _NUMBER_COLUMNS:
            setattr(self, name, np.array(hosts.stored(name), dtype=np.float64))
        versions = hosts.stored("hypervisor_version")  # an array holds no None
        self.hypervisor_version = np.array(versions if isinstance(versions, np.ndarray)
                                           else [version or 0 for version in versions], dtype=np.float64)
        self.disabled = np.array(hosts.stored("disabled"), dtype=bool)
        self.service_up = np.array(hosts.stored("service_up"), dtype=bool)
        # NaN where the age is unknown (live facts): it never compares greater than a limit.
        ages = hosts.stored("sync_age_s")
        self.sync_age_s = np.array(ages if isinstance(ages, np.ndarray)
                                   else [np.nan if age is None else age for age in ages], dtype=np.float64)
        self.zeros = np.zeros(count, dtype=np.float64)
        self.group_members = np.zeros(count, dtype=np.float64)
        self.aggregate_groups = _aggregate_groups(hosts)
        # Each filter's own columns apart: RamFilter's and AggregateRamFilter's
        # "allocation_ratio" differ.
        self.per_filter: dict[str, dict[str, np.ndarray]] = {
            host_filter.name: {
                name: self._filter_column(number, spec)
                for name, number in host_filter.host_numbers.items()
            }
            for host_filter in filters
        }

    def __getattr__(self, name: str) -> np.ndarray:
        # Only for what __init__ did not set: any other HostState field, as objects.
        if name.startswith("_") or name in ("hosts", "per_filter"):
            raise AttributeError(name)
        try:
            values = self.hosts.column(name)
        except KeyError:
            raise AttributeError(name) from None
        array = np.fromiter(values, dtype=object, count=len(values))
        setattr(self, name, array)
        return array

    def _filter_column(self, number: HostNumber, spec: RequestSpec) -> np.ndarray:
        """HostNumber.value for every host."""
        if number.field is not None:
            default = np.array(getattr(self, number.field), dtype=np.float64)  # a copy
        else:
            default = np.full(len(self.hosts), getattr(spec, str(number.option)),
                              dtype=np.float64)
        if number.aggregate_key is None:
            return default
        return self.aggregate_numbers(number.aggregate_key, default, number.integer)

    def aggregate_numbers(self, key: str, default: np.ndarray,
                          integer: bool = False) -> np.ndarray:
        """HostState.aggregate_number(key, default, integer) for every host, `default` an
        array (which is updated and returned). Hosts without aggregates keep their default
        without any Python work; each group of hosts with the same aggregate metadata pays one
        lookup."""
        for positions, host in self.aggregate_groups:
            number = host.aggregate_number(key, _MISSING, integer)
            if number is not _MISSING:
                default[positions] = number
        return default


def _aggregate_groups(hosts: HostTable) -> list[tuple[np.ndarray, HostState]]:
    """The hosts that have aggregates, grouped so that every host of a group gets the same
    HostState.aggregate_number for any key: (positions, one of the hosts).

    The group key is what aggregate_values reads: each metadata name with its value as a
    string, aggregate after aggregate. One flat sequence is enough, as a name appears at most
    once per aggregate, so the sequence still gives each name's values in aggregate order.
    """
    groups: dict[tuple[tuple[Any, str], ...], tuple[list[int], int]] = {}
    for position, aggregates in enumerate(hosts.column("aggregates")):
        if aggregates:
            key = tuple([(name, str(value)) for aggregate in aggregates
                         for name, value in (aggregate.get("metadata") or {}).items()])
            groups.setdefault(key, ([], position))[0].append(position)
    return [(np.array(positions, dtype=np.int64), hosts[first]) for positions, first in groups.values()]


class _RowView:
    """Columns restricted to the current candidates, indexed lazily and only once each."""

    def __init__(self, columns: Columns, rows: np.ndarray | None,
                 host_filter: BaseHostFilter | None = None) -> None:
        self._columns = columns
        self._rows = rows
        self._own = columns.per_filter.get(host_filter.name, {}) if host_filter else {}

    def __getattr__(self, name: str) -> Any:
        values = self._own[name] if name in self._own else getattr(self._columns, name)
        if self._rows is not None:
            values = values[self._rows]
        setattr(self, name, values)
        return values


class _WeigherState:
    """One weigher over the candidates: raw values, multipliers, bounds, weighted parts."""

    def __init__(self, weigher: BaseWeigher, raw: np.ndarray, multipliers: np.ndarray) -> None:
        self.weigher = weigher
        self.raw = raw
        self.multipliers = multipliers
        self.bounds: tuple[float, float] | None = None
        self.weighted: np.ndarray | None = None

    def compact(self, keep: np.ndarray) -> None:
        self.raw = self.raw[keep]
        self.multipliers = self.multipliers[keep]
        self.bounds = None
        self.weighted = None

    def current_bounds(self) -> tuple[float, float]:
        # The same bounds as normalize(): a fixed minval replaces the minimum and clamps.
        minval = self.weigher.minval
        if minval is None:
            return float(self.raw.min()), float(self.raw.max())
        return float(minval), max(float(self.raw.max()), float(minval))

    def weigh(self, slots: np.ndarray | None) -> bool:
        """Bring the weighted parts up to date; True when every candidate's part changed."""
        bounds = self.current_bounds()
        if self.weighted is not None and bounds == self.bounds and slots is not None:
            if len(slots):
                self.weighted[slots] = self._weighted(self.raw[slots], bounds,
                                                      self.multipliers[slots])
            return False
        self.bounds = bounds
        self.weighted = self._weighted(self.raw, bounds, self.multipliers)
        return True

    def _weighted(self, raw: np.ndarray, bounds: tuple[float, float],
                  multipliers: np.ndarray) -> np.ndarray:
        lower, upper = bounds
        if lower == upper:
            return np.zeros(len(raw)) * multipliers
        if self.weigher.minval is not None:
            raw = np.maximum(raw, self.weigher.minval)
        return (raw - lower) / (upper - lower) * multipliers

    def contributes(self) -> bool:
        # A part that is 0.0 for every host (multiplier 0, or all values equal) adds nothing
        # to any total, which is never -0.0, so it is left out of the sum.
        if not (self.bounds is not None):
            raise AssertionError('internal state')
        return self.bounds[0] != self.bounds[1] and bool(np.any(self.multipliers != 0))

    def detail(self, host_state: HostState, spec: RequestSpec) -> WeightDetail:
        """The plain path's WeightDetail for one host, from the plain weigher's own numbers."""
        if not (self.bounds is not None):
            raise AssertionError('internal state')
        raw = self.weigher.raw_value(host_state, spec)
        lower, upper = self.bounds
        if lower == upper:
            normalized = 0.0
        else:
            value = raw if self.weigher.minval is None else max(raw, self.weigher.minval)
            normalized = (value - lower) / float(upper - lower)
        multiplier = self.weigher.multiplier(host_state, spec)
        return WeightDetail(self.weigher.name, raw, normalized, multiplier,
                            normalized * multiplier)


class VectorBackend(Backend):
    """The driver's backend over NumPy arrays; see the module docstring for why it agrees."""

    name = "vectorized"

    def __init__(self, hosts: HostTable, spec: RequestSpec,
                 filters: Sequence[BaseHostFilter], weighers: Sequence[BaseWeigher]) -> None:
        super().__init__(hosts, spec, filters, weighers)
        self.run_filters = True
        self.columns = Columns(hosts, spec, filters)
        count = len(hosts)
        self.rows = np.arange(count)
        # Per host: which reason (index into self.keys) turned it down, and the free amount.
        self.reason_ids = np.full(count, -1, dtype=np.int64)
        self.reason_free = np.full(count, np.nan)
        self.keys: list[tuple[str, str | None, Any]] = []
        self.key_ids: dict[tuple[str, str | None], int] = {}
        self.materialized: dict[int, Rejection] = {}
        self.misses: list[tuple[float, int, Rejection]] = []
        self.working: dict[int, HostState] = {}
        self.names = hosts.column("host")
        # Each weigher's per-host multiplier, aligned with self.weighers: they hold for the
        # whole request, so the first instance's weighing need not look them up.
        self.multipliers = [self._multipliers(weigher) for weigher in weighers]
        self.weigher_states: list[_WeigherState] | None = None
        self.weighed_rows = 0
        self.total: np.ndarray | None = None
        self.dirty: list[int] = []  # positions whose numbers changed since the last weighing
        self.index = 0
        group = spec.server_group
        if group is not None and group.members:
            for position, name in enumerate(self.names):
                if name in group.members:
                    self.columns.group_members[position] = group.members[name]

    # ---- the driver's interface --------------------------------------------------------------

    def start(self, positions: Sequence[int]) -> None:
        if len(positions) != len(self.hosts):
            self.rows = np.array(positions, dtype=np.int64)

    def reject(self, position: int, rejection: Rejection) -> None:
        self._record(position, rejection)

    def filter_pass(self, index: int, run_filters: bool) -> None:
        self.index = index
        self.run_filters = run_filters
        if not run_filters:
            return
        if index == 0:
            self._first_pass()
            return
        self._sync_group()
        keep = np.ones(len(self.rows), dtype=bool)
        chosen_slots = self._slots(self.dirty)
        # Only the consumed host can fail a filter that looks at the host alone.
        for slot in chosen_slots:
            position = int(self.rows[slot])
            rejection = first_rejection(self.filters, self.state_of(position), self.spec, index)
            if rejection is not None:
                self._record(position, rejection)
                keep[slot] = False
        for host_filter in self.filters:
            if host_filter.depends_on_other_hosts and host_filter.run_filter_for_index(index):
                self._run_filter(host_filter, keep, index)
        if not keep.all():
            self._compact(keep)

    def candidate_count(self) -> int:
        return len(self.rows)

    def rank(self, wanted: int | None) -> list[Ranked]:
        if len(self.rows) == 1:
            self.weigher_states = None
            return [Ranked(0, 0.0)]
        self._weigh()
        if not (self.total is not None):
            raise AssertionError('internal state')
        top = _top_slots(self.total, wanted)
        return [Ranked(int(slot), float(self.total[slot])) for slot in top]

    def details(self, slot: int) -> list[WeightDetail]:
        if self.weigher_states is None:
            return []
        host_state = self.state_of(int(self.rows[slot]))
        return [state.detail(host_state, self.spec) for state in self.weigher_states]

    def state(self, slot: int) -> HostState:
        position = int(self.rows[slot])
        host_state = self.state_of(position)
        if self.run_filters and not host_state.limits:
            # The plain path's filters record the limits on every host they admit; here
            # only the hosts that are looked at need them, and they pass by construction.
            first_rejection(self.filters, host_state, self.spec, self.index)
        return host_state

    def position(self, slot: int) -> int:
        return int(self.rows[slot])

    def consume(self, slot: int) -> dict | None:
        position = int(self.rows[slot])
        host_state = self.state_of(position)
        host_state.consume(self.spec.flavor, volume_disk_mb=self.spec.volume_disk_mb)
        assignment, _reason = take(host_state, self.exact)
        for name in _CONSUMED_COLUMNS:
            getattr(self.columns, name)[position] = getattr(host_state, name)
        # Other nodes of the same host name share its group membership.
        self.dirty = self.positions_of(host_state.host, position)
        return assignment

    def explanation(self) -> tuple[int, list[ReasonCount], list[Rejection], list[Rejection] | None]:
        rejected = self.reason_ids >= 0
        counts = []
        for key_id, (reason, resource, requested) in enumerate(self.keys):
            members = np.flatnonzero(self.reason_ids == key_id)
            if not len(members):
                continue
            free = self.reason_free[members]
            free = free[~np.isnan(free)]
            counts.append(ReasonCount(reason, resource, len(members), requested,
                                      float(free.max()) if len(free) else None, int(members[0])))
        misses = [rejection for _rank, _position, rejection in self.misses]
        rejections = None
        if self.full_explain:
            rejections = [self.materialized[position] for position in sorted(self.materialized)]
        return int(rejected.sum()), sort_counts(counts), misses, rejections

    def positions_of(self, name: str, position: int) -> list[int]:
        """Every position of host ``name`` (which is at ``position``): that one, unless the
        fleet lists several nodes under one host name. (Counting the name, a comparison per
        host, costs a fraction of hashing every name into a set, once per placed instance.)"""
        if self.names.count(name) == 1:
            return [position]
        return [where for where, host in enumerate(self.names) if host == name]

    # ---- filtering ---------------------------------------------------------------------------

    def state_of(self, position: int) -> HostState:
        """The host as this request left it (consumed), else the caller's untouched state."""
        host_state = self.working.get(position)
        if host_state is None:
            host_state = self.working[position] = self.hosts[position].copy()
        return host_state

    def _first_pass(self) -> None:
        keep = np.ones(len(self.rows), dtype=bool)
        for host_filter in self.filters:
            self._run_filter(host_filter, keep, 0)
        if not keep.all():
            self._compact(keep)

    def _run_filter(self, host_filter: BaseHostFilter, keep: np.ndarray, index: int) -> None:
        """Reject, among the candidates still kept, those `host_filter` turns down."""
        full_rows = len(self.rows) == len(self.hosts)
        view = _RowView(self.columns, None if full_rows else self.rows, host_filter)
        vector = host_filter.vector_rejects(view, self.spec)
        if vector is None:
            for slot in np.flatnonzero(keep):
                position = int(self.rows[slot])
                rejection = host_filter.host_passes(self._peek(position), self.spec)
                if rejection is not None:
                    self._record(position, rejection)
                    keep[slot] = False
            return
        for reason, resource, requested, mask, free in vector:
            hit = np.flatnonzero(mask & keep)
            if not len(hit):
                continue
            keep[hit] = False
            positions = self.rows[hit]
            key_id = self._key_id(reason, resource, requested)
            self.reason_ids[positions] = key_id
            if free is not None:
                self.reason_free[positions] = free[hit]
            if self.full_explain:
                for position in positions.tolist():
                    self.materialized[position] = self._materialize(position, index)
            if reason in SHORTFALL_REASONS and free is not None and requested:
                self._note_misses(positions, (requested - free[hit]) / requested, index)

    def _peek(self, position: int) -> HostState:
        return self.working.get(position) or self.hosts[position]

    def _materialize(self, position: int, index: int) -> Rejection:
        rejection = first_rejection(self.filters, self._peek(position).copy(), self.spec, index)
        if not (rejection is not None):
            raise AssertionError("the vectorised and plain filters disagree")
        return rejection

    def _note_misses(self, positions: np.ndarray, shortfalls: np.ndarray, index: int) -> None:
        order = np.lexsort((positions, shortfalls))[:CLOSEST_MISSES_SHOWN]
        for at in order.tolist():
            position = int(positions[at])
            self._keep_miss(float(shortfalls[at]), position,
                            self.materialized.get(position) or self._materialize(position, index))

    def _keep_miss(self, shortfall: float, position: int, rejection: Rejection) -> None:
        self.misses.append((shortfall, position, rejection))
        self.misses.sort(key=lambda item: (item[0], item[1]))
        del self.misses[CLOSEST_MISSES_SHOWN:]

    def _record(self, position: int, rejection: Rejection) -> None:
        self.materialized[position] = rejection
        self.reason_ids[position] = self._key_id(rejection.reason, rejection.resource,
                                                 rejection.requested)
        self.reason_free[position] = np.nan if rejection.free is None else rejection.free
        shortfall = rejection.shortfall()
        if shortfall is not None:
            self._keep_miss(shortfall, position, rejection)

    def _key_id(self, reason: str, resource: str | None, requested: Any) -> int:
        key = (reason, resource)
        if key not in self.key_ids:
            self.key_ids[key] = len(self.keys)
            self.keys.append((reason, resource, requested))
        return self.key_ids[key]

    def _sync_group(self) -> None:
        group = self.spec.server_group
        if group is None:
            return
        for position in self.dirty:
            self.columns.group_members[position] = group.member_count(self.names[position])

    def _slots(self, positions: Sequence[int]) -> list[int]:
        slots = np.searchsorted(self.rows, positions)
        return [int(slot) for slot, position in zip(slots, positions)
                if slot < len(self.rows) and self.rows[slot] == position]

    def _compact(self, keep: np.ndarray) -> None:
        self.rows = self.rows[keep]
        self.weighed_rows = len(self.rows)
        if self.weigher_states is not None:
            for state in self.weigher_states:
                state.compact(keep)
        self.total = None

    # ---- weighing ----------------------------------------------------------------------------

    def _weigh(self) -> None:
        if self.weigher_states is None or self.weighed_rows != len(self.rows):
            self.weighed_rows = len(self.rows)
            self.weigher_states = [self._weigher_state(weigher, multipliers) for weigher,
                                   multipliers in zip(self.weighers, self.multipliers)]
            self.total = None
            changed_slots = None
        else:
            changed_slots = self._slots(self.dirty)
            for state in self.weigher_states:
                for slot in changed_slots:
                    position = int(self.rows[slot])
                    state.raw[slot] = state.weigher.raw_value(self.state_of(position), self.spec)
        self.dirty = []
        resum = self.total is None
        for state in self.weigher_states:
            slots = None if changed_slots is None else np.array(changed_slots, dtype=np.int64)
            if state.weigh(slots):
                resum = True
        parts = [state.weighted for state in self.weigher_states if state.contributes()]
        if resum:
            total = np.zeros(len(self.rows))
            for part in parts:
                total += part
            self.total = total
        else:
            if not (self.total is not None and changed_slots is not None):
                raise AssertionError('internal state')
            for slot in changed_slots:
                value = 0.0
                for part in parts:
                    value += float(part[slot])
                self.total[slot] = value

    def _multipliers(self, weigher: BaseWeigher) -> np.ndarray:
        """weigher.multiplier(host, spec) for every host."""
        if type(weigher).multiplier is not BaseWeigher.multiplier:
            # A weigher with its own rule: ask it host by host.
            return np.array([weigher.multiplier(host, self.spec) for host in self.hosts],
                            dtype=np.float64)
        # BaseWeigher.multiplier: the request's default, unless the host's aggregates set a
        # number for the option (the smallest wins), times the weigher's sign.
        default = self.spec.weight_multipliers.get(weigher.multiplier_option,
                                                   weigher.default_multiplier)
        if not self.columns.aggregate_groups:
            # Every host has the request's: one number, seen as a column (read only) without
            # an array per weigher.
            return np.broadcast_to(weigher.multiplier_sign * np.float64(float(default)), (len(self.hosts),))
        multipliers = self.columns.aggregate_numbers(
            weigher.multiplier_option, np.full(len(self.hosts), float(default)))
        if weigher.multiplier_sign != 1:
            multipliers = weigher.multiplier_sign * multipliers
        return multipliers

    def _weigher_state(self, weigher: BaseWeigher, multipliers: np.ndarray) -> _WeigherState:
        full_rows = len(self.rows) == len(self.hosts)
        view = _RowView(self.columns, None if full_rows else self.rows)
        raw = weigher.vector_raw(view, self.spec)
        if raw is None:
            raw = np.array([weigher.raw_value(self._peek(p), self.spec)
                            for p in self.rows.tolist()], dtype=np.float64)
        else:
            raw = np.array(raw, dtype=np.float64)
            # Consumed hosts: the plain weigher reads their numbers as they are now.
            for slot in self._slots(sorted(self.working)):
                raw[slot] = weigher.raw_value(self.working[int(self.rows[slot])], self.spec)
        return _WeigherState(weigher, raw, multipliers if full_rows else multipliers[self.rows])


def _top_slots(total: np.ndarray, wanted: int | None) -> np.ndarray:
    """The best `wanted` slots, best first, equal weights in slot order (a stable sort)."""
    count = len(total)
    if wanted is None or wanted >= count:
        return np.argsort(-total, kind="stable")
    threshold = np.partition(total, count - wanted)[count - wanted]
    above = np.flatnonzero(total > threshold)
    equal = np.flatnonzero(total == threshold)[:wanted - len(above)]
    chosen = np.sort(np.concatenate((above, equal)))
    return chosen[np.argsort(-total[chosen], kind="stable")]
