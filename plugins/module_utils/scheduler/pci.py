"""PCI passthrough and mediated devices (vGPUs): the operator's PCI aliases, what a flavor and
image ask for, and which of a host's devices an instance gets (docs/docsite/rst/numa.rst,
"Devices").

Nova's semantics (nova/pci/request.py, nova/pci/stats.py) on Berth's facts: where Nova keeps
pools of counted devices, Berth fits each request against the host's device list
(host_devices.pci_device entries) less what the assignments of the instances there hold, and
names the exact devices, so that the same function serves the filter and the claim.

Python 3.9: module_utils may ship to the hypervisors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.host_devices import (
    TYPE_PCI,
    TYPE_PF,
    TYPE_VF,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import (
    SchedulerInputError,
)

# Nova's PCINUMAAffinityPolicy.
POLICY_REQUIRED = "required"
POLICY_LEGACY = "legacy"
POLICY_PREFERRED = "preferred"
POLICY_SOCKET = "socket"
NUMA_POLICIES = (POLICY_REQUIRED, POLICY_LEGACY, POLICY_PREFERRED, POLICY_SOCKET)
DEVICE_TYPES = (TYPE_PCI, TYPE_PF, TYPE_VF)

ALIAS_SPEC = "pci_passthrough:alias"
VGPU_SPEC = "resources:VGPU"
FLAVOR_POLICY_SPEC = "hw:pci_numa_affinity_policy"
IMAGE_POLICY_PROPERTY = "hw_pci_numa_affinity_policy"

_ALIAS_KEYS = ("name", "vendor_id", "product_id", "device_type", "numa_policy")
_PCI_ID = re.compile(r"^[0-9a-fA-F]{4}$")
_ALIAS_NAME = re.compile(r"^[^:,\s][^:,]{0,255}$")
_COUNT = re.compile(r"^[0-9]+$")
# A guest's PCI topology holds a few dozen devices; more of one alias is a typing mistake.
MAX_DEVICES_PER_ALIAS = 64
# Nova takes the vGPUs of one request from one physical device; none offers more than a few
# dozen instances of a type.
MAX_VGPUS = 64


def check_aliases(value: Any) -> List[Dict[str, Any]]:
    """The operator's PCI aliases (Nova's ``[pci] alias``): a list of mappings, or of Nova's JSON
    strings, each with ``name``, ``vendor_id`` and ``product_id`` (four hex digits), and
    optionally ``device_type`` (type-PCI, type-PF, type-VF) and ``numa_policy`` (required,
    legacy, the default, preferred or socket). Entries sharing a name are one alias matching any
    of them, as in Nova; they must then each give the same device_type (Nova's
    get_alias_from_config refuses an entry of a name seen before where either lacks one) and
    agree on numa_policy. Returns them checked, ids in lower case (as the facts spell them),
    every key present."""
    field = "pci_alias"
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SchedulerInputError(field, f"{field} must be a list of aliases, got {value!r}")
    checked: List[Dict[str, Any]] = []
    first_of: Dict[str, Dict[str, Any]] = {}
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError as exc:
                raise SchedulerInputError(where, f"{where} is not JSON: {exc}") from None
        if not isinstance(item, Mapping):
            raise SchedulerInputError(where, f"{where} must be a mapping, got {item!r}")
        for key in item:
            if key not in _ALIAS_KEYS:
                raise SchedulerInputError(f"{where}.{key}", f"{where} has an unknown key {key!r}; "
                                                            f"allowed: {', '.join(_ALIAS_KEYS)}")
        name = item.get("name")
        if not isinstance(name, str) or not _ALIAS_NAME.match(name.strip()):
            raise SchedulerInputError(f"{where}.name", f"{where}.name must be a name without ':' or ',' "
                                                       f"(at most 256 characters), got {name!r}")
        alias = {"name": name.strip()}
        for key in ("vendor_id", "product_id"):
            text = item.get(key)
            # Nova requires both outside Placement: an alias without them would match any device.
            if not isinstance(text, str) or not _PCI_ID.match(text):
                raise SchedulerInputError(f"{where}.{key}",
                                          f"{where}.{key} must be four hex digits (8086), got {text!r}")
            alias[key] = text.lower()
        alias["device_type"] = _choice(f"{where}.device_type", item.get("device_type"), DEVICE_TYPES)
        policy = _choice(f"{where}.numa_policy", item.get("numa_policy"), NUMA_POLICIES)
        alias["numa_policy"] = policy or POLICY_LEGACY
        first = first_of.setdefault(alias["name"], alias)
        # In Nova's order: the policy, then the type, which each entry of several must give.
        for key in ("numa_policy", "device_type"):
            if first is not alias and key == "device_type" and None in (first[key], alias[key]):
                raise SchedulerInputError(
                    f"{where}.{key}", f"{where}: the entries named {alias['name']!r} must each give device_type "
                                      f"(Nova refuses an alias of several entries without it)")
            if first[key] != alias[key]:
                raise SchedulerInputError(
                    f"{where}.{key}", f"{where}.{key} is {alias[key]!r}, but an earlier alias named "
                                      f"{alias['name']!r} has {first[key]!r}: entries of one name must agree")
        checked.append(alias)
    return checked


def request_aliases(value: Any, extra_specs: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The operator's aliases (check_aliases) for a request with ``extra_specs``. As Nova, which
    reads its [pci] alias only for a flavor that names one, aliases that do not check refuse only
    a request that asks for an alias (pci_passthrough:alias, the error naming the alias setting);
    any other goes on without them (PCIWeigher and the order of NUMA cells count no device)."""
    try:
        return check_aliases(value)
    except SchedulerInputError:
        if extra_specs.get(ALIAS_SPEC) is not None:
            raise
        return []


