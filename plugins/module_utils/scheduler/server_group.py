from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import (
    check_integer,
    check_string_list,
)

POLICIES = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")
_KEYS = ("name", "policy", "rules", "hosts", "members")


@dataclass
class ServerGroup:
    """Nova's InstanceGroup as the scheduler sees it: who is where already.

    `members` counts the group's instances per host. Nova intersects the host's instance
    uuids with the group's member uuids; a count per host is the same number without shipping
    every uuid. `hosts` lists the hosts holding members, in the order they were added.
    """

    name: str
    policy: str
    max_server_per_host: int = 1  # Nova's rule; only anti-affinity reads it
    hosts: list[str] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)

    def member_count(self, host: str) -> int:
        return self.members.get(host, 0)

    def add(self, host: str, count: int = 1) -> None:
        """`count` more members on `host`, as Nova's _consume_selected_host records each."""
        if host not in self.members:
            self.hosts.append(host)
        self.members[host] = self.members.get(host, 0) + count

    def copy(self) -> ServerGroup:
        return ServerGroup(self.name, self.policy, self.max_server_per_host, list(self.hosts),
                           dict(self.members))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "policy": self.policy,
                "rules": {"max_server_per_host": self.max_server_per_host},
                "hosts": list(self.hosts), "members": dict(self.members)}


def server_group_from_dict(data: Any, field_name: str = "server_group") -> ServerGroup:
    """The `server_group` option's dict form: {name, policy, rules, hosts, members}.

    `hosts` lists the hosts that hold members; `members` maps host to its number of members.
    Either may be left out: a host in `hosts` without a count holds one member, and every host
    in `members` is a group host.
    """
    if not isinstance(data, Mapping):
        raise SchedulerInputError(field_name, f"{field_name} must be a mapping, got {data!r}")
    for key in data:
        if key not in _KEYS:
            raise SchedulerInputError(
                f"{field_name}.{key}",
                f"{field_name} has an unknown key {key!r}; allowed: {', '.join(_KEYS)}",
            )
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise SchedulerInputError(f"{field_name}.name",
                                  f"{field_name}.name must be a non-empty string, got {name!r}")
    policy = data.get("policy")
    if policy not in POLICIES:
        raise SchedulerInputError(
            f"{field_name}.policy",
            f"{field_name}.policy must be one of {', '.join(POLICIES)}, got {policy!r}",
        )
    rules = data.get("rules") or {}
    if not isinstance(rules, Mapping) or any(key != "max_server_per_host" for key in rules):
        raise SchedulerInputError(
            f"{field_name}.rules",
            f"{field_name}.rules must be a mapping with only max_server_per_host, got {rules!r}",
        )
    max_server_per_host = rules.get("max_server_per_host", 1)
    check_integer(f"{field_name}.rules.max_server_per_host", max_server_per_host, minimum=1)
    hosts = check_string_list(f"{field_name}.hosts", data.get("hosts") or [])
    members_in = data.get("members") or {}
    if not isinstance(members_in, Mapping):
        raise SchedulerInputError(
            f"{field_name}.members",
            f"{field_name}.members must be a mapping of host to member count, got {members_in!r}",
        )
    group = ServerGroup(name, policy, max_server_per_host)
    for host in hosts:
        if host not in members_in:
            group.add(host)
    for host, count in members_in.items():
        check_integer(f"{field_name}.members.{host}", count, minimum=1)
        if host not in group.members:
            group.hosts.append(host)
        group.members[host] = count
    return group
