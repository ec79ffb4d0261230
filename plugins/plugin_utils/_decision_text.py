"""How a placement decision reads to the user: why no host was valid, and what an instance's
recorded request turned hosts down for. Private to the collection."""

from __future__ import annotations

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import Decision
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import REQUEST_REASONS


def failure_message(decision: Decision) -> str:
    """'no valid host: <summary>. hv1: <why>; ...', every host on small fleets, else the
    closest misses (the counts per reason are in the summary already)."""
    if decision.rejections is not None:
        named, label = decision.rejections, ""
    else:
        named, label = decision.closest_misses, "closest misses: "
    if not named:
        return f"no valid host: {decision.summary}"
    reasons = "; ".join(f"{rejection.host}: {rejection.message()}" for rejection in named)
    return f"no valid host: {decision.summary}. {label}{reasons}"


def recorded_constraints(decision: Decision) -> str | None:
    """What the instance's recorded request turned hosts down for in ``decision``, as the
    explanation words it ('2 not in availability zone az1, 1 with different_host instances'),
    or None when nothing it asked for removed a host."""
    removed = [f"{item['count']} {item['phrase']}" for item in decision.reasons
               if item["reason"] in REQUEST_REASONS]
    return ", ".join(removed) or None
