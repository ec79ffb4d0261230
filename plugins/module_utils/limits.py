"""Every size Berth takes, with its limits and why: the one place that states them.

Two things bound a size. A guest: KVM and QEMU start guests up to a size and no larger, and a
disk is a file that the pool's filesystem must hold. The ledger: its integer columns are 32-bit
on PostgreSQL (up to 2,147,483,647; SQLite's are 64-bit), so every value written there, and each
hypervisor's sum of them, must fit, or the write fails after the decision was made.

Each limit is checked where its value comes in (a flavor, a launch request, a module option, a
hypervisor's facts in the tracker sync), before anything is written, and the error names the
field and the range. ``doc_notes`` says them for ansible-doc: the doc fragment berth.fleet.limits
holds its text, and a unit test keeps the two equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.errors import SchedulerInputError
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.validation import check_integer, is_number

# The largest value of an Integer column of the ledger on PostgreSQL.
LEDGER_INTEGER_MAX = 2**31 - 1
# What the ledger counts on one hypervisor, per resource (vCPUs, MiB of memory, MiB of disk):
# claims may reach total x allocation ratio, unmanaged usage (domains Berth did not make) is
# summed apart, and the usage columns hold both. Half the column each keeps their sum in it.
LEDGER_CLAIMABLE_MAX = 2**30
LEDGER_UNMANAGED_MAX = LEDGER_INTEGER_MAX - LEDGER_CLAIMABLE_MAX
# The ledger's name columns (flavor, server group, project, zone, hypervisor, image, network).
NAME_COLUMN_CHARACTERS = 255

_BINARY_UNITS = {"MiB": ("GiB", "TiB", "PiB"), "GiB": ("TiB", "PiB"), "bytes": ("KiB", "MiB", "GiB")}


def _described(value: int, unit: str) -> str:
    """4194304 MiB -> '4194304 MiB (4 TiB)': with the largest binary unit that divides it whole."""
    text = f"{value} {unit}".strip()
    larger = ""
    for power, name in enumerate(_BINARY_UNITS.get(unit.split(" ")[0], ()), start=1):
        if value and value % 1024**power == 0:
            larger = f"{value // 1024**power} {name}"
    return f"{text} ({larger})" if larger else text


@dataclass(frozen=True)
class Limit:
    """An integer size: ``field`` as users write it, its range, its unit and why it stops there."""

    field: str
    minimum: int
    maximum: int
    unit: str
    why: str

    def describe(self) -> str:
        """'4194304 MiB (4 TiB)'."""
        return _described(self.maximum, self.unit)

    def check(self, value: Any, field: Optional[str] = None) -> int:
        """``value`` if it is an integer in range; else an InputError naming ``field`` (default
        this limit's own) and the range."""
        name = field or self.field
        check_integer(name, value, minimum=self.minimum)
        if value > self.maximum:
            raise SchedulerInputError(name, f"{name}: {value} is over the limit of {self.describe()}")
        return value


@dataclass(frozen=True)
class LengthLimit:
    """Text (or its JSON form) of at most ``maximum`` characters or bytes."""

    field: str
    maximum: int
    unit: str  # "characters", "bytes" (UTF-8) or "bytes as JSON"
    why: str

    def describe(self) -> str:
        return _described(self.maximum, self.unit)

    def size(self, value: Any) -> int:
        if self.unit == "characters":
            return len(value)
        text = value if self.unit == "bytes" else json.dumps(value, default=str)
        return len(text.encode("utf-8"))

    def check(self, value: Any, field: Optional[str] = None) -> Any:
        name = field or self.field
        size = self.size(value)
        if size > self.maximum:
            raise SchedulerInputError(name, f"{name}: {size} {self.unit.split()[0]} is over the limit of "
                                            f"{self.describe()}")
        return value


# ---- an instance: its flavor and its launch request --------------------------------------------

_DISK_WHY = ("the disk is a file in the storage pool; ext4, the usual filesystem of a directory pool, "
             "holds no file over 16 TiB")
FLAVOR_VCPUS = Limit("flavor.vcpus", 1, 1024, "vCPUs",
                     "KVM starts no x86-64 guest with more (KVM_CAP_MAX_VCPUS is 1024 since Linux 5.15); "
                     "QEMU's own machine types may allow fewer (Debian 12's QEMU 7.2: 288 on q35, 255 on pc)")
FLAVOR_MEMORY_MB = Limit("flavor.memory_mb", 1, 4 * 1024 * 1024, "MiB",
                         "more than all but the largest hypervisors hold, and far inside the ledger's 32-bit "
                         "columns when summed over a hypervisor's instances")
FLAVOR_ROOT_GB = Limit("flavor.root_gb", 0, 16 * 1024, "GiB", _DISK_WHY)
FLAVOR_EPHEMERAL_GB = Limit("flavor.ephemeral_gb", 0, 16 * 1024, "GiB", _DISK_WHY)
FLAVOR_SWAP_MB = Limit("flavor.swap", 0, 16 * 1024 * 1024, "MiB", _DISK_WHY)
# A data volume (berth.fleet.volume): a qcow2 file of the pool, as large as a flavor's disk may be.
VOLUME_SIZE_GB = Limit("size_gb", 1, 16 * 1024, "GiB", _DISK_WHY)
FLAVOR_SIZES = {"vcpus": FLAVOR_VCPUS, "memory_mb": FLAVOR_MEMORY_MB, "root_gb": FLAVOR_ROOT_GB,
                "ephemeral_gb": FLAVOR_EPHEMERAL_GB, "swap": FLAVOR_SWAP_MB}
FLAVOR_NAME = LengthLimit("flavor.name", NAME_COLUMN_CHARACTERS, "characters",
                          "the ledger records it with each instance (a 255-character column)")
# Nova's own limits on an extra spec's key and value.
EXTRA_SPEC_TEXT = LengthLimit("flavor.extra_specs", 255, "characters", "Nova's limit for extra spec keys and values")

COUNT = Limit("count", 1, 1000, "instances",
              "a launch decides, claims and records all its instances in one transaction and one decision")
METADATA_ITEMS = Limit("metadata", 0, 128, "items", "Nova's default quota of metadata items per instance")
METADATA_KEY = LengthLimit("metadata", 64, "characters", "kept in the domain's XML with its value")
METADATA_VALUE = LengthLimit("metadata.<key>", 1024, "characters",
                             "kept in the domain's XML, which every read of the domain carries")
USER_DATA = LengthLimit("user_data", 64 * 1024, "bytes",
                        "about Nova's limit for user data (65535 bytes, base64-encoded there); it goes on a "
                        "small NoCloud seed ISO")
# What the guest's NoCloud seed carries beside its user data (keys, static network settings).
PUBLIC_KEY = LengthLimit("ssh_authorized_keys[<index>]", 8 * 1024, "characters",
                         "an RSA key of 16384 bits, the largest OpenSSH makes, is under 3 KiB with its comment")
PUBLIC_KEYS = Limit("ssh_authorized_keys", 0, 64, "keys", "each is a line of the guest's authorized_keys, "
                    "carried on its small NoCloud seed")
NIC_ADDRESSES = Limit("networks[<index>].addresses", 0, 16, "addresses",
                      "static addresses of one interface, carried on the guest's NoCloud seed")
NIC_ROUTES = Limit("networks[<index>].routes", 0, 64, "routes",
                   "static routes of one interface, carried on the guest's NoCloud seed")
NAMESERVERS = Limit("networks[<index>].nameservers.addresses", 0, 3, "addresses",
                    "the C library's resolver reads 3 name servers (MAXNS) and ignores the rest")
SEARCH_DOMAINS = Limit("networks[<index>].nameservers.search", 0, 6, "domains",
                       "the classic limit of resolv.conf's search list, which older resolvers still keep")
# Free-form mappings a decision records with its request (each decision row keeps them).
REQUEST_MAPPING = LengthLimit("scheduler_hints", 64 * 1024, "bytes as JSON",
                              "recorded with every decision of the launch, so it can be replayed")
NAME = LengthLimit("name", NAME_COLUMN_CHARACTERS, "characters", "the ledger's name columns hold 255 characters")

# ---- module options that are sizes -----------------------------------------------------------

LEASE_SECONDS = Limit("lease_seconds", 1, 7 * 24 * 3600, "seconds",
                      "a week outlasts any build, image uploads included; a dead build's claim is held that "
                      "long before a sync releases it")
SERVICE_DOWN_TIME = Limit("service_down_time", 1, 365 * 24 * 3600, "seconds",
                          "a hypervisor not heard from for a year is no longer fit to schedule on")
MAX_ATTEMPTS = Limit("max_attempts", 1, 100, "hosts",
                     "each instance's alternates (max_attempts - 1 hosts) are recorded with its decision")
MAX_SERVER_PER_HOST = Limit("max_server_per_host", 1, COUNT.maximum, "instances",
                            "as many as one launch places")
IMAGE_MAX_MB = Limit("image_max_mb", 1, 16 * 1024 * 1024, "MiB", _DISK_WHY)
DECISIONS_SHOWN = Limit("decisions", 0, 1000, "decisions",
                        "each decision is read whole, with up to 100 host states, and explained on the page")
DECISIONS_MAX_AGE_DAYS = Limit("decisions_max_age_days", 1, 10 * 365, "days",
                               "decisions are kept to explain and replay launches, not as an archive")
DECISIONS_MAX_COUNT = Limit("decisions_max_count", 1, 1000 * 1000, "decisions",
                            "each keeps up to 100 host states (a few KiB each): a million is already gigabytes")
# The most of a serial console log read (from its end) and sent over the libvirt connection,
# whatever the file's size and the lines asked for.
CONSOLE_TAIL_BYTES = 64 * 1024
CONSOLE_LINES = Limit("lines", 1, 1000, "lines",
                      f"they come from the last {_described(CONSOLE_TAIL_BYTES, 'bytes')} of the serial log at most, "
                      "which hold about 1000 lines of a boot log")
# The most node devices (PCI devices and mdev-capable parents) read from one hypervisor at a sync:
# each is a libvirt call for its XML, and a hostile or broken host may list millions. A large
# SR-IOV host has a few NICs of up to 256 virtual functions each plus its GPUs: about a thousand.
# Devices beyond it (in libvirt's name order) are counted in the host state's
# pci_devices_skipped, not read.
NODE_DEVICES_READ = 4096
# How many hypervisors one run asks at once, each on a thread of the controller holding one
# libvirt connection: a tracker sync's default workers (berth_sync_workers) and the instances
# inventory's pool. A ledger naming thousands of hosts must not start thousands of threads.
HYPERVISORS_AT_ONCE = 20
# The module options checked against a limit, by name, wherever a module takes them as integers.
OPTION_LIMITS = {limit.field: limit for limit in (COUNT, LEASE_SECONDS, SERVICE_DOWN_TIME, MAX_ATTEMPTS,
                                                  MAX_SERVER_PER_HOST, IMAGE_MAX_MB, DECISIONS_SHOWN,
                                                  DECISIONS_MAX_AGE_DAYS, DECISIONS_MAX_COUNT, CONSOLE_LINES,
                                                  VOLUME_SIZE_GB)}


def check_options(args: Mapping[str, Any]) -> None:
    """The integer options of a module that have a limit (after its argument spec converted them)."""
    for name, limit in OPTION_LIMITS.items():
        value = args.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            limit.check(value)


def check_mapping_size(field: str, value: Any) -> Any:
    """A free-form mapping (scheduler hints, image properties) of sane nesting and size as JSON."""
    check_nesting(field, value)
    return REQUEST_MAPPING.check(value, field)


# ---- nesting: what recursive code (json, the query hint's evaluation) walks ---------------------

NESTING_DEPTH = Limit("scheduler_hints.query", 1, 32, "levels of lists and mappings",
                      "Python's json module and the query hint's evaluation recurse once per level, and "
                      "Python stops at about 1000 (a RecursionError that would fail the run uncaught); no hint "
                      "or property needs more than a few")


def check_nesting(field: str, value: Any) -> Any:
    """``value`` (decoded: lists, tuples and mappings) if it nests no deeper than NESTING_DEPTH;
    else an InputError naming ``field``. Walks without recursing, so any depth is measured."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > NESTING_DEPTH.maximum:
            _too_deep(field)
        pending.extend((child, depth + 1) for child in children)
    return value


def load_json(field: str, text: str, expected: Optional[str] = None) -> Any:
    """JSON ``text`` decoded, once its brackets are known to nest no deeper than NESTING_DEPTH
    (counted before decoding: json.loads itself recurses per level); an InputError naming
    ``field`` for text that nests deeper or is not JSON (saying to give ``expected`` instead,
    where given)."""
    depth = 0
    in_string = escaped = False
    for character in text:
        if in_string:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == '"':
                in_string = False
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
            if depth > NESTING_DEPTH.maximum:
                _too_deep(field)
        elif character in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except ValueError as exc:
        advice = f": give {expected}" if expected else ""
        raise SchedulerInputError(field, f"{field} is not JSON ({exc}){advice}") from None


def _too_deep(field: str) -> None:
    raise SchedulerInputError(field, f"{field}: nests deeper than the limit of {NESTING_DEPTH.describe()}")


def check_name(field: str, value: Any) -> Any:
    """A name the ledger keeps in one of its name columns."""
    if isinstance(value, str):
        NAME.check(value, field)
    return value


# ---- a hypervisor's facts, as the tracker sync writes them ---------------------------------------

HOST_VCPUS = Limit("vcpus_total", 0, 8192, "CPUs", "Linux on x86-64 runs on at most 8192 CPUs (NR_CPUS with MAXSMP)")
HOST_MEMORY_MB = Limit("total_usable_ram_mb", 0, 64 * 1024 * 1024, "MiB",
                       "x86-64 with 4-level paging addresses 64 TiB of physical memory")
HOST_DISK_GB = Limit("total_usable_disk_gb", 0, 1024 * 1024, "GiB",
                     "the ledger reads the pool in MiB (1024 x GiB) from a 32-bit column")
HOST_RESERVED_MEMORY_MB = Limit("reserved_host_memory_mb", 0, HOST_MEMORY_MB.maximum, "MiB", "no more than a host has")
HOST_RESERVED_DISK_MB = Limit("reserved_host_disk_mb", 0, HOST_DISK_GB.maximum * 1024, "MiB", "no more than a pool has")
HOST_VERSION = Limit("hypervisor_version", 0, LEDGER_INTEGER_MAX, "", "a 32-bit column of the ledger")
_HOST_LIMITS = (HOST_VCPUS, HOST_MEMORY_MB, HOST_DISK_GB, HOST_RESERVED_MEMORY_MB, HOST_RESERVED_DISK_MB)
# Host-state fields kept in a String column of the ledger, with its length.
_HOST_TEXT = {"host": 255, "nodename": 255, "availability_zone": 255, "hypervisor_type": 64, "storage_pool": 255,
              "host_ip": 64}
# (unit, what, total field, ratio field, units per unit of the total)
_CLAIMABLE = (("vCPUs", "", "vcpus_total", "cpu_allocation_ratio", 1),
              ("MiB", " of memory", "total_usable_ram_mb", "ram_allocation_ratio", 1),
              ("MiB", " of disk", "total_usable_disk_gb", "disk_allocation_ratio", 1024))


def host_state_refusal(state: Mapping[str, Any]) -> Optional[str]:
    """Why the ledger cannot record this hypervisor's host state (a number or a name out of its
    range), or None. The tracker sync records a refused hypervisor as down with this reason:
    one absurd host (a test-driver node with a petabyte of memory, a domain with a name of a
    thousand characters) must neither crash the sync nor be scheduled on."""
    try:
        _check_host_state(state)
    except SchedulerInputError as exc:
        return f"its facts are out of the ledger's range: {exc}"
    return None


def _check_host_state(state: Mapping[str, Any]) -> None:
    for limit in _HOST_LIMITS:
        if state.get(limit.field) is not None:
            limit.check(state[limit.field])
    for field in ("hypervisor_version", "libvirt_version"):
        if state.get(field) is not None:
            HOST_VERSION.check(state[field], field)
    for field, length in _HOST_TEXT.items():
        value = state.get(field)
        if isinstance(value, str) and len(value) > length:
            raise SchedulerInputError(field, f"{field}: {len(value)} characters are over the limit of {length}")
    for unit, what, total, ratio, per_unit in _CLAIMABLE:
        if not is_number(state.get(ratio)):
            continue  # no ratio, or not a number: the host state's own checks say so
        claimable = (state.get(total) or 0) * per_unit * state[ratio]
        if claimable > LEDGER_CLAIMABLE_MAX:
            raise SchedulerInputError(
                ratio, f"{ratio}: {total} x {ratio} = {claimable:.0f} {unit}{what} is over the limit of "
                       f"{_described(LEDGER_CLAIMABLE_MAX, unit)}{what} that the ledger counts as claimed on one "
                       f"hypervisor")
    for key in ("images", "networks"):
        for name in state.get(key) or []:
            if len(name) > NAME_COLUMN_CHARACTERS:
                raise SchedulerInputError(key, f"{key}: a name of {len(name)} characters is over the limit of "
                                               f"{NAME_COLUMN_CHARACTERS}")
    unmanaged = {"vCPUs": 0, "MiB of memory": 0, "MiB of disk": 0}
    for domain in state.get("domains") or []:
        if len(domain.get("name") or "") > NAME_COLUMN_CHARACTERS:
            raise SchedulerInputError("domains", f"domains: the name of domain {domain.get('uuid')} is over the "
                                                 f"limit of {NAME_COLUMN_CHARACTERS} characters")
        sizes = {"vCPUs": [domain.get("vcpus") or 0], "MiB of memory": [domain.get("memory_mb") or 0],
                 "MiB of disk": [disk.get("capacity_mb") or 0 for disk in domain.get("disks") or []]}
        for what, values in sizes.items():
            # Each is a row's column too: one negative size would let another past the sum's limit.
            for value in values:
                check_integer(f"domains: domain {domain.get('uuid')}'s {what}", value, minimum=0)
            unmanaged[what] += sum(values)
    for what, total in unmanaged.items():
        if total > LEDGER_UNMANAGED_MAX:
            raise SchedulerInputError("domains", f"domains: their {total} {what} are over the limit of "
                                                 f"{LEDGER_UNMANAGED_MAX} {what} that the ledger counts as "
                                                 f"the domains of one hypervisor")


# ---- the documentation -------------------------------------------------------------------------

def _limits_table() -> List[Tuple[str, str, str]]:
    """(what, range, why) of each limit a module option or a flavor field has."""
    rows = [(f"C({limit.field})", f"{limit.minimum} to {limit.describe()}", limit.why)
            for limit in (*FLAVOR_SIZES.values(), COUNT, LEASE_SECONDS, SERVICE_DOWN_TIME, MAX_ATTEMPTS,
                          MAX_SERVER_PER_HOST, IMAGE_MAX_MB, DECISIONS_SHOWN, DECISIONS_MAX_AGE_DAYS,
                          DECISIONS_MAX_COUNT, CONSOLE_LINES, VOLUME_SIZE_GB)]
    rows += [(f"C({limit.field})", f"at most {limit.describe()}", limit.why) for limit in (FLAVOR_NAME, EXTRA_SPEC_TEXT)]
    rows.append(("C(metadata)", f"at most {METADATA_ITEMS.maximum} items, keys of at most {METADATA_KEY.describe()}, "
                                f"values of at most {METADATA_VALUE.describe()}", f"{METADATA_ITEMS.why}; {METADATA_VALUE.why}"))
    rows.append(("C(user_data)", f"at most {USER_DATA.describe()}", USER_DATA.why))
    rows.append(("C(ssh_authorized_keys)", f"at most {PUBLIC_KEYS.maximum} keys (with C(key_name)'s), each of at "
                                           f"most {PUBLIC_KEY.describe()}", f"{PUBLIC_KEYS.why}; {PUBLIC_KEY.why}"))
    rows += [(f"C({limit.field})", f"at most {limit.maximum} {limit.unit}", limit.why)
             for limit in (NIC_ADDRESSES, NIC_ROUTES, NAMESERVERS, SEARCH_DOMAINS)]
    rows.append(("C(scheduler_hints), C(image_properties), C(image.properties)",
                 f"at most {REQUEST_MAPPING.describe()}, nested at most {NESTING_DEPTH.describe()} deep "
                 "(C(scheduler_hints.query) too, as JSON text)", f"{REQUEST_MAPPING.why}; {NESTING_DEPTH.why}"))
    rows.append(("Any dict or list option given as JSON text (as an AWX survey gives it)",
                 f"nested at most {NESTING_DEPTH.describe()} deep, counted before the text is decoded",
                 "Python's json module recurses once per level and stops at about 1000 (a RecursionError that "
                 "would fail the run uncaught), and a survey's answer of 65536 characters holds 30000 levels; "
                 "no option nests more than a few"))
    rows.append(("Names of server groups, projects, availability zones", f"at most {NAME.describe()}", NAME.why))
    return rows


def doc_notes() -> List[str]:
    """The notes of the doc fragment berth.fleet.limits, one per limit (the fragment holds them
    as literal text, which tests/unit/plugins/module_utils/test_limits.py keeps equal to these)."""
    notes = ["Every size is bounded and checked before anything is written (nothing is decided, claimed or "
             "recorded); the error names the field and its range, as in \"flavor.memory_mb: 1000000000000 is "
             "over the limit of 4194304 MiB (4 TiB)\". The limits, where a module takes the field:"]
    notes += [f"{what}: {bounds}. Why: {why}." for what, bounds, why in _limits_table()]
    notes.append("A hypervisor whose facts do not fit the ledger (vCPUs, memory or disk beyond these: "
                 f"{HOST_VCPUS.describe()}, {HOST_MEMORY_MB.describe()}, {HOST_DISK_GB.describe()}; "
                 "total x allocation ratio beyond 2^30 per resource; domains using beyond 2^30 - 1 in all) is "
                 "recorded as down by the tracker sync, with the reason, and never scheduled on.")
    return notes
