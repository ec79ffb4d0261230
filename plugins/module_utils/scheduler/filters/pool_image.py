from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import POOL_IMAGE_FILTER
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.filters.base import (
    BaseHostFilter,
    VectorReject,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import (
    REASON_IMAGE_MISSING,
    REASON_IMAGE_REFUSED,
    Rejection,
)

if TYPE_CHECKING:
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import (
        HostState,
    )
    from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import (
        RequestSpec,
    )


class PoolImageFilter(BaseHostFilter):
    """Only hosts whose instance storage pool holds the launch's image volume.

    Berth's own (Nova has no such filter: its images come from Glance). Without it a host
    lacking the image is picked and fails at build time; with it the host is passed over with
    the reason. A launch that uploads its image where it is missing (image.source) sets no
    image_volume, and the filter has nothing to do.
    """

    name = POOL_IMAGE_FILTER
    run_filter_once_per_request = True
    host_fields = frozenset({"images", "refused_images"})

    def is_noop(self, spec: RequestSpec) -> bool:
        return not spec.image_volume

    def host_passes(self, host_state: HostState, spec: RequestSpec) -> Rejection | None:
        if not spec.image_volume or spec.image_volume in host_state.images:
            return None
        refused = host_state.refused_images.get(spec.image_volume)
        if refused is not None:
            return self.reject(host_state, REASON_IMAGE_REFUSED, detail=refused)
        return self.reject(host_state, REASON_IMAGE_MISSING, detail=spec.image_volume)

    def vector_rejects(self, columns: Any, spec: RequestSpec) -> list[VectorReject]:
        import numpy as np  # the vectorised path only, which has NumPy

        # One membership test per host, on what the ledger read (only the requested name).
        image = spec.image_volume
        has = np.array([image in names for names in columns.images], dtype=bool)
        refused = np.array([image in reasons for reasons in columns.refused_images], dtype=bool)
        return [(REASON_IMAGE_REFUSED, None, None, ~has & refused, None),
                (REASON_IMAGE_MISSING, None, None, ~has, None)]
