from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.names import (
    SOFT_ANTI_AFFINITY_WEIGHER,
    SOFT_ANTI_AFFINITY_WEIGHT_MULTIPLIER,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.soft_affinity import (
    ServerGroupSoftAffinityWeigher,
)


class ServerGroupSoftAntiAffinityWeigher(ServerGroupSoftAffinityWeigher):
    """Policy "soft-anti-affinity": hosts with more members of the group weigh less."""

    name = SOFT_ANTI_AFFINITY_WEIGHER
    multiplier_option = SOFT_ANTI_AFFINITY_WEIGHT_MULTIPLIER
    default_multiplier = 1.0
    policy = "soft-anti-affinity"
    sign = -1
