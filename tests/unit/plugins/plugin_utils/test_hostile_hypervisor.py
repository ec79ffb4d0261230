"""One hostile hypervisor among honest ones: whatever it answers, the tracker sync records every
honest host in a real SQLite ledger, and the hostile one is either read (its answer still made
sense) or down with a short, printable reason. Hypothesis mangles each libvirt answer a sync
reads - capabilities, domain capabilities, node info, domain XML, the storage pool, the NUMA
part of the capabilities and free pages, the PCI node devices - at least MANGLED_EXAMPLES
times per kind; every answer goes through Berth's own reading of it (libvirt_host.Hypervisor
over a scripted libvirt connection: scripted_libvirt.py).

The same boundary holds in the hypervisors inventory, the hypervisor_facts module and the
instances inventory (a bad answer about a guest's addresses).
"""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import libvirt
import pytest
import yaml
from ansible.inventory.data import InventoryData
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripted_libvirt import connect_to, honest_answers, open_auth

from ansible_collections.berth.fleet.plugins.inventory import hypervisors as hypervisors_plugin
from ansible_collections.berth.fleet.plugins.inventory import instances as instances_plugin
from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import REASON_CHARACTERS, printable
from ansible_collections.berth.fleet.plugins.module_utils.host_fetch import fetch
from ansible_collections.berth.fleet.plugins.modules import hypervisor_facts, tracker_sync
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Sync, SyncRequest, Target

HONEST = ("hv1", "hv2")
HOSTILE = "hv3"
URIS = {name: f"qemu+ssh://192.0.2.{number}/system" for number, name in enumerate((*HONEST, HOSTILE), 1)}
SETTINGS = {"storage_pool": "default", "settings": {}, "aggregates": [], "availability_zone": "nova",
            "keepalive_interval": 5, "keepalive_count": 3, "timeout": 5.0}
# Per kind of answer: enough to reach every element and attribute of the answers several times.
MANGLED_EXAMPLES = 200
SHARED_MEMORY = "/dev/shm"


class Fleet(SimpleNamespace):
    """The synced fleet: its ledger, its sync request and its honest answers (shown short in a
    failing example)."""

    def __repr__(self) -> str:
        return f"Fleet({', '.join(URIS)})"


class FrozenClock:
    """The sync's clock, never moving: no hypervisor is given up for slowness, so that only what
    it answered decides whether it is up (sync.MonotonicClock's interface)."""

    def now(self) -> float:
        return 0.0

    def wait(self, condition: threading.Condition, timeout_s: float | None) -> None:
        condition.wait(timeout_s)


# ---- mangling an answer ---------------------------------------------------------------------------

# What a hostile host writes where Berth expects a number or a name: the issue's own ("one", "²"),
# other digits int() reads or refuses, signs, units, huge numbers, control and bidi characters.
HOSTILE_TEXT = st.one_of(
    st.sampled_from(["one", "²", "٣", "-1", "", " ", "0x1f", "1e9", "1_0", "9" * 40, str(2 ** 64), "NaN", "4.5",
                     "\x1b[31m", "\u202ehv1", "a\nb", "x" * 5000, "0-99999", "^0", "&amp;", "]]>"]),
    st.text(max_size=30),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70).map(str),
)
# What libvirt's binding can hand over as a number: any C integer, signed or not.
HOSTILE_NUMBERS = st.one_of(st.sampled_from([0, -1, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 63 - 1, 2 ** 64 - 1, -(2 ** 63)]),
                            st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1))


@st.composite
def mangled_xml(draw: st.DrawFn, text: str, within: str | None = None) -> str:
    """``text`` cut short, with garbage inserted, or with one element (of ``within``, a path,
    where given) given a hostile value, removed or repeated."""
    how = draw(st.sampled_from(["truncate", "garbage", "value", "remove", "repeat"]))
    if how == "truncate":
        return text[:draw(st.integers(min_value=0, max_value=len(text) - 1))]
    if how == "garbage":
        at = draw(st.integers(min_value=0, max_value=len(text)))
        return text[:at] + draw(HOSTILE_TEXT) + text[at:]
    root = ET.fromstring(text)
    scope = root.find(within) if within else root
    parents = {child: parent for parent in root.iter() for child in parent}
    element = draw(st.sampled_from(list(scope.iter())))
    if how == "value" or element is root:
        slot = draw(st.sampled_from(["text", *sorted(element.attrib)]))
        value = draw(HOSTILE_TEXT)
        if slot == "text":
            element.text = value
        else:
            element.set(slot, value)
    elif how == "remove":
        parents[element].remove(element)
    else:
        parent = parents[element]
        parent.insert(list(parent).index(element), copy.deepcopy(element))
    return ET.tostring(root, encoding="unicode")


