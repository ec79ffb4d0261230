"""A recorded scheduling decision as a person reads it: what was asked, which filters removed
which hosts, where each instance went and each weigher's part in that, beside the runners-up.
Private to the collection.

``decision_view`` is the one reading of a ledger decision record (Ledger.decisions): the fleet
report's page shows it (_fleet_report.py) and ``decision_lines`` prints it for
playbooks/explain.yml, through berth.fleet.ledger_info.
"""

from __future__ import annotations

from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.results import format_number

# Per decision, how many rejected hosts the page names (the decision keeps them all).
REJECTIONS_SHOWN = 20
# Per filter, how many of the hosts it removed the text names.
REMOVED_HOSTS_NAMED = 5


def to_the_second(iso: str | None) -> str:
    """A ledger time (ISO, UTC) to the second: what a reader needs, and what a browser parses."""
    return (iso or "").split(".")[0]


def _number(value: Any) -> str:
    return format_number(round(float(value or 0.0), 3))


def _parts(weights: Any) -> list[str]:
    """Each weigher's part; those that added nothing (a multiplier of 0, all hosts alike) would only
    bury the ones that decided."""
    return [f"{item['name']} {_number(item['weighted'])}" for item in weights or [] if item.get("weighted")]


def decision_view(record: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded decision (Ledger.decisions' row) as the fleet report and explain.yml show it."""
    request = record["request"] or {}
    decision = record["decision"] or {}
    flavor = request.get("flavor") or {}
    group = request.get("server_group") or {}
    rejections = decision.get("rejections") or decision.get("closest_misses") or []
    names = request.get("names") or []
    removed: dict[str, list[str]] = {}
    for rejection in decision.get("rejections") or []:
        removed.setdefault(rejection.get("filter") or "?", []).append(rejection.get("host"))
    return {
        "id": record["id"], "created_at": to_the_second(record["created_at"]).replace("T", " "), "name": record["name"],
        "ok": record["ok"], "outcome": record["outcome"], "summary": record["summary"], "owner": record.get("owner"),
        "flavor": flavor.get("name"), "count": request.get("count"), "names": names,
        "sizes": f"{flavor.get('vcpus')} vCPU, {flavor.get('memory_mb')} MB RAM, {flavor.get('root_gb')} GB disk",
        "server_group": group.get("name"), "availability_zone": request.get("availability_zone"),
        "scheduler_hints": request.get("scheduler_hints") or {}, "image": request.get("image_volume"),
        "force_hosts": request.get("force_hosts") or [], "ignore_hosts": request.get("ignore_hosts") or [],
        "project_id": request.get("project_id"),
        "hosts_total": decision.get("hosts_total"),
        "placements": [
            {"index": placement.get("index", 0) + 1, "host": placement.get("host"),
             "instance": names[position] if position < len(names) else None,
             "weight": _number(placement.get("weight")), "weights": _parts(placement.get("weights")),
             "alternates": placement.get("alternates") or [],
             "runners_up": [{"host": runner.get("host"), "weight": _number(runner.get("weight")),
                             "weights": _parts(runner.get("weights"))}
                            for runner in placement.get("runners_up") or []]}
            for position, placement in enumerate(decision.get("placements") or [])],
        "reasons": [f"{item.get('count')} {item.get('phrase')}" for item in decision.get("reasons") or []],
        # By filter, in the order the filters removed their first host; only with the full
        # explanation (small fleets, or explain=full), which names every rejected host.
        "removed": [{"filter": name, "count": len(hosts), "hosts": hosts} for name, hosts in removed.items()],
        "rejections": [(item.get("host"), item.get("message")) for item in rejections[:REJECTIONS_SHOWN]],
        "rejections_more": max(len(rejections) - REJECTIONS_SHOWN, 0),
    }


def decision_lines(view: Mapping[str, Any], instance: str | None = None) -> list[str]:
    """The decision in lines of text; with ``instance``, only that instance's placement."""
    lines = [f"decision {view['id']} ({view['outcome']}, {view['created_at']} UTC, launch {view['name']}): "
             f"{view['summary']}"]
    asked = [f"flavor {view['flavor']} ({view['sizes']})", f"count {view['count']}"]
    for label, key in (("names", "names"), ("image", "image"), ("zone", "availability_zone"),
                       ("server group", "server_group"), ("hints", "scheduler_hints"), ("project", "project_id"),
                       ("force_hosts", "force_hosts"), ("ignore_hosts", "ignore_hosts")):
        value = view[key]
        if value:
            asked.append(f"{label} {', '.join(value) if isinstance(value, list) else value}")
    lines.append("request: " + "; ".join(asked))
    total = view["hosts_total"]
    if view["removed"]:
        removed = sum(item["count"] for item in view["removed"])
        lines.append(f"filters: {total} hosts, {removed} removed: " + "; ".join(
            f"{item['filter']} {item['count']} ({', '.join(item['hosts'][:REMOVED_HOSTS_NAMED])}"
            f"{', ...' if item['count'] > REMOVED_HOSTS_NAMED else ''})" for item in view["removed"]))
    elif view["reasons"]:
        lines.append(f"filters: {total} hosts; not candidates at the end: " + ", ".join(view["reasons"]))
    else:
        lines.append(f"filters: {total} hosts, none removed")
    if not view["ok"]:
        lines += [f"  {host}: {message}" for host, message in view["rejections"]]
    for placement in view["placements"]:
        if instance is not None and placement["instance"] != instance:
            continue
        who = placement["instance"] or f"instance {placement['index']}"
        lines.append(f"{who} -> {placement['host']}: weight {placement['weight']} "
                     f"({', '.join(placement['weights']) or 'not weighed: one candidate, or every weigher equal'})")
        lines += [f"  runner-up {runner['host']}: weight {runner['weight']} ({', '.join(runner['weights']) or '-'})"
                  for runner in placement["runners_up"]]
        if placement["alternates"]:
            lines.append(f"  alternates (a failed build is retried there, in order): {', '.join(placement['alternates'])}")
    return lines
