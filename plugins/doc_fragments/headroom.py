# The operator's failover headroom settings (N+k), shared by berth.fleet.server (a launch checks
# them before it claims), berth.fleet.schedule (the roles' launch, the same check) and berth.fleet.capacity (which reports the headroom).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  failover_hosts:
    description:
      - How many failed hypervisors' HA instances (C(ha) true) the fleet keeps room to restart
        (N+k, as VMware HA's and oVirt's admission control). 0 keeps none and costs a launch nothing.
      - Worked out as an evacuation would place them, with this run's filters and weighers and each
        instance's recorded request (zone, server group, hints, NUMA), highest C(ha_priority) first,
        never by summing free memory. Checked are the loss of each hypervisor that holds an HA
        instance and, for more than 1, each such hypervisor with the others that hold the most HA
        memory; the docs' headroom guide says what that leaves out.
      - "Per aggregate, a mapping of aggregate names to k (V({prod: 2, batch: 0})): a hypervisor keeps the
        largest k of its aggregates (none in no aggregate named), and the hosts lost together with it are of
        the same aggregate. Restarts go wherever the filters let them."
      - An operator setting (C(berth_failover_hosts)), never a requester's.
    type: raw
    default: 0
  failover_enforce:
    description:
      - What a launch does that would leave a loss of O(failover_hosts) hypervisors that could not be
        absorbed and that could be before it - V(refuse) it (nothing claimed) or V(warn) and launch. Either
        way it names the hypervisors whose loss could then not be absorbed. Where the headroom is
        broken already, a launch that breaks it no further is warned.
      - An operator setting (C(berth_failover_enforce)).
    type: str
    choices: [refuse, warn]
    default: refuse
"""