def changed(answers: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A copy of ``answers`` with the answer at ``path`` (keys and indexes) replaced."""
    copied = copy.deepcopy(answers)
    place = copied
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return copied


@st.composite
def mangled_answers(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """The hostile host's answers: honest ones with one answer of ``kind`` mangled."""
    answers = honest_answers(3)
    if kind == "capabilities":
        return changed(answers, ("capabilities",), draw(mangled_xml(answers["capabilities"])))
    if kind == "domain_capabilities":
        domain_type = draw(st.sampled_from(["kvm", "qemu"]))
        text = answers["domain_capabilities"][domain_type]
        return changed(answers, ("domain_capabilities", domain_type), draw(mangled_xml(text)))
    if kind == "node_info":
        # getInfo(), getMemoryStats(), getCPUStats() and the host's name and versions.
        path = draw(st.sampled_from([("node_info", index) for index in range(8)]
                                    + [("memory_stats", key) for key in answers["memory_stats"]]
                                    + [("cpu_stats", key) for key in answers["cpu_stats"]]
                                    + [("hostname",), ("version",), ("lib_version",)]))
        text = path in (("node_info", 0), ("hostname",))
        return changed(answers, path, draw(HOSTILE_TEXT if text else HOSTILE_NUMBERS))
    if kind == "domain_xml":
        # A domain's XML, its info, or the domain listed twice.
        index = draw(st.integers(min_value=0, max_value=len(answers["domains"]) - 1))
        where = draw(st.sampled_from(["xml", "info", "listed twice"]))
        if where == "xml":
            return changed(answers, ("domains", index, "xml"), draw(mangled_xml(answers["domains"][index]["xml"])))
        if where == "info":
            return changed(answers, ("domains", index, "info", draw(st.integers(0, 4))), draw(HOSTILE_NUMBERS))
        return changed(answers, ("domains",), [*answers["domains"], answers["domains"][index]])
    if kind == "pool":
        # The pool's info, and its volumes' XML and info (the images' checks read them).
        volume = draw(st.sampled_from(sorted(answers["pools"]["default"]["volumes"])))
        where = draw(st.sampled_from(["pool info", "volume xml", "volume info"]))
        if where == "pool info":
            return changed(answers, ("pools", "default", "info", draw(st.integers(0, 3))), draw(HOSTILE_NUMBERS))
        if where == "volume info":
            return changed(answers, ("pools", "default", "volumes", volume, "info", draw(st.integers(0, 2))),
                           draw(HOSTILE_NUMBERS))
        text = answers["pools"]["default"]["volumes"][volume]["xml"]
        return changed(answers, ("pools", "default", "volumes", volume, "xml"), draw(mangled_xml(text)))
    if kind == "numa":
        # The capabilities' cells, and the free pages count of each cell and page size.
        if draw(st.booleans()):
            return changed(answers, ("capabilities",), draw(mangled_xml(answers["capabilities"], "host/topology")))
        return changed(answers, ("free_pages",), draw(st.dictionaries(
            HOSTILE_NUMBERS, st.dictionaries(HOSTILE_NUMBERS, HOSTILE_NUMBERS, max_size=3), max_size=3)))
    assert kind == "pci"
    index = draw(st.integers(min_value=0, max_value=len(answers["node_devices"]) - 1))
    return changed(answers, ("node_devices", index, "xml"), draw(mangled_xml(answers["node_devices"][index]["xml"])))


KINDS = ("capabilities", "domain_capabilities", "node_info", "domain_xml", "pool", "numa", "pci")


# ---- the tracker sync -------------------------------------------------------------------------------

def fleet_in(ledger: Ledger) -> Fleet:
    """The three hosts, all honest then, recorded in ``ledger`` by one sync; and the request
    that syncs them again."""
    targets = tuple(Target.from_hostvars(name, {"berth_libvirt_uri": uri, "berth_hypervisor": SETTINGS})
                    for name, uri in URIS.items())
    request = SyncRequest(targets=targets)
    answers = {name: honest_answers(number) for number, name in enumerate(URIS, 1)}
    first = Sync(request, ledger, connect_to(answers), clock=FrozenClock()).run()
    assert first["summary"]["down"] == 0
    return Fleet(ledger=ledger, request=request, answers=answers)


@pytest.fixture(scope="module")
def synced_fleet(tmp_path_factory):
    """The fleet in a real SQLite ledger, which every example of a module's tests syncs again:
    in /dev/shm where the machine has it, so that 1,400 syncs do not wait for as many disk
    flushes (the same SQLite, the same statements)."""
    directory = Path(tempfile.mkdtemp(prefix="berth-hostile-", dir=SHARED_MEMORY)) if os.path.isdir(SHARED_MEMORY) \
        else tmp_path_factory.mktemp("hostile")
    ledger = Ledger(f"sqlite:///{directory / 'ledger.sqlite3'}").open(create=True)
    try:
        yield fleet_in(ledger)
    finally:
        ledger.close()
        shutil.rmtree(directory)


def synced_with(fleet: Fleet, hostile: dict[str, Any]) -> dict[str, Any]:
    """The sync's result with the hostile host answering ``hostile``, after checking what the
    ledger recorded: every honest host up, the hostile one up or down with a safe reason."""
    answers = {**fleet.answers, HOSTILE: hostile}
    result = Sync(fleet.request, fleet.ledger, connect_to(answers), clock=FrozenClock()).run()
    rows = fleet.ledger.hypervisors()
    recorded = {entry["host"] for entry in result["report"]["hypervisors"]}
    assert set(HONEST) <= recorded
    assert all(row["sync_status"] == "up" for row in rows if row["host"] in HONEST)
    if HOSTILE in recorded:
        return result  # what it said still made a host state
    [reason] = {entry["reason"] for entry in result["report"]["down"]}
    assert reason and len(reason) <= REASON_CHARACTERS and printable(reason) == reason
    assert {(row["sync_status"], row["down_reason"]) for row in rows if row["host"] == HOSTILE} == {("down", reason)}
    assert result["findings"][HOSTILE][0].startswith(f"{HOSTILE}: did not answer ({reason})")
    return result


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=MANGLED_EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_one_hostile_hypervisor_never_stops_the_sync(synced_fleet, kind, data):
    synced_with(synced_fleet, data.draw(mangled_answers(kind), label=f"{HOSTILE}'s answers"))


@pytest.mark.parametrize("where, mangle, reason", [
    ("capabilities", lambda text: text.replace("<cell id='1'>", "<cell id='one'>"),
     "hv3: its answers could not be read (CapabilitiesError: NUMA cell id 'one' is not a whole number)"),
    ("capabilities", lambda text: text[:len(text) // 2], "hv3: its answers could not be read (ParseError: "),
    # A bidirectional override turns a line round on screen; thousands of them make a page.
    ("capabilities", lambda text: text.replace("000000000003</uuid>", "3" + "\u202e" * 5000 + "</uuid>"),
     "hv3: its answers could not be read (CapabilitiesError: the host UUID '6a1c0000-0000-4000-8000-3\\u202e"),
], ids=["cell-id-one", "truncated-xml", "uuid-of-overrides"])
def test_the_issues_hostile_answers_put_that_host_down_with_a_safe_reason(synced_fleet, where, mangle, reason):
    hostile = honest_answers(3)
    hostile[where] = mangle(hostile[where])
    result = synced_with(synced_fleet, hostile)
    # Every row of its name (a host that reported another UUID once has two) is down with it.
    [recorded] = {entry["reason"] for entry in result["report"]["down"]}
    assert recorded.startswith(reason)


def test_a_memory_size_of_superscript_two_counts_as_none_given(synced_fleet):
    # "²".isdigit() is true and int("²") fails: the parser reads ASCII digits only, and a size
    # that is none is not trusted (0 MiB), as one in a unit libvirt never uses.
    hostile = honest_answers(3)
    hostile["capabilities"] = hostile["capabilities"].replace("<memory unit='KiB'>8388608</memory>",
                                                              "<memory unit='KiB'>²</memory>", 1)
    result = synced_with(synced_fleet, hostile)
    assert HOSTILE in {entry["host"] for entry in result["report"]["hypervisors"]}


def test_domain_sizes_no_ledger_column_holds_put_that_host_down_on_either_ledger(ledger):
    """A domain of 2^40 vCPUs and another of -2^40 sum to nothing, and neither fits a row of
    the ledger's unmanaged usage (32-bit on PostgreSQL): each size is checked, not only the sum."""
    hostile = honest_answers(3)
    hostile["domains"][0]["info"][3] = 2 ** 40
    hostile["domains"][1]["info"][3] = -(2 ** 40)
    result = synced_with(fleet_in(ledger), hostile)
    [reason] = {entry["reason"] for entry in result["report"]["down"]}
    assert reason == ("its facts are out of the ledger's range: domains: domain d0000000-0003-4000-8000-000000000001's "
                      "vCPUs must be a non-negative integer, got -1099511627776")


def test_a_host_whose_leftovers_cannot_be_read_fails_that_removal_only(synced_fleet, monkeypatch):
    """The sync asks a host again to remove what a dead build left there: what that host answers
    then is its own failure too, reported on the leftover, never the sync's."""
    sync = Sync(synced_fleet.request, synced_fleet.ledger, connect_to({**synced_fleet.answers, HOSTILE: {
        **honest_answers(3), "domains": [{**honest_answers(3)["domains"][0], "xml": "<domain><name>"}]}}))
    batch = {"leftovers": [{"host": HOSTILE, "instance_uuid": honest_answers(3)["domains"][0]["uuid"],
                            "items": [{"id": 1, "kind": "domain", "name": "guest0", "pool": None}], "running": False}]}
    assert sync._reclaim(batch) is False
    [group] = batch["leftovers"]
    assert group["outcome"] == "failed" and group["error"].startswith("hv3: its answers could not be read (ParseError")


# ---- the hypervisors inventory and the hypervisor_facts module ---------------------------------------

class Display:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, text: str, *args: Any, **kwargs: Any) -> None:
        self.warnings.append(text)


def test_the_hypervisors_inventory_lists_a_hostile_host_down_and_the_others_whole(monkeypatch):
    hostile = honest_answers(3)
    hostile["node_devices"][0]["xml"] = "<device><capability type='pci'>" + "\x07" * 10_000
    hostile["capabilities"] = hostile["capabilities"].replace("<cell id='0'>", "<cell id='²'>")
    by_uri = {uri: honest_answers(number) for number, uri in enumerate(URIS.values(), 1)}
    by_uri[URIS[HOSTILE]] = hostile
    monkeypatch.setattr(libvirt, "openAuth", open_auth(by_uri))
    plugin = hypervisors_plugin.InventoryModule()
    documented = yaml.safe_load(hypervisors_plugin.DOCUMENTATION)["options"]
    # The documented defaults, and the fragments' (constructed, libvirt_auth, uri_policy, guest_cpu).
    plugin._options = {**{name: spec.get("default") for name, spec in documented.items()},
                       **dict.fromkeys(("uri_policy", "cpu_mode", "cpu_models", "cpu_model_extra_flags")),
                       "strict": False, "compose": {}, "groups": {}, "keyed_groups": [],
                       "hypervisors": {name: {"uri": uri} for name, uri in URIS.items()}}
    plugin.inventory, plugin.display = InventoryData(), Display()
    hypervisors, aggregates, targets = plugin._source()
    plugin._populate(hypervisors, aggregates, targets, fetch(targets, "default", 5.0))
    states = {name: plugin.inventory.get_host(name).vars["berth_host_state"] for name in URIS}
    assert [states[name]["service_up"] for name in HONEST] == [True, True]
    reason = "hv3: its answers could not be read (CapabilitiesError: NUMA cell id '²' is not a whole number)"
    assert (states[HOSTILE]["service_up"], states[HOSTILE]["down_reason"]) == (False, reason)
    assert {host.name for host in plugin.inventory.groups["down"].get_hosts()} == {HOSTILE}
    assert plugin.display.warnings == [f"hypervisor hv3 is down: {reason}"]


def test_hypervisor_facts_answers_a_host_state_down_for_facts_that_do_not_make_one(monkeypatch):
    """On the hypervisor: what its own libvirt answered is read as the sync reads it; answers
    that do not read fail the task with the reason, facts that make no host state give it down."""
    params = {"name": "hv3", "uri": URIS[HOSTILE], "storage_pool": "default", "timeout": 5.0,
              "cpu_allocation_ratio": None, "ram_allocation_ratio": None, "disk_allocation_ratio": None,
              "reserved_host_memory_mb": None, "reserved_host_disk_mb": None, "aggregates": [],
              "default_availability_zone": "nova", "uri_policy": None}
    hostile = honest_answers(3)
    hostile["domains"][1]["xml"] = hostile["domains"][1]["xml"][:-20]
    monkeypatch.setattr(libvirt, "openAuth", open_auth({URIS[HOSTILE]: hostile}))
    with pytest.raises(hypervisor_facts.BerthError, match=r"^hv3: its answers could not be read \(ParseError: "):
        hypervisor_facts.run_module(SimpleNamespace(params=params))

    def facts_without_pools(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        return {"facts": {"memory": {}, "storage_pool": "default", "pools": []}, "gathered_at": 0.0}

    monkeypatch.setattr(hypervisor_facts, "fetch_one", facts_without_pools)
    state = hypervisor_facts.run_module(SimpleNamespace(params=params))["host_state"]
    assert state["service_up"] is False
    assert state["down_reason"].startswith("hv3: its answers could not be read (")


# ---- the instances inventory: a hypervisor's answers about its guests ---------------------------------

def test_a_bad_answer_about_a_guests_addresses_is_that_hosts_and_the_others_are_listed(monkeypatch):
    honest, hostile = honest_answers(1), honest_answers(3)
    for answers, number in ((honest, 1), (hostile, 3)):
        answers["domains"][0]["addresses"] = {"vnet0": {"hwaddr": f"52:54:00:00:{number:02x}:00", "addrs": [
            {"type": libvirt.VIR_IP_ADDR_TYPE_IPV4, "addr": f"192.168.122.{10 + number}", "prefix": 24}]}}
    hostile["domains"][0]["xml"] = hostile["domains"][0]["xml"].replace("<name>", "<name\x1b]8;;", 1)
    monkeypatch.setattr(libvirt, "openAuth", open_auth({URIS["hv1"]: honest, URIS[HOSTILE]: hostile}))
    plugin = instances_plugin.InventoryModule()
    plugin._options = {"timeout": 5.0, "username": None, "password": None, "address_sources": ["lease"]}
    plugin._uri_policy = instances_plugin.UriPolicy.from_settings(None)
    rows = [{"host": host, "uri": URIS[host], "uuid": answers["domains"][0]["uuid"]}
            for host, answers in (("hv1", honest), (HOSTILE, hostile))]
    fetched = {"instances": rows, "guests": {}, "unreachable": {}}
    plugin._ask_hypervisors(rows, fetched)
    assert fetched["guests"][rows[0]["uuid"]]["addresses"][0]["address"] == "192.168.122.11"
    assert list(fetched["unreachable"]) == [HOSTILE]
    assert fetched["unreachable"][HOSTILE].startswith("its answers could not be read (ParseError: ")


@pytest.mark.parametrize("documentation", [hypervisors_plugin.DOCUMENTATION, tracker_sync.DOCUMENTATION],
                         ids=["hypervisors-inventory", "tracker_sync"])
def test_the_bound_on_a_reason_is_documented_as_it_is(documentation):
    assert f"at most {REASON_CHARACTERS} characters" in " ".join(documentation.split())
