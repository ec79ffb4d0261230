"""Host rules: the operator's rules between instances and host aggregates (oVirt's VM-to-host
affinity, DRS's VM-host rules), as the scheduler reads them.

A rule selects instances - by a name pattern (fnmatch-style), a server group, a label the
requester gave at launch, or several of these at once (all must match) - and says where they
go with respect to one aggregate: ``must`` (only hosts in it), ``must_not`` (never a host in
it), ``should`` and ``should_not`` (a preference, with a weight). The hard kinds are
HostRuleFilter's, the soft ones HostRuleWeigher's; the ledger keeps the rules and re-checks the
hard ones when it claims (plugin_utils/ledger/host_rules.py), with ``broken_rule`` below, so the
filter and the claim answer from one piece of code.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_positive_number,
)

MUST = "must"
SHOULD = "should"
MUST_NOT = "must_not"
SHOULD_NOT = "should_not"
KINDS = (MUST, SHOULD, MUST_NOT, SHOULD_NOT)
HARD_KINDS = (MUST, MUST_NOT)
# What may select a rule's instances: at least one, and every one given must match.
SELECTORS = ("instance_name", "instance_group", "instance_label")
_KEYS = ("name", "kind", "aggregate", "weight", *SELECTORS)


@dataclass(frozen=True)
class HostRule:
    """One rule: ``name`` (the operator's, unique), its ``kind``, the ``aggregate`` it is about,
    its ``weight`` (soft kinds: how much it counts against other soft rules), and what selects
    its instances."""

    name: str
    kind: str
    aggregate: str
    instance_name: str | None = None
    instance_group: str | None = None
    instance_label: str | None = None
    weight: float = 1.0

    @property
    def hard(self) -> bool:
        return self.kind in HARD_KINDS

    def selects(self, name: str, server_group: str | None, labels: Iterable[str]) -> bool:
        """Whether the instance ``name``, in ``server_group`` (None: none), launched with
        ``labels``, is one this rule is about."""
        if self.instance_name is not None and not fnmatch.fnmatchcase(name, self.instance_name):
            return False
        if self.instance_group is not None and server_group != self.instance_group:
            return False
        return self.instance_label is None or self.instance_label in labels

    def holds_on(self, aggregates: Iterable[str]) -> bool:
        """Whether a host in ``aggregates`` (their names) is where the rule wants its instances:
        in the aggregate for must and should, outside it for must_not and should_not."""
        inside = self.aggregate in aggregates
        return inside if self.kind in (MUST, SHOULD) else not inside

    def describe(self) -> str:
        """What an explanation says of a host that breaks the rule."""
        verb = {MUST: "must", SHOULD: "should", MUST_NOT: "must not", SHOULD_NOT: "should not"}[self.kind]
        return f"{self.name} says its instances {verb} be in aggregate {self.aggregate}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "aggregate": self.aggregate, "weight": self.weight,
                **{selector: getattr(self, selector) for selector in SELECTORS}}


def host_rule_from_dict(data: Any, field_name: str = "host_rule") -> HostRule:
    """A rule from its dict form (to_dict's), every part checked, naming the field at fault
    (``field_name``.key, or the key alone with an empty ``field_name``: a task's own options)."""
    if isinstance(data, HostRule):
        return data

    def named(key: str) -> str:
        return f"{field_name}.{key}" if field_name else key

    if not isinstance(data, Mapping):
        raise SchedulerInputError(field_name, f"{field_name} must be a mapping, got {data!r}")
    for key in data:
        if key not in _KEYS:
            raise SchedulerInputError(named(key), f"a host rule has no key {key!r}; allowed: {', '.join(_KEYS)}")
    for key in ("name", "aggregate"):
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise SchedulerInputError(named(key), f"{named(key)} must be a non-empty string, got {value!r}")
    if data.get("kind") not in KINDS:
        raise SchedulerInputError(named("kind"), f"{named('kind')} must be one of {', '.join(KINDS)}, "
                                                 f"got {data.get('kind')!r}")
    selectors = {key: data.get(key) for key in SELECTORS if data.get(key) is not None}
    if not selectors:
        raise SchedulerInputError(field_name or SELECTORS[0], f"a host rule must select its instances by at least "
                                                              f"one of {', '.join(SELECTORS)}")
    for key, value in selectors.items():
        if not isinstance(value, str) or not value:
            raise SchedulerInputError(named(key), f"{named(key)} must be a non-empty string, got {value!r}")
    weight = data.get("weight")
    weight = 1.0 if weight is None else weight
    check_positive_number(named("weight"), weight)
    return HostRule(name=data["name"], kind=data["kind"], aggregate=data["aggregate"], weight=float(weight),
                    **selectors)


def rules_for(rules: Iterable[HostRule], names: Sequence[str], server_group: str | None,
              labels: Iterable[str]) -> list[HostRule]:
    """The rules that select any of the instances ``names`` (one request: one group, one set of
    labels). A request of several instances is held to every rule that selects one of them: the
    claim re-checks each instance against its own, so no placement it refuses is proposed."""
    labels = tuple(labels)
    return [rule for rule in rules if any(rule.selects(name, server_group, labels) for name in names)]


def broken_rule(rules: Iterable[HostRule], name: str, server_group: str | None, labels: Iterable[str],
                aggregates: Iterable[str]) -> HostRule | None:
    """The first hard rule that the instance ``name`` (in ``server_group``, with ``labels``)
    would break on a host in ``aggregates``; None when every one holds."""
    aggregates, labels = tuple(aggregates), tuple(labels)
    for rule in rules:
        if rule.hard and rule.selects(name, server_group, labels) and not rule.holds_on(aggregates):
            return rule
    return None


def aggregate_names(aggregates: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of a host state's aggregates ([{name, metadata}])."""
    return [str(aggregate.get("name")) for aggregate in aggregates if aggregate.get("name")]