def _choice(field: str, value: Any, allowed: Tuple[str, ...]) -> Optional[str]:
    if value is None:
        return None
    if value not in allowed:
        raise SchedulerInputError(field, f"{field} must be one of {', '.join(allowed)}, got {value!r}")
    return value


@dataclass(frozen=True)
class DeviceRequest:
    """``count`` devices of one alias: any device matching one of its ``specs``
    ({vendor_id, product_id, device_type}), placed by ``numa_policy``."""

    alias: str
    count: int
    specs: Tuple[Tuple[str, str, Optional[str]], ...]
    numa_policy: str

    def describe(self) -> str:
        """'alias nic (8086:154d type-VF)': what the explanations name."""
        kinds = " or ".join(f"{vendor}:{product}" + (f" {kind}" if kind else "")
                            for vendor, product, kind in self.specs)
        return f"alias {self.alias} ({kinds})"

    def matches(self, device: Mapping[str, Any]) -> bool:
        for vendor, product, kind in self.specs:
            if device.get("vendor_id") != vendor or device.get("product_id") != product:
                continue
            # As Nova: a PF only for an alias that asks for PFs (PFs and their VFs may share ids).
            if (device.get("dev_type") != TYPE_PF) if kind is None else (device.get("dev_type") == kind):
                return True
        return False


@dataclass(frozen=True)
class PCIRequest:
    """What one instance asks for: PCI devices by alias (``devices``, in the flavor's order) and
    ``vgpus`` mediated devices of one of ``mdev_types`` (empty: any type a host offers)."""

    devices: Tuple[DeviceRequest, ...] = ()
    vgpus: int = 0
    mdev_types: Tuple[str, ...] = ()

    @cached_property
    def wants_sockets(self) -> bool:
        """Whether a device request has the socket policy (which reads each host cell's socket)."""
        return any(device.numa_policy == POLICY_SOCKET for device in self.devices)

    def describe(self) -> str:
        """'2 x alias nic (8086:154d type-VF), 1 x vGPU': the request in one line."""
        parts = [f"{request.count} x {request.describe()}" for request in self.devices]
        if self.vgpus:
            parts.append(f"{self.vgpus} x vGPU{_types_text(self.mdev_types)}")
        return ", ".join(parts)


