"""A guest's vCPU topology (sockets, cores, threads) from its flavor's extra specs and its image's
properties, chosen the way Nova's virt/hardware.py chooses it. Pure: no libvirt, no Ansible.

Flavor extra specs ``hw:cpu_sockets``, ``hw:cpu_cores``, ``hw:cpu_threads`` (preferred counts)
and ``hw:cpu_max_sockets``, ``hw:cpu_max_cores``, ``hw:cpu_max_threads`` (limits); the image's
properties ``hw_cpu_*`` and ``hw_cpu_max_*`` the same. The image may only narrow the flavor:
its limits may not exceed the flavor's, and its preferred counts may not exceed the limits. A
preferred count of the flavor beyond the image's limits is dropped, as Nova drops it.

Of every (sockets, cores, threads) whose product is the vCPU count within the limits, the best
is the one matching most of the preferred counts; among equals, Nova's order: most sockets x
cores (fewest threads), then most sockets. A preference that no product meets is not an error
(Nova takes the best of the others), but limits that leave no product are.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

PARTS = ("sockets", "cores", "threads")
# The image properties the topology reads (a build record keeps them, so that a move or resize
# computes the topology again).
CPU_TOPOLOGY_PROPERTIES = tuple(f"hw_cpu_{kind}{part}" for kind in ("", "max_") for part in PARTS)
# Nova's limit where neither the flavor nor the image sets one.
UNLIMITED = 65536


def _count(field: str, value: Any) -> int:
    """A topology count as Nova reads it: a whole number, 0 (or absent) meaning "not said"."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise InputError(field, f"{field} must be a whole number of at least 1, got {value!r}")
    text = value.strip() if isinstance(value, str) else value
    try:
        number = int(text)
    except (TypeError, ValueError):
        raise InputError(field, f"{field} must be a whole number of at least 1, got {value!r}") from None
    if number < 0 or (isinstance(text, float) and text != number) or number > UNLIMITED:
        raise InputError(field, f"{field} must be a whole number from 1 to {UNLIMITED}, got {value!r}")
    return number


def _read(extra_specs: Mapping[str, Any], properties: Mapping[str, Any], key: str) -> Tuple[int, int, str, str]:
    """The flavor's and the image's value of ``key`` (cpu_sockets, cpu_max_cores...), with the
    field each is named by in an error."""
    flavor_field = f"flavor.extra_specs.hw:{key}"
    image_field = f"image.properties.hw_{key}"
    return (_count(flavor_field, extra_specs.get(f"hw:{key}")), _count(image_field, properties.get(f"hw_{key}")),
            flavor_field, image_field)


def topology_constraints(extra_specs: Mapping[str, Any],
                         properties: Mapping[str, Any]) -> Tuple[Dict[str, int], Dict[str, int]]:
    """(preferred, maximum) counts per part; a preferred 0 means no preference."""
    maximum: Dict[str, int] = {}
    for part in PARTS:
        flavor_max, image_max, flavor_field, image_field = _read(extra_specs, properties, f"cpu_max_{part}")
        if flavor_max and image_max > flavor_max:
            raise InputError(image_field, f"{image_field} {image_max} exceeds {flavor_field} {flavor_max}: an image "
                                          f"may only lower the flavor's limits")
        maximum[part] = image_max or flavor_max or UNLIMITED
    flavor_preferred: Dict[str, int] = {}
    image_preferred: Dict[str, int] = {}
    for part in PARTS:
        flavor_value, image_value, _flavor_field, image_field = _read(extra_specs, properties, f"cpu_{part}")
        if image_value > maximum[part]:
            raise InputError(image_field, f"{image_field} {image_value} exceeds the limit of {maximum[part]} {part} "
                                          f"(hw:cpu_max_{part} of the flavor or hw_cpu_max_{part} of the image)")
        flavor_preferred[part], image_preferred[part] = flavor_value, image_value
    if any(flavor_preferred[part] > maximum[part] for part in PARTS):
        # The image's limits ruled the flavor's preference out: Nova forgets all of it.
        flavor_preferred = dict.fromkeys(PARTS, 0)
    # Any preference of the image replaces the flavor's whole preference.
    preferred = image_preferred if any(image_preferred.values()) else flavor_preferred
    return preferred, maximum


def possible_topologies(vcpus: int, maximum: Mapping[str, int]) -> List[Dict[str, int]]:
    """Every (sockets, cores, threads) of ``vcpus`` within ``maximum``, in Nova's order."""
    bounds = [min(vcpus, maximum[part]) for part in PARTS]
    found = [{"sockets": sockets, "cores": cores, "threads": vcpus // (sockets * cores)}
             for sockets in range(1, bounds[0] + 1) if vcpus % sockets == 0
             for cores in range(1, bounds[1] + 1) if (vcpus // sockets) % cores == 0
             if vcpus // (sockets * cores) <= bounds[2]]
    found.sort(key=lambda t: (t["sockets"] * t["cores"], t["sockets"], t["threads"]), reverse=True)
    return found


def best_topology(vcpus: int, extra_specs: Optional[Mapping[str, Any]] = None,
                  properties: Optional[Mapping[str, Any]] = None) -> Dict[str, int]:
    """The topology a guest of ``vcpus`` vCPUs gets; InputError naming the spec or property
    when they contradict each other or leave no topology."""
    preferred, maximum = topology_constraints(extra_specs or {}, properties or {})
    possible = possible_topologies(vcpus, maximum)
    if not possible:
        # Named by the first limit that takes part, the image's where it set that one.
        limited = [part for part in PARTS if maximum[part] < UNLIMITED]
        fields = [f"image.properties.hw_cpu_max_{part}" if (properties or {}).get(f"hw_cpu_max_{part}")
                  else f"flavor.extra_specs.hw:cpu_max_{part}" for part in limited]
        said = ", ".join(f"{field} {maximum[part]}" for field, part in zip(fields, limited))
        raise InputError(fields[0], f"no vCPU topology of {vcpus} vCPUs fits {said}: sockets x cores x threads "
                                    f"must equal the flavor's vcpus")

    def score(topology: Mapping[str, int]) -> int:
        return sum(1 for part in PARTS if preferred[part] and topology[part] == preferred[part])

    # max() keeps the first of equals: the order possible_topologies gives breaks ties.
    return dict(max(possible, key=score))
