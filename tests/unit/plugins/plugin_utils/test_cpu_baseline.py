"""CPU baseline groups (module_utils/cpu_baseline.py): the tracker sync computes a group's baseline
on one member from the members' recorded host-model CPUs, records it on each, keeps it, and
names the members that cannot run it; a host with cpu_mode group-baseline defines its guests
with it. Fake hypervisors, real SQLite and PostgreSQL ledgers."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET

import pytest
from fake_hypervisor import FakeHypervisor, connect_to

from ansible_collections.berth.fleet.plugins.module_utils._guest import Guest
from ansible_collections.berth.fleet.plugins.module_utils.cpu_baseline import host_model_xml, parse_baseline
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import cpu_settings, guest_cpu
from ansible_collections.berth.fleet.plugins.module_utils.request import Image, Network, Request
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor
from ansible_collections.berth.fleet.plugins.module_utils.uri_policy import DEFAULT_POLICY
from ansible_collections.berth.fleet.plugins.plugin_utils._provisioning import controller_refusal
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import DEFAULT_TEMPLATE, DomainTemplate
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.sync import Sync, SyncRequest, Target

RACK = ({"name": "rack1", "metadata": {}},)
SETTINGS = {"storage_pool": "default", "availability_zone": "nova", "keepalive_interval": 5, "keepalive_count": 3,
            "timeout": 5.0}
REFUSAL = "the CPU is incompatible with host CPU: Host CPU does not provide required features: avx2"


def target(host: str, aggregates=RACK, cpu_mode: str = "group-baseline") -> Target:
    return Target.from_hostvars(host, {"berth_libvirt_uri": f"qemu+ssh://{host}.example/system", "berth_hypervisor": {
        **SETTINGS, "aggregates": aggregates, "settings": {"cpu_mode": cpu_mode}}})


def fake(host: str, *features: str, model: str = "EPYC-Rome") -> FakeHypervisor:
    hv = FakeHypervisor(host)
    hv.host_model = {"kvm": {"model": model, "vendor": "AMD",
                             "features": {**{name: "require" for name in features}, "svm": "disable"}}}
    return hv


def sync(ledger, hvs, targets, **options) -> dict:
    request = SyncRequest(targets=tuple(targets), cpu_baseline_groups=("rack1",), **options)
    return Sync(request, ledger, connect_to(*hvs)).run()


def recorded(ledger, *hosts):
    return ledger.cpu_baselines(list(hosts))


def test_a_group_gets_the_baseline_of_its_members_host_model_cpus_computed_on_one_member(ledger):
    hv1, hv2 = fake("hv1", "avx2", "x2apic"), fake("hv2", "x2apic")
    result = sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))
    # Computed once, on the first member (its inventory URI), from both host-model CPUs.
    [call] = hv1.baseline_calls
    assert not hv2.baseline_calls and (call["domain_type"], call["arch"]) == ("kvm", "x86_64")
    assert [ET.fromstring(xml).findtext("model") for xml in call["cpus"]] == ["EPYC-Rome", "EPYC-Rome"]
    # A model's feature the host-model CPU disables stays disabled: the baseline must lack it too.
    assert all("<feature policy=\"disable\" name=\"svm\" />" in xml for xml in call["cpus"])
    baseline = {"group": "rack1", "hosts": ["hv1", "hv2"], "arch": "x86_64", "cpus": {"kvm": {
        "model": "EPYC-Rome", "vendor": "", "features": [{"policy": "require", "name": "x2apic"}]}}}
    assert recorded(ledger, "hv1", "hv2") == {"hv1": baseline, "hv2": baseline}
    assert "CPU baseline group rack1: recorded kvm: EPYC-Rome +x2apic (computed on hv1 from hv1, hv2; 2 record(s) " \
           "changed)" in result["drift"]
    assert result["changed"]
    # Each member compared it with what it can give a guest; both can: no finding.
    assert "compare_cpu" in hv1.calls and "compare_cpu" in hv2.calls
    assert not any("CPU baseline of group" in line for line in result["drift"])

    # The next sync keeps it (computed nothing, wrote nothing) and still compares.
    hv1.calls.clear()
    steady = sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))
    assert len(hv1.baseline_calls) == 1 and "compare_cpu" in hv1.calls
    assert not steady["changed"] and recorded(ledger, "hv1", "hv2") == {"hv1": baseline, "hv2": baseline}


def test_a_member_that_cannot_run_the_kept_baseline_is_named_and_the_baseline_is_computed_again_when_all_answer(ledger):
    hv1, hv2 = fake("hv1", "avx2"), fake("hv2", "avx2")
    sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))
    assert recorded(ledger, "hv1")["hv1"]["cpus"]["kvm"]["features"] == [{"policy": "require", "name": "avx2"}]

    # hv3 joins while hv2 is down: the baseline is kept, and hv3, without avx2, is named.
    hv3 = fake("hv3")
    hv3.cpu_refusal = REFUSAL
    hv2.unreachable = "connection refused"
    joined = sync(ledger, (hv1, hv2, hv3), (target("hv1"), target("hv2"), target("hv3")))
    assert len(hv1.baseline_calls) == 1
    line = f"hv3: DRIFT cannot run the CPU baseline of group rack1 (EPYC-Rome +avx2) as a kvm domain: {REFUSAL}"
    assert line in joined["findings"]["hv3"] and line in joined["drift"]
    assert not any("DRIFT cannot run" in line for line in joined["findings"]["hv1"])
    # A member the kept baseline was not recorded on yet gets it at once (hv3 builds with it).
    assert recorded(ledger, "hv3")["hv3"]["hosts"] == ["hv1", "hv2"]

    # All three answer: computed again from the three, hv3's CPU among them.
    hv2.unreachable = None
    hv3.cpu_refusal = None
    again = sync(ledger, (hv1, hv2, hv3), (target("hv1"), target("hv2"), target("hv3")))
    assert len(hv1.baseline_calls) == 2 and len(hv1.baseline_calls[1]["cpus"]) == 3
    baseline = recorded(ledger, "hv1", "hv2", "hv3")
    assert {host: (b["hosts"], b["cpus"]["kvm"]["features"]) for host, b in baseline.items()} == {
        host: (["hv1", "hv2", "hv3"], []) for host in ("hv1", "hv2", "hv3")}
    assert not any("DRIFT cannot run" in line for line in again["drift"])


def test_members_of_different_models_get_the_model_libvirt_says_all_can_run(ledger):
    hv1, hv2 = fake("hv1", "x2apic", model="EPYC-Rome"), fake("hv2", "x2apic", model="Skylake-Server")
    hv1.baseline_model = "Westmere"
    result = sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))
    assert recorded(ledger, "hv2")["hv2"]["cpus"]["kvm"]["model"] == "Westmere"
    assert any(line.startswith("CPU baseline group rack1: recorded kvm: Westmere +x2apic") for line in result["drift"])


def test_a_check_mode_sync_says_what_it_would_record_and_records_nothing(ledger):
    hv1, hv2 = fake("hv1", "avx2"), fake("hv2", "avx2")
    sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))  # the hypervisors recorded
    ledger.record_cpu_baseline(["hv1", "hv2"], {"group": "rack1", "hosts": ["hv1"], "arch": "x86_64", "cpus": {}})
    result = sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")), dry_run=True)
    assert any(line.startswith("CPU baseline group rack1: would record kvm: EPYC-Rome +avx2") for line in result["drift"])
    assert recorded(ledger, "hv1")["hv1"]["hosts"] == ["hv1"]


def test_a_group_whose_members_offer_no_host_model_cpu_gets_no_baseline_and_the_report_says_why(ledger):
    hv1, hv2 = fake("hv1", "avx2"), FakeHypervisor("hv2")
    result = sync(ledger, (hv1, hv2), (target("hv1"), target("hv2")))
    assert not hv1.baseline_calls and recorded(ledger, "hv1", "hv2") == {}
    assert "CPU baseline group rack1: not computed: its members' libvirt gave no host-model CPU for one domain type " \
           "all of them offer" in result["drift"]


def test_a_host_in_two_baseline_groups_is_refused_before_anything_is_read(ledger):
    both = target("hv1", aggregates=(*RACK, {"name": "rack2", "metadata": {}}))
    with pytest.raises(InputError, match="hv1 is in two CPU baseline groups \\(rack1, rack2\\)"):
        SyncRequest(targets=(both,), cpu_baseline_groups=("rack1", "rack2"))
    with pytest.raises(InputError, match=r"cpu_baseline_groups\[0\] is not an aggregate name"):
        SyncRequest(targets=(both,), cpu_baseline_groups=("rack 1",))


BASELINE_FEATURES = [{"policy": "require", "name": "x2apic"}, {"policy": "disable", "name": "svm"}]
BASELINE_RECORD = {"settings": {"cpu_mode": "group-baseline"}, "baseline": {
    "group": "rack1", "hosts": ["hv1", "hv2"], "arch": "x86_64",
    "cpus": {"kvm": {"model": "EPYC-Rome", "vendor": "AMD", "features": BASELINE_FEATURES}}}}
TOPOLOGY = {"sockets": 1, "cores": 1, "threads": 1}


def test_a_group_baseline_host_defines_its_guests_with_the_recorded_baseline():
    assert guest_cpu(BASELINE_RECORD, "hv1", "kvm", TOPOLOGY) == {
        "mode": "custom", "model": "EPYC-Rome", "baseline_group": "rack1", "topology": TOPOLOGY,
        "features": [{"policy": "require", "name": "x2apic"}, {"policy": "disable", "name": "svm"}]}


def test_a_group_baseline_host_without_a_baseline_for_the_domain_type_refuses_naming_its_setting():
    with pytest.raises(InputError, match="hv1 has no CPU baseline of its group rack1 recorded for qemu domains, which "
                                         "cpu_mode group-baseline or the guest option cpu_baseline asks for") as exc:
        guest_cpu(BASELINE_RECORD, "hv1", "qemu", TOPOLOGY)
    assert exc.value.field == "hypervisors.hv1.cpu_baseline"
    with pytest.raises(InputError, match="hv1 has no CPU baseline recorded for kvm domains"):
        guest_cpu({"settings": {"cpu_mode": "group-baseline"}}, "hv1", "kvm", TOPOLOGY)


def test_a_guest_asking_for_the_baseline_gets_it_whatever_its_hosts_cpu_mode():
    host_model_host = {**BASELINE_RECORD, "settings": {}}
    assert guest_cpu(host_model_host, "hv1", "kvm", TOPOLOGY)["mode"] == "host-model"
    assert guest_cpu(host_model_host, "hv1", "kvm", TOPOLOGY, baseline=True) == guest_cpu(
        BASELINE_RECORD, "hv1", "kvm", TOPOLOGY)
    # A host in no baseline group refuses it (the launch passes it over, naming it).
    with pytest.raises(InputError, match="hv2 has no CPU baseline recorded for kvm domains"):
        guest_cpu({"settings": {}}, "hv2", "kvm", TOPOLOGY, baseline=True)


def test_a_recorded_baseline_is_checked_again_as_a_ledger_row_is_not_trusted():
    hostile = {**BASELINE_RECORD, "baseline": {"group": "rack1", "cpus": {"kvm": {
        "model": "EPYC'/><evil", "features": []}}}}
    with pytest.raises(InputError, match="cpu_baseline.model"):
        guest_cpu(hostile, "hv1", "kvm", TOPOLOGY)


def test_group_baseline_takes_no_extra_flags():
    with pytest.raises(InputError, match="cpu_model_extra_flags is not taken with cpu_mode group-baseline"):
        cpu_settings("hypervisors.hv1", {"cpu_mode": "group-baseline", "cpu_model_extra_flags": ["+pcid"]})


def test_libvirts_baseline_answer_is_parsed_and_its_names_checked():
    assert parse_baseline("hv1", "<cpu mode='custom' match='exact'><model fallback='forbid'>EPYC</model>"
                                 "<vendor>AMD</vendor><feature policy='require' name='x2apic'/>"
                                 "<feature policy='disable' name='svm'/></cpu>") == {
        "model": "EPYC", "vendor": "AMD",
        "features": [{"policy": "disable", "name": "svm"}, {"policy": "require", "name": "x2apic"}]}
    with pytest.raises(InputError, match="hv1's libvirt answered a baseline CPU feature that does not read"):
        parse_baseline("hv1", "<cpu><model>EPYC</model><feature policy='require' name='a b'/></cpu>")
    with pytest.raises(InputError, match="without a CPU model name"):
        parse_baseline("hv1", "<cpu><feature policy='require' name='x2apic'/></cpu>")
    # A host-model record whose names do not read gives no input (nor anything to inject).
    features = {"x2apic": "require", "b'ad": "require", "pni": "disable", "svm": "forbid"}
    assert host_model_xml({"model": "EPYC", "features": features}) == (
        "<cpu mode=\"custom\" match=\"exact\"><model fallback=\"forbid\">EPYC</model>"
        "<feature policy=\"disable\" name=\"pni\" /><feature policy=\"require\" name=\"x2apic\" /></cpu>")
    assert host_model_xml({"model": "<evil>"}) is None


def test_the_guest_option_cpu_baseline_is_checked_once_screens_hosts_and_defines_the_baseline_cpu():
    image = Image.from_option({"name": "debian.qcow2", "properties": {}})
    request = Request(flavor=Flavor(name="m1.tiny", vcpus=1, memory_mb=512, root_gb=1), image=image,
                      networks=Network.from_option([{"type": "user"}]),
                      guest=Guest.from_options({"cpu_baseline": "yes"}))
    assert request.guest.values["cpu_baseline"] is True
    assert Request.from_record(request.to_record())[0].guest.values["cpu_baseline"] is True
    # A request recorded before the option existed reads as not asking for it.
    old = request.to_record()
    old["guest"] = {key: value for key, value in old["guest"].items() if key != "cpu_baseline"}
    assert Request.from_record(old)[0].guest.values["cpu_baseline"] is False
    # The controller passes over a host without a baseline, naming it, before anything is claimed.
    member = {"host": "hv1", "uri": "qemu+ssh://hv1/system", "domain_types": ["kvm"],
              "cpu": {**BASELINE_RECORD, "settings": {}}}
    outsider = {**member, "host": "hv9", "cpu": {"settings": {}}}
    request = dataclasses.replace(request, domain_type="kvm")
    assert controller_refusal(member, request, DEFAULT_POLICY) is None
    assert "hv9 has no CPU baseline recorded for kvm domains" in controller_refusal(outsider, request, DEFAULT_POLICY)
    # The member defines the guest with the baseline, though its own cpu_mode is host-model.
    cpu = guest_cpu(member["cpu"], "hv1", "kvm", request.topology, request.guest.values["cpu_baseline"])
    made = {"disk": {"path": "/var/lib/libvirt/images/root.qcow2"}, "seed": None, "nvram": None}
    domain = ET.fromstring(DomainTemplate(DEFAULT_TEMPLATE).render(
        request, "web-1", "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", made, "kvm", "/var/log", cpu=cpu))
    assert domain.find("cpu").attrib == {"mode": "custom", "match": "exact"}
    assert domain.findtext("cpu/model") == "EPYC-Rome"
    assert [feature.attrib for feature in domain.findall("cpu/feature")] == BASELINE_FEATURES
