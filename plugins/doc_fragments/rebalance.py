# The rebalancer's anti-churn settings (berth.fleet.rebalance; plugins/plugin_utils/_rebalance_plan.py).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  rebalance_threshold:
    description:
      - The figure (the imbalance for V(spread), the packing figure for V(pack)) at or under which
        nothing moves. The imbalance is the larger of the standard deviations, across the up and
        enabled hypervisors, of the used fraction of RAM and of vCPUs (each of the limit RamFilter and
        CoreFilter hold the host to); the packing figure is the share of those hypervisors in use
        beyond the fewest that could hold what is used.
      - An operator setting (C(berth_rebalance_threshold)).
    type: float
    default: 0.1
  rebalance_min_gain:
    description:
      - A move that lowers the figure by less than this is not proposed (for V(pack), the moves
        that empty one host, together).
      - An operator setting (C(berth_rebalance_min_gain)).
    type: float
    default: 0.005
  rebalance_max_moves:
    description:
      - The most moves one run plans and makes.
      - An operator setting (C(berth_rebalance_max_moves)).
    type: int
    default: 10
  rebalance_cooldown_seconds:
    description:
      - An instance that moved (to another hypervisor, by any move) less than this many seconds ago
        is left where it is.
      - An operator setting (C(berth_rebalance_cooldown_seconds)).
    type: int
    default: 3600
"""