def _types_text(types: Sequence[str]) -> str:
    return f" (mdev type {' or '.join(types)})" if types else ""


def pci_request(flavor: Any, image_properties: Mapping[str, Any], aliases: Sequence[Mapping[str, Any]],
                enabled_mdev_types: Sequence[str] = ()) -> Optional[PCIRequest]:
    """The devices a flavor (its extra specs) and image ask for, or None when they ask for none:
    ``pci_passthrough:alias`` ('nic:2,gpu:1', each alias of ``aliases`` as check_aliases returns
    them), ``resources:VGPU`` (a count of mediated devices of ``enabled_mdev_types``), and the
    PCI NUMA affinity policy (``hw:pci_numa_affinity_policy`` of the flavor or
    ``hw_pci_numa_affinity_policy`` of the image; where both are set they must agree, as in Nova)
    which overrides each alias's own. Refused with the spec named: an unknown alias, a count that
    is not a positive integer, an unknown policy."""
    extra_specs = flavor.extra_specs
    policy = _policy(extra_specs, image_properties)
    devices = _device_requests(extra_specs.get(ALIAS_SPEC), aliases, policy)
    vgpus = _vgpus(extra_specs.get(VGPU_SPEC))
    if not devices and not vgpus:
        return None
    return PCIRequest(devices=devices, vgpus=vgpus, mdev_types=tuple(enabled_mdev_types))


def _policy(extra_specs: Mapping[str, Any], image_properties: Mapping[str, Any]) -> Optional[str]:
    flavor_field = f"flavor.extra_specs.{FLAVOR_POLICY_SPEC}"
    image_field = f"image_properties.{IMAGE_POLICY_PROPERTY}"
    flavor_policy = _choice(flavor_field, extra_specs.get(FLAVOR_POLICY_SPEC), NUMA_POLICIES)
    image_policy = _choice(image_field, image_properties.get(IMAGE_POLICY_PROPERTY), NUMA_POLICIES)
    if flavor_policy and image_policy and flavor_policy != image_policy:
        raise SchedulerInputError(image_field, f"{image_field} is {image_policy!r}, but the flavor's "
                                               f"{FLAVOR_POLICY_SPEC} is {flavor_policy!r}: the image "
                                               f"may not change the flavor's policy (as in Nova)")
    return flavor_policy or image_policy


def _device_requests(value: Any, aliases: Sequence[Mapping[str, Any]],
                     policy: Optional[str]) -> Tuple[DeviceRequest, ...]:
    field = f"flavor.extra_specs.{ALIAS_SPEC}"
    if value is None:
        return ()
    if not isinstance(value, str) or not value.strip():
        raise SchedulerInputError(field, f"{field} must look like 'nic:2,gpu:1', got {value!r}")
    by_name: Dict[str, List[Mapping[str, Any]]] = {}
    for alias in aliases:
        by_name.setdefault(alias["name"], []).append(alias)
    requests = []
    for part in value.split(","):
        name, sep, count_text = part.partition(":")
        name, count_text = name.strip(), count_text.strip()
        # Nova's pattern: every item is $alias:$count.
        if not sep or not name or not _COUNT.match(count_text):
            raise SchedulerInputError(field, f"{field} must be alias:count items ('nic:2,gpu:1'), "
                                             f"got {part.strip()!r}")
        count = int(count_text)
        if not 1 <= count <= MAX_DEVICES_PER_ALIAS:
            raise SchedulerInputError(field, f"{field} asks for {count} x {name}: a count is 1 to "
                                             f"{MAX_DEVICES_PER_ALIAS}")
        entries = by_name.get(name)
        if not entries:
            known = ", ".join(sorted(by_name)) or "none (the operator sets them in pci_alias)"
            raise SchedulerInputError(field, f"{field} names PCI alias {name!r}, which is not defined; "
                                             f"defined: {known}")
        specs = tuple((entry["vendor_id"], entry["product_id"], entry["device_type"]) for entry in entries)
        requests.append(DeviceRequest(name, count, specs, policy or entries[0]["numa_policy"]))
    return tuple(requests)


