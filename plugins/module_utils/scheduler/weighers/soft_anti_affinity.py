from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.weighers.soft_affinity import (
    ServerGroupSoftAffinityWeigher,
)


class ServerGroupSoftAntiAffinityWeigher(ServerGroupSoftAffinityWeigher):
    """Policy "soft-anti-affinity": hosts with more members of the group weigh less."""

    name = "ServerGroupSoftAntiAffinityWeigher"
    multiplier_option = "soft_anti_affinity_weight_multiplier"
    default_multiplier = 1.0
    policy = "soft-anti-affinity"
    sign = -1
