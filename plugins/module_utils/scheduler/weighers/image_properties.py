from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    IMAGE_PROPERTIES_WEIGHER,
    IMAGE_PROPS_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.aggregate_image_properties_isolation import (
    property_text,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.base import (
    BaseWeigher,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class ImagePropertiesWeigher(BaseWeigher):
    """Hosts whose instances were built from images sharing the requested image's properties
    weigh more (Nova's, from 2025.1): for each requested (property, value), the number of the
    host's instances whose image has it, times the property's ratio in
    image_props_weight_setting ("name=ratio"; a property not listed there counts 0), or times
    1 when that setting is empty.

    A positive image_props_weight_multiplier packs such instances together, a negative one
    spreads them. Nova's default multiplier 0.0 turns the weigher off, and as in Nova it is the
    request's multiplier that does (an aggregate's multiplier does not turn it back on): the
    instances' properties are then not even read.
    """

    name = IMAGE_PROPERTIES_WEIGHER
    host_fields = frozenset({"instance_image_properties"})
    multiplier_option = IMAGE_PROPS_WEIGHT_MULTIPLIER
    default_multiplier = 0.0

    def _enabled(self, spec: RequestSpec) -> bool:
        return spec.weight_multipliers.get(self.multiplier_option, self.default_multiplier) != 0

    def host_fields_for(self, spec: RequestSpec) -> frozenset[str]:
        return self.host_fields if self._enabled(spec) else frozenset()

    def raw_value(self, host_state: HostState, spec: RequestSpec) -> float:
        if not self._enabled(spec):
            return 0.0
        requested = {(key, property_text(value)) for key, value in spec.image_properties.items()}
        existing: Counter[tuple[str, str]] = Counter()
        for properties in host_state.instance_image_properties:
            # Each instance counts once per (property, value).
            existing.update({(key, property_text(value)) for key, value in properties.items()})
        setting = dict(spec.image_props_weight_setting)
        weight = 0.0
        # Sorted, so that a sum of products comes out the same on every run (Nova's order is
        # that of a set).
        for prop in sorted(requested & set(existing)):
            ratio = setting.get(prop[0], 0.0) if setting else 1.0
            weight += ratio * existing[prop]
        return weight

    def vector_raw(self, columns: Any, spec: RequestSpec) -> Any:
        if not self._enabled(spec):
            return columns.zeros
        return None