def _vgpus(value: Any) -> int:
    field = f"flavor.extra_specs.{VGPU_SPEC}"
    if value is None:
        return 0
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if not _COUNT.match(text) or int(text) > MAX_VGPUS:
        raise SchedulerInputError(field, f"{field} must be a whole number 0 to {MAX_VGPUS}, got {value!r}")
    return int(text)


# ---- fitting --------------------------------------------------------------------------------

class _Usage:
    """What the assignments on a host hold, and what one fit has taken so far."""

    def __init__(self, assignments: Sequence[Mapping[str, Any]]) -> None:
        self.used: set = set()
        # (parent address, mdev type) -> instances in use; a dict, not a Counter: this is made
        # for every host a fit looks at, and a Counter costs a microsecond more to make.
        self.mdevs: Dict[Tuple[str, str], int] = {}
        self.mdev_type_of: Dict[str, str] = {}
        # Ledger rows are not trusted: a malformed entry is skipped, never a reason to crash.
        for assignment in assignments:
            if not isinstance(assignment, dict):
                continue
            for device in _mappings(assignment.get("pci")):
                if isinstance(device.get("address"), str):
                    self.used.add(device["address"])
            for mdev in _mappings(assignment.get("mdevs")):
                parent, kind = mdev.get("parent"), mdev.get("type")
                if isinstance(parent, str) and isinstance(kind, str):
                    self.mdevs[(parent, kind)] = self.mdevs.get((parent, kind), 0) + 1
                    self.mdev_type_of.setdefault(parent, kind)

    def free(self, device: Mapping[str, Any]) -> bool:
        """Whether the device can be passed through: not held, its PF not held (a VF), none of
        its VFs held (a PF), none of its mediated devices in use."""
        used = self.used
        if not used and not self.mdev_type_of:
            return True  # most hosts: nothing held
        address = device["address"]
        if address in used or address in self.mdev_type_of:
            return False
        kind = device.get("dev_type")
        if kind == TYPE_VF:
            return device.get("parent_address") not in used
        if kind == TYPE_PF:
            children = device.get("virtual_functions")
            return not (isinstance(children, list) and any(child in used for child in children))
        return True


def _mappings(value: Any) -> List[Mapping[str, Any]]:
    # dict, not typing.Mapping: an ABC isinstance check costs microseconds, and this runs per host.
    if not value or not isinstance(value, (list, tuple)):
        return []
    return [item for item in value if isinstance(item, dict)]


