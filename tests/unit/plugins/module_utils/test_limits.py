"""Every size's bounds (plugins/module_utils/limits.py), where each value comes in: the largest
value passes, one more is refused with an error that names the field and the limit."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from ansible_collections.berth.fleet.plugins.doc_fragments.limits import ModuleDocFragment
from ansible_collections.berth.fleet.plugins.module_utils import limits
from ansible_collections.berth.fleet.plugins.module_utils._public_keys import public_keys_spec
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import host_state
from ansible_collections.berth.fleet.plugins.module_utils.request import (
    image_spec,
    instance_names,
    metadata_spec,
    network_specs,
    resolve_flavor,
    user_data_spec,
)
from ansible_collections.berth.fleet.plugins.plugin_utils._flavors import flavor_option
from ansible_collections.berth.fleet.plugins.plugin_utils._placement_spec import scheduling_request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.json_query import parse_query
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.host_states import _parsed as _ledger_parsed
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger.server_groups import check_args
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

SMALL = {"vcpus": 1, "memory_mb": 512, "root_gb": 1}


def refused(call, field: str) -> str:
    """The message of the InputError that ``call`` raises, which must name ``field``."""
    with pytest.raises(InputError) as caught:
        call()
    assert caught.value.field == field
    return str(caught.value)


# ---- integers: (limit, what takes the value) ------------------------------------------------------

def _flavor(key):
    return lambda value: resolve_flavor({**SMALL, key: value}, {})


INTEGER_CASES = [
    *[(limit, _flavor(key)) for key, limit in limits.FLAVOR_SIZES.items()],
    (limits.COUNT, lambda value: instance_names("web", value)),
    (limits.LEASE_SECONDS, lambda value: limits.check_options({"lease_seconds": value})),
    (limits.SERVICE_DOWN_TIME, lambda value: limits.check_options({"service_down_time": value})),
    (limits.MAX_ATTEMPTS, lambda value: limits.check_options({"max_attempts": value})),
    (limits.MAX_SERVER_PER_HOST, lambda value: check_args("spread", "anti-affinity", value)),
    (limits.IMAGE_MAX_MB, lambda value: limits.check_options({"image_max_mb": value})),
    (limits.DECISIONS_SHOWN, lambda value: limits.check_options({"decisions": value})),
    (limits.DECISIONS_MAX_AGE_DAYS, lambda value: limits.check_options({"decisions_max_age_days": value})),
    (limits.DECISIONS_MAX_COUNT, lambda value: limits.check_options({"decisions_max_count": value})),
    (limits.CONSOLE_LINES, lambda value: limits.check_options({"lines": value})),
    (limits.VOLUME_SIZE_GB, lambda value: limits.check_options({"size_gb": value})),
]


@pytest.mark.parametrize("limit, take", INTEGER_CASES, ids=[limit.field for limit, _take in INTEGER_CASES])
def test_an_integer_at_its_limit_passes_and_one_more_is_refused_naming_the_field(limit, take):
    take(limit.maximum)
    message = refused(lambda: take(limit.maximum + 1), limit.field)
    assert message == f"{limit.field}: {limit.maximum + 1} is over the limit of {limit.describe()}"


def test_the_issue_s_flavor_is_refused_with_the_field_and_the_range():
    message = refused(lambda: resolve_flavor({**SMALL, "memory_mb": 1000000000000}, {}), "flavor.memory_mb")
    assert message == "flavor.memory_mb: 1000000000000 is over the limit of 4194304 MiB (4 TiB)"


def test_a_flavor_from_the_flavors_file_is_bounded_too(tmp_path):
    path = tmp_path / "flavors.yml"
    path.write_text(yaml.safe_dump({"berth_flavors": {"huge": {**SMALL, "vcpus": 4096}}}))
    message = refused(lambda: flavor_option("huge", str(path)), "flavor.vcpus")
    assert "over the limit of 1024 vCPUs" in message


@pytest.mark.parametrize("key", sorted(limits.FLAVOR_SIZES))
def test_below_the_minimum_keeps_its_message(key):
    minimum = limits.FLAVOR_SIZES[key].minimum
    message = refused(lambda: resolve_flavor({**SMALL, key: minimum - 1}, {}), f"flavor.{key}")
    assert "positive integer" in message or "non-negative integer" in message


def test_options_that_are_not_integers_are_left_to_the_argument_spec():
    over = limits.COUNT.maximum + 1
    # The same number as an integer is refused: these pass because they are not integers.
    refused(lambda: limits.check_options({"count": over}), "count")
    assert limits.check_options({"lease_seconds": None, "count": str(over), "max_attempts": True}) is None


# ---- text and mappings -----------------------------------------------------------------------------

def _request(**args):
    """What berth.fleet.schedule and berth.fleet.capacity make of their arguments ``args``."""
    return lambda: scheduling_request(args, resolve_flavor(SMALL, {}), Settings.from_args(args))


def _launch(**options):
    """A launch's request checked (check_request) from ``options``, the operator's among them."""
    return lambda: check_request({"flavor": SMALL, **options}, Settings.from_args(options))


LENGTH_CASES = [
    ("flavor.name", lambda size: resolve_flavor({**SMALL, "name": "f" * size}, {}), limits.FLAVOR_NAME.maximum),
    ("flavor.extra_specs", lambda size: resolve_flavor({**SMALL, "extra_specs": {"k" * size: "1"}}, {}),
     limits.EXTRA_SPEC_TEXT.maximum),
    ("flavor.extra_specs.k", lambda size: resolve_flavor({**SMALL, "extra_specs": {"k": "v" * size}}, {}),
     limits.EXTRA_SPEC_TEXT.maximum),
    ("metadata", lambda size: metadata_spec({f"k{index}": "v" for index in range(size)}),
     limits.METADATA_ITEMS.maximum),
    ("metadata", lambda size: metadata_spec({"k" * size: "v"}), limits.METADATA_KEY.maximum),
    ("metadata.k", lambda size: metadata_spec({"k": "v" * size}), limits.METADATA_VALUE.maximum),
    ("user_data", lambda size: user_data_spec("x" * size), limits.USER_DATA.maximum),
    # As JSON, {"k": "vvv..."} is 9 bytes more than its value.
    ("image.properties", lambda size: image_spec({"name": "i.qcow2", "properties": {"k": "v" * (size - 9)}}),
     limits.REQUEST_MAPPING.maximum),
    ("scheduler_hints", lambda size: _request(scheduler_hints={"k": "v" * (size - 9)})(),
     limits.REQUEST_MAPPING.maximum),
    ("image_properties", lambda size: _request(image_properties={"k": "v" * (size - 9)})(),
     limits.REQUEST_MAPPING.maximum),
    ("project_id", lambda size: _request(project_id="p" * size)(), limits.NAME.maximum),
    ("availability_zone", lambda size: _request(availability_zone="z" * size)(), limits.NAME.maximum),
    ("project_id", lambda size: _launch(project_id="p" * size)(), limits.NAME.maximum),
    ("availability_zone", lambda size: _launch(availability_zone="z" * size)(), limits.NAME.maximum),
    ("name", lambda size: check_args("g" * size, "affinity", None), limits.NAME.maximum),
]


@pytest.mark.parametrize("field, take, maximum", LENGTH_CASES,
                         ids=[f"{case[0]}-{index}" for index, case in enumerate(LENGTH_CASES)])
def test_text_at_its_limit_passes_and_one_more_is_refused_naming_the_field(field, take, maximum):
    take(maximum)
    message = refused(lambda: take(maximum + 1), field)
    assert message.startswith(f"{field}: ") or message.startswith(f"{field} must")
    assert str(maximum) in message


# ---- nesting: what recursive parsers and walks would take -------------------------------------------

def _nested(depth, leaf=1):
    """A value ``depth`` lists deep."""
    for _level in range(depth):
        leaf = [leaf]
    return leaf


def _query(depth):
    """A valid query hint ``depth`` lists deep: ["and", ["and", ...]]."""
    query = ["and"]
    for _level in range(depth - 1):
        query = ["and", query]
    return query


# (field, take(depth)): the mappings sit one level above what they hold.
NESTING_CASES = [
    ("scheduler_hints.query", lambda depth: parse_query(json.dumps(_query(depth)))),
    ("scheduler_hints.query", lambda depth: parse_query(_query(depth))),
    ("scheduler_hints", lambda depth: _request(scheduler_hints={"k": _nested(depth - 1)})()),
    ("image_properties", lambda depth: _request(image_properties={"k": _nested(depth - 1)})()),
    ("image.properties", lambda depth: image_spec({"name": "i.qcow2", "properties": {"k": _nested(depth - 1)}})),
]


@pytest.mark.parametrize("field, take", NESTING_CASES,
                         ids=[f"{case[0]}-{index}" for index, case in enumerate(NESTING_CASES)])
def test_nesting_at_its_limit_passes_and_one_level_more_is_refused_naming_the_field(field, take):
    take(limits.NESTING_DEPTH.maximum)
    message = refused(lambda: take(limits.NESTING_DEPTH.maximum + 1), field)
    assert message == f"{field}: nests deeper than the limit of {limits.NESTING_DEPTH.describe()}"


@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000,
    '["and", ' * 5000 + '["=", 1, 1]' + "]" * 5000,
    '{"a": ' * 5000 + "1" + "}" * 5000,
], ids=["lists", "query", "objects"])
def test_a_query_nested_past_python_s_stack_is_a_field_error_not_a_recursion_error(text):
    refused(lambda: parse_query(text), "scheduler_hints.query")


def test_brackets_inside_json_strings_do_not_count_as_nesting():
    text = json.dumps(["=", "$hypervisor_type", "[" * 100 + '\\"{' * 50])
    assert parse_query(text)[2].startswith("[[[")


def test_a_decoded_hint_nested_past_python_s_stack_is_a_field_error():
    refused(_request(scheduler_hints={"query": _nested(100000)}), "scheduler_hints")


def test_not_json_is_still_named_as_such():
    assert "is not JSON" in refused(lambda: parse_query('["=", 1'), "scheduler_hints.query")


def test_a_ledger_json_column_nested_past_python_s_stack_reads_as_missing():
    assert _ledger_parsed(["[" * 100000 + "]" * 100000, '{"a": 1}', None]) == [None, {"a": 1}, None]


# ---- limits of an entry of a list (its field names the entry): (limit, the field named, what takes it) ----

_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _static(**settings):
    return lambda: network_specs([{"type": "user", "addresses": ["10.0.0.5/24"], **settings}])


INDEXED_CASES = [
    (limits.NIC_ADDRESSES, "networks[0].addresses",
     lambda count: network_specs([{"type": "user", "addresses": [f"10.0.0.{index + 2}/24" for index in range(count)]}])),
    (limits.NIC_ROUTES, "networks[0].routes",
     lambda count: _static(routes=[{"to": f"10.{index + 1}.0.0/16", "via": "10.0.0.1"} for index in range(count)])()),
    (limits.NAMESERVERS, "networks[0].nameservers.addresses",
     lambda count: _static(nameservers={"addresses": [f"10.0.0.{index + 100}" for index in range(count)]})()),
    (limits.SEARCH_DOMAINS, "networks[0].nameservers.search",
     lambda count: _static(nameservers={"search": [f"d{index}.example" for index in range(count)]})()),
    (limits.PUBLIC_KEYS, "ssh_authorized_keys", lambda count: public_keys_spec([_KEY] * count, None, {})),
]


@pytest.mark.parametrize("limit, field, take", INDEXED_CASES, ids=[case[1] for case in INDEXED_CASES])
def test_a_list_at_its_limit_passes_and_one_more_is_refused_naming_the_entry(limit, field, take):
    take(limit.maximum)
    message = refused(lambda: take(limit.maximum + 1), field)
    assert message == f"{field}: {limit.maximum + 1} is over the limit of {limit.describe()}"


def test_a_public_key_at_its_length_limit_passes_and_one_more_is_refused_naming_it():
    def take(size):
        return public_keys_spec([_KEY + " " + "c" * (size - len(_KEY) - 1)], None, {})

    take(limits.PUBLIC_KEY.maximum)
    message = refused(lambda: take(limits.PUBLIC_KEY.maximum + 1), "ssh_authorized_keys[0]")
    assert str(limits.PUBLIC_KEY.maximum) in message


def test_every_limit_has_a_test_here():
    tested = {limit.field for limit, _take in INTEGER_CASES} | {field for field, _take, _max in LENGTH_CASES} | \
        {field for field, _take in NESTING_CASES} | {limit.field for limit, _field, _take in INDEXED_CASES} | \
        {limits.PUBLIC_KEY.field}
    declared = {value.field for value in vars(limits).values() if isinstance(value, (limits.Limit, limits.LengthLimit))}
    host = {limit.field for limit in (limits.HOST_VCPUS, limits.HOST_MEMORY_MB, limits.HOST_DISK_GB,
                                      limits.HOST_RESERVED_MEMORY_MB, limits.HOST_RESERVED_DISK_MB,
                                      limits.HOST_VERSION)}
    assert declared - host - tested - {"metadata.<key>"} == set()
    assert host <= {field for field, _value in HOST_CASES}


def test_the_documentation_shows_each_limit_and_its_reason():
    notes = limits.doc_notes()
    for limit in (*limits.FLAVOR_SIZES.values(), *limits.OPTION_LIMITS.values()):
        assert f"C({limit.field}): {limit.minimum} to {limit.describe()}. Why: {limit.why}." in notes
    assert "over the limit of 4194304 MiB (4 TiB)" in notes[0]


def test_the_doc_fragment_says_what_limits_py_checks():
    fragment = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)
    wanted = "".join("  - >-\n" + "".join(f"    {line}\n" for line in textwrap.wrap(
        note, width=100, break_long_words=False, break_on_hyphens=False)) for note in limits.doc_notes())
    assert fragment == {"options": {}, "notes": limits.doc_notes()}, (
        f"plugins/doc_fragments/limits.py is out of date; its DOCUMENTATION should be:\noptions: {{}}\nnotes:\n{wanted}")


# ---- a hypervisor's facts ----------------------------------------------------------------------------

def state(**fields):
    base = {"host": "hv1", "nodename": "hv1", "uuid": "hv-1", "service_up": True, "vcpus_total": 8,
            "total_usable_ram_mb": 16384, "total_usable_disk_gb": 100, "cpu_allocation_ratio": 4.0,
            "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0, "reserved_host_memory_mb": 512,
            "reserved_host_disk_mb": 0, "hypervisor_version": 7002000, "libvirt_version": 9000000,
            "images": [], "networks": [], "domains": []}
    return {**base, **fields}


def dom(number, vcpus=1, memory_mb=512, disk_mb=0, name=None):
    return {"name": name or f"d{number}", "uuid": f"u{number}", "vcpus": vcpus, "memory_mb": memory_mb,
            "disks": [{"capacity_mb": disk_mb}] if disk_mb else []}


HOST_CASES = [
    ("vcpus_total", {"vcpus_total": 8193, "cpu_allocation_ratio": 1.0}),
    ("total_usable_ram_mb", {"total_usable_ram_mb": 1099511627776}),
    ("total_usable_disk_gb", {"total_usable_disk_gb": 1024 * 1024 + 1}),
    ("reserved_host_memory_mb", {"reserved_host_memory_mb": 64 * 1024 * 1024 + 1}),
    ("reserved_host_disk_mb", {"reserved_host_disk_mb": 1024**3 + 1}),
    ("hypervisor_version", {"hypervisor_version": 2**31}),
    ("libvirt_version", {"libvirt_version": 2**31}),
    ("nodename", {"nodename": "n" * 256}),
    ("hypervisor_type", {"hypervisor_type": "t" * 65}),
    ("images", {"images": ["i" * 256]}),
    ("networks", {"networks": ["n" * 256]}),
    ("domains", {"domains": [dom(1, name="d" * 256)]}),
    # What claims may reach: total x ratio, each resource within 2^30 (1 PiB of MiB).
    ("ram_allocation_ratio", {"total_usable_ram_mb": 64 * 1024 * 1024, "ram_allocation_ratio": 16.5}),
    ("disk_allocation_ratio", {"total_usable_disk_gb": 100 * 1024, "disk_allocation_ratio": 10.5}),
    ("cpu_allocation_ratio", {"vcpus_total": 8192, "cpu_allocation_ratio": 2.0**17 + 1}),
    # Domains, managed or not, within the other half of the columns.
    ("domains", {"domains": [dom(n, memory_mb=limits.FLAVOR_MEMORY_MB.maximum) for n in range(256)]}),
    ("domains", {"domains": [dom(n, disk_mb=2**29) for n in range(2)]}),
]


@pytest.mark.parametrize("field, fields", HOST_CASES, ids=[f"{case[0]}-{index}" for index, case in enumerate(HOST_CASES)])
def test_a_host_state_out_of_the_ledger_s_range_is_refused_naming_the_field(field, fields):
    assert limits.host_state_refusal(state()) is None
    reason = limits.host_state_refusal(state(**fields))
    assert reason is not None and reason.startswith(f"its facts are out of the ledger's range: {field}")


def test_a_host_at_every_limit_is_still_taken():
    assert limits.host_state_refusal(state(
        vcpus_total=8192, total_usable_ram_mb=64 * 1024 * 1024, ram_allocation_ratio=16.0,
        total_usable_disk_gb=1024 * 1024, disk_allocation_ratio=1.0, hypervisor_version=2**31 - 1,
        domains=[dom(n, memory_mb=limits.FLAVOR_MEMORY_MB.maximum) for n in range(255)])) is None


def test_a_huge_test_driver_node_becomes_a_down_host_with_the_reason():
    facts = {
        "nodename": "huge", "uuid": "11111111-2222-3333-4444-555555555555", "vcpus_total": 16,
        "hypervisor_type": "TEST", "hypervisor_version": 2, "libvirt_version": 9000000, "cpu_info": {},
        "numa_topology": {"cells": []}, "supported_instances": [], "metrics": {}, "uri_uuid": "",
        "memory": {"total_mb": 2**40, "free_mb": 0, "buffers_mb": 0, "cached_mb": 0}, "memory_source": "libvirt",
        "storage_pool": "default", "domains": [],
        "pools": [{"name": "default", "active": True, "capacity_mb": 102400, "allocation_mb": 0, "available_mb": 0}],
    }
    got = host_state("huge", facts, {})
    assert got["service_up"] is False
    assert got["down_reason"] == ("its facts are out of the ledger's range: total_usable_ram_mb: 1099511627776 is "
                                  "over the limit of 67108864 MiB (64 TiB)")
    assert got["total_usable_ram_mb"] == 0


def test_the_tracker_sync_records_an_out_of_range_host_as_down_on_sqlite_and_postgresql(ledger_url):
    ledger = Ledger(ledger_url).open(create=True)
    try:
        ledger.tracker_sync([state()])
        report = ledger.tracker_sync([state(total_usable_ram_mb=2**40, domains=[dom(1, memory_mb=2**40)])])
        [down] = report["down"]
        assert down["host"] == "hv1" and "total_usable_ram_mb: 1099511627776 is over the limit" in down["reason"]
        [row] = ledger.hypervisors()
        assert row["sync_status"] == "down" and row["inventories"]["MEMORY_MB"]["total"] == 16384
        assert not row["unmanaged"]
        # A hypervisor the ledger never saw is refused alike, and nothing is written for it.
        report = ledger.tracker_sync([state(host="hv2", uuid="hv-2", domains=[dom(n, vcpus=2**27) for n in range(9)])])
        assert [h["host"] for h in ledger.hypervisors()] == ["hv1"] and report["hypervisors"] == []
    finally:
        ledger.close()
