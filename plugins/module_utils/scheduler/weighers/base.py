from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    Number,
    WeightDetail,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


def normalize(
    values: Sequence[Number], minval: Number | None = None, maxval: Number | None = None
) -> list[float]:
    """Scale values to [0, 1], as Nova's weights.normalize() does.

    A fixed bound replaces the candidates' own minimum or maximum, and values beyond it count
    as the bound: with minval 0, a host with negative free RAM weighs the same as one with
    none, and the rest are divided by the largest. Equal bounds give 0.0 for every value.
    """
    if not values:
        return []
    if minval is not None:
        values = [max(value, minval) for value in values]
    if maxval is not None:
        values = [min(value, maxval) for value in values]
    lower = min(values) if minval is None else minval
    upper = max(values) if maxval is None else maxval
    if lower == upper:
        return [0.0] * len(values)
    span = float(upper - lower)
    return [(value - lower) / span for value in values]


class BaseWeigher:
    """Scores a host; higher wins once normalised and multiplied.

    The vectorised path (vector.py) may read `vector_raw` (the raw values of all candidates at once
    from their arrays) instead of calling raw_value per host; both must agree exactly.
    """

    name = ""
    multiplier_option = ""  # the key in RequestSpec.weight_multipliers and aggregate metadata
    default_multiplier = 1.0
    minval: Number | None = None
    # -1.0 where Nova negates the configured multiplier rather than the raw value (the two
    # differ as soon as hosts have different multipliers).
    multiplier_sign = 1.0
    # HostState fields read beyond the usual ones (see BaseHostFilter.host_fields).
    host_fields: frozenset[str] = frozenset()

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> Number:
        raise NotImplementedError

    def host_fields_for(self, spec: RequestSpec) -> frozenset[str]:
        """The fields this request makes the weigher read (``host_fields`` unless it has
        nothing to weigh)."""
        return self.host_fields

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        return None

    def multiplier(self, host_state: HostState, spec: RequestSpec) -> float:
        """The request's multiplier, unless the host's aggregates set the option (Nova's
        utils.get_weight_multiplier: the minimum of their values wins), times
        ``multiplier_sign``."""
        value = spec.weight_multipliers.get(self.multiplier_option, self.default_multiplier)
        if host_state.aggregates:
            value = host_state.aggregate_number(self.multiplier_option, value)
        return value if self.multiplier_sign == 1 else self.multiplier_sign * value


@dataclass
class WeighedHost:
    """A candidate with its total weight; position is its index in the weighed sequence."""

    position: int
    host_state: HostState
    weight: float
    weights: list[WeightDetail]


def _added_in_order(values: Iterable[float]) -> float:
    """The plain left-to-right float sum, as the vectorised path adds its columns. Not sum():
    from Python 3.12 it compensates rounding, so its last digit can differ from numpy's and the
    two engines would rank two nearly equal hosts differently."""
    total = 0.0
    for value in values:
        total += value
    return total


def weigh_hosts(
    host_states: Sequence[HostState], weighers: Sequence[BaseWeigher], spec: RequestSpec
) -> list[WeighedHost]:
    """Weigh the candidates and sort them best first; ties keep the candidates' order."""
    if len(host_states) == 1:
        # A lone candidate wins whatever its score; the weight would only mislead.
        return [WeighedHost(0, host_states[0], 0.0, [])]

    details: list[list[WeightDetail]] = [[] for _host in host_states]
    for weigher in weighers:
        raw_values = [weigher.raw_value(host_state, spec) for host_state in host_states]
        normalized = normalize(raw_values, minval=weigher.minval)
        for position, (raw, value) in enumerate(zip(raw_values, normalized)):
            multiplier = weigher.multiplier(host_states[position], spec)
            details[position].append(
                WeightDetail(weigher.name, raw, value, multiplier, value * multiplier)
            )

    weighed = [
        WeighedHost(position, host_state, _added_in_order(d.weighted for d in details[position]),
                    details[position])
        for position, host_state in enumerate(host_states)
    ]
    # list.sort is stable, with reverse=True too.
    weighed.sort(key=lambda candidate: candidate.weight, reverse=True)
    return weighed