def fit(pci_devices: Sequence[Mapping[str, Any]], assignments: Sequence[Mapping[str, Any]],
        request: PCIRequest, cells: Optional[Sequence[int]] = None,
        sockets: Optional[Mapping[int, Optional[int]]] = None
        ) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The devices ``request`` gets on a host with ``pci_devices`` (its host state's), where the
    ``assignments`` of the instances there hold theirs: ({"pci": [...], "mdevs": [...]}, None),
    the assignment's device keys (numa.rst), or (None, why) naming the short pool.

    ``cells``: the host NUMA cells the instance was fitted onto (the NUMA fitting gives them);
    each alias's policy then decides which devices qualify - required: on those cells;
    legacy: on those cells, or, if they have too few, also devices without a NUMA node;
    preferred: as legacy, else any device; socket: on those cells, or, if they have too few, on
    any cell of their sockets (``sockets``: each host cell's socket, None where unknown: then
    none qualifies). Without cells any device qualifies. Within that, devices on the cells come
    first, then lowest address first. Mediated devices are taken
    from one parent device and type (as Nova's placement allocates a VGPU request from one
    provider), lowest parent address first, with no NUMA affinity (Nova has none for them)."""
    devices = [device for device in pci_devices if isinstance(device, dict) and isinstance(device.get("address"), str)]
    if not request.vgpus:
        # Only the devices of the products asked for can be chosen: sort those alone (a host
        # has a dozen devices, a request one product or two). A list, not a set: a device's
        # ids come from the ledger, and an unhashable one must not raise.
        products = [product for device_request in request.devices for _vendor, product, _kind in device_request.specs]
        devices = [device for device in devices if device.get("product_id") in products]
    devices.sort(key=_address)
    usage = _Usage(assignments)
    taken: List[Dict[str, Any]] = []
    for device_request in request.devices:
        candidates = [device for device in devices if device_request.matches(device) and usage.free(device)]
        chosen, why = _by_policy(candidates, device_request, cells, sockets)
        if chosen is None:
            return None, why
        for device in chosen:
            usage.used.add(device["address"])
            taken.append({"address": device["address"], "alias": device_request.alias,
                          "dev_type": device.get("dev_type"), "numa_node": device.get("numa_node")})
    mdevs: List[Dict[str, Any]] = []
    if request.vgpus:
        parent, kind, why = _mdev_parent(devices, usage, request)
        if parent is None:
            return None, why
        mdevs = [{"parent": parent, "type": kind} for _vgpu in range(request.vgpus)]
    return {"pci": taken, "mdevs": mdevs}, None


def _address(device: Mapping[str, Any]) -> str:
    return device["address"]


def _by_policy(candidates: List[Mapping[str, Any]], request: DeviceRequest, cells: Optional[Sequence[int]],
               sockets: Optional[Mapping[int, Optional[int]]]
               ) -> Tuple[Optional[List[Mapping[str, Any]]], Optional[str]]:
    count = request.count
    if cells is None:
        if len(candidates) >= count:
            return candidates[:count], None
        return None, f"{_asked(request)}, {len(candidates)} free"
    wanted = set(cells)
    on_cells = [device for device in candidates if device.get("numa_node") in wanted]
    policy = request.numa_policy
    if len(on_cells) >= count or policy == POLICY_REQUIRED:
        if len(on_cells) >= count:
            return on_cells[:count], None
        return None, f"{_asked(request)}, {len(on_cells)} free on {_where(wanted)} (policy required)"
    if policy == POLICY_SOCKET:
        # As Nova's _filter_pools_for_socket_affinity: the cells of the sockets of the instance's
        # cells, and nothing where a host cell's socket is not known.
        if not sockets or any(socket is None for socket in sockets.values()):
            return None, (f"{_asked(request)}, {len(on_cells)} free on {_where(wanted)} (policy socket: the host's "
                          f"NUMA cells do not each say their socket)")
        near = {sockets.get(cell) for cell in wanted}
        same_socket = {cell for cell, socket in sockets.items() if socket in near}
        chosen = on_cells + [device for device in candidates
                             if device.get("numa_node") in same_socket and device.get("numa_node") not in wanted]
        if len(chosen) >= count:
            return chosen[:count], None
        return None, f"{_asked(request)}, {len(chosen)} free on the sockets of {_where(wanted)} (policy socket)"
    # Devices that say no NUMA node (hosts that do not report one) are as good as local.
    legacy = on_cells + [device for device in candidates if device.get("numa_node") is None]
    if len(legacy) >= count:
        return legacy[:count], None
    if policy == POLICY_LEGACY:
        return None, f"{_asked(request)}, {len(legacy)} free on {_where(wanted)} or without a NUMA node (policy legacy)"
    near = {device["address"] for device in legacy}
    chosen = legacy + [device for device in candidates if device["address"] not in near]
    if len(chosen) >= count:
        return chosen[:count], None
    return None, f"{_asked(request)}, {len(chosen)} free (policy preferred)"


# The words of a shortfall, made only when there is one: a fit that finds its devices (once per
# host and cell permutation) has no use for them.
def _asked(request: DeviceRequest) -> str:
    return f"{request.count} x {request.describe()} asked"


def _where(cells: set) -> str:
    return f"NUMA cell{'s' if len(cells) != 1 else ''} {', '.join(str(cell) for cell in sorted(cells))}"


def _mdev_parent(devices: Sequence[Mapping[str, Any]], usage: _Usage, request: PCIRequest
                 ) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """The first parent device and type with ``request.vgpus`` instances free; a parent that
    already serves one type serves no other (a physical GPU runs one vGPU type at a time)."""
    order = {kind: rank for rank, kind in enumerate(request.mdev_types)}
    most_free = 0
    for device in devices:
        address = device["address"]
        # Passed through whole (to another instance or in this fit), it offers no mdevs.
        if address in usage.used:
            continue
        offered = [item for item in _mappings(device.get("mdev_types"))
                   if isinstance(item.get("type"), str) and (not order or item["type"] in order)]
        offered.sort(key=lambda item: (order.get(item["type"], 0), item["type"]))
        serving = usage.mdev_type_of.get(address)
        for item in offered:
            if serving is not None and item["type"] != serving:
                continue
            available = item.get("available_instances")
            if not isinstance(available, int) or isinstance(available, bool):
                continue
            free = available - usage.mdevs.get((address, item["type"]), 0)
            if free >= request.vgpus:
                return address, item["type"], None
            most_free = max(most_free, free)
    return None, None, (f"{request.vgpus} x vGPU{_types_text(request.mdev_types)} asked, "
                        f"at most {most_free} free on one device")


def device_holdings(assignments: Sequence[Sequence[Any]]) -> List[Sequence[Any]]:
    """Per host, only those of its assignments that hold PCI or mediated devices: all that
    fit and free_alias_devices read of them (_Usage), so that hosts whose instances pin
    different CPUs but hold the same devices (often none) share one device fit
    (assignment.per_state)."""
    return [[item for item in held if isinstance(item, dict) and (item.get("pci") or item.get("mdevs"))]
            if held else held for held in assignments]


def free_alias_devices(pci_devices: Sequence[Mapping[str, Any]], assignments: Sequence[Mapping[str, Any]],
                       aliases: Sequence[Mapping[str, Any]]) -> int:
    """How many of a host's devices no instance holds, of those whose vendor and product ids some
    alias names (PCIWeigher's count): Nova's free devices of its pools, with the aliases' ids
    as its [pci] device_spec, which names ids and not types (a PF and its VFs of one id both)."""
    return sum(free_alias_devices_by_node(pci_devices, assignments, aliases).values())


def free_alias_devices_by_node(pci_devices: Sequence[Mapping[str, Any]], assignments: Sequence[Mapping[str, Any]],
                               aliases: Sequence[Mapping[str, Any]]) -> Dict[Any, int]:
    """free_alias_devices per NUMA node (None: devices that report none), as Nova sums its pools
    by node to order a host's cells. Called for every candidate of every request that has
    aliases configured, so the match is one lookup by ids rather than a walk of the aliases."""
    named = {(alias["vendor_id"], alias["product_id"]) for alias in aliases}
    usage = _Usage(assignments)
    free: Dict[Any, int] = {}
    for device in pci_devices:  # HostState checked each is a mapping
        ids = (device.get("vendor_id"), device.get("product_id"))
        if not (isinstance(ids[0], str) and isinstance(ids[1], str)) or ids not in named:  # the ledger's: maybe not text
            continue
        if isinstance(device.get("address"), str) and usage.free(device):
            node = device.get("numa_node")
            node = node if isinstance(node, int) else None  # a ledger row's, not trusted
            free[node] = free.get(node, 0) + 1
    return free
