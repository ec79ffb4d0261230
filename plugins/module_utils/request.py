"""A launch request's identity and flavor, checked before anything is changed."""

from __future__ import annotations

import re
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor

# RFC 1123 label, lower case: instance names become domain names and guest hostnames.
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_COUNT = 1000


def instance_names(name: Any, count: Any) -> list[str]:
    """The names a launch wants: ``<name>-1`` .. ``<name>-<count>``, always indexed.

    Always indexed, even for one instance, so that ``count`` is simply how many are wanted under
    a name: raising it adds instances, a second identical launch finds them all.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise InputError("count", f"count must be an integer from 1 to {MAX_COUNT}, got {count!r}")
    if not isinstance(name, str) or not _DNS_LABEL.match(f"{name}-{count}"):
        raise InputError(
            "name",
            f"name must make DNS labels with its index (lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most 63 characters as '<name>-<index>'), got {name!r}",
        )
    return [f"{name}-{index}" for index in range(1, count + 1)]


def resolve_flavor(flavor: Any, flavors: Mapping[str, Any]) -> Flavor:
    """A flavor by name from ``flavors``, or an inline dict (with an optional ``name``)."""
    if isinstance(flavor, str):
        if flavor not in flavors:
            known = ", ".join(sorted(flavors)) or "none"
            raise InputError("flavor", f"unknown flavor {flavor!r} (known flavors: {known})")
        return Flavor.from_dict(flavors[flavor], name=flavor)
    if isinstance(flavor, Mapping):
        return Flavor.from_dict(flavor, name=str(flavor.get("name", "custom")))
    raise InputError("flavor", f"flavor must be a flavor name or a dict of sizes, got {type(flavor).__name__}")
