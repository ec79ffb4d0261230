from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    AGGREGATE_IMAGE_PROPERTIES_ISOLATION,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_AGGREGATE_IMAGE_PROPERTIES,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


def property_text(value: Any) -> str:
    """An image property as text, the way aggregate metadata and Glance hold every value:
    a YAML true is "true", as Glance would store it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class AggregateImagePropertiesIsolation(BaseHostFilter):
    """For each metadata key of the host's aggregates (values split at commas) that the
    image's properties also set, the image's value must be one of the aggregate's, as Nova's.
    A property the image does not set does not count.

    With aggregate_image_properties_isolation_namespace, only keys that start with it and
    aggregate_image_properties_isolation_separator (default ".") count. Berth's image
    properties are a plain mapping, so any property name can be isolated on; Nova since
    Liberty reads only the properties its image schema knows.
    """

    name = AGGREGATE_IMAGE_PROPERTIES_ISOLATION
    run_filter_once_per_request = True

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        namespace = spec.aggregate_image_properties_isolation_namespace
        prefix = f"{namespace}{spec.aggregate_image_properties_isolation_separator}"
        for key, values in host_state.aggregate_metadata().items():
            if namespace and not key.startswith(prefix):
                continue
            wanted = spec.image_properties.get(key)
            # Nova's test is on the value's truth: an empty or false property does not count.
            if wanted and property_text(wanted) not in values:
                return self.reject(host_state, REASON_AGGREGATE_IMAGE_PROPERTIES,
                                   detail=f"{key}: {property_text(wanted)} is not one of "
                                          f"{', '.join(values)}")
        return None
