# The operator's batch placement settings, shared by berth.fleet.server and berth.fleet.schedule
# (a launch of many instances) and berth.fleet.deployment (several entries placed together).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  placement:
    description:
      - How a launch of more than one instance is placed - V(greedy) one instance after another on the best
        host of the moment, as Nova's FilterScheduler; V(packing) all of them together by a solver (CP-SAT,
        from the optional Python package C(ortools)) that keeps every filter and server group and uses as
        few hosts as it can find within O(packing_time_limit).
      - Packing falls back to the greedy order, and its explanation (the decision's C(packing)) says why,
        where C(ortools) is not installed, the solver finds nothing in time, the time limit is 0, or the
        request forces hosts or asks for NUMA cells, dedicated CPUs, pages or devices. Packed placements
        have no alternates (a failed build is not retried elsewhere).
      - An operator setting (C(berth_placement)), never a requester's.
    type: str
    choices: [greedy, packing]
    default: greedy
  packing_time_limit:
    description:
      - How long, in seconds, the packing solver may search; its best placement so far is taken then, with
        the gap to its bound in the explanation. 0 places in the greedy order.
      - An operator setting (C(berth_packing_time_limit)).
    type: float
    default: 10.0
  packing_objective:
    description:
      - What packing minimises - V(hosts) the hosts in use afterwards, V(stranded) the free memory of the
        empty hosts it starts using (prefers the smaller hosts). Hosts that hold instances already cost nothing.
      - An operator setting (C(berth_packing_objective)).
    type: str
    choices: [hosts, stranded]
    default: hosts
"""
