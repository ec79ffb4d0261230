"""The guest CPU of a hypervisor's guests: Nova's cpu_mode, cpu_models and cpu_model_extra_flags
checked in the inventory source naming the field, and the <cpu> they make on one host for one
domain type from what its libvirt said it can run."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ansible_collections.berth.fleet.plugins.module_utils import host_capabilities
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.guest_cpu import (
    cpu_settings,
    guest_cpu,
    recorded_cpu,
)
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import host_state, validate_hypervisors

URI = "qemu+ssh://kvm1.example.com/system"
TOPOLOGY = {"sockets": 2, "cores": 2, "threads": 1}

# Trimmed from a libvirt 9.0 domain capabilities answer for a TCG (qemu) domain on an AMD machine.
DOMCAPS_QEMU = """<domainCapabilities><domain>qemu</domain><arch>x86_64</arch><cpu>
  <mode name='host-passthrough' supported='no'/>
  <mode name='maximum' supported='yes'/>
  <mode name='host-model' supported='yes'>
    <model fallback='forbid'>EPYC</model><vendor>AMD</vendor>
    <feature policy='require' name='acpi'/><feature policy='disable' name='vme'/>
  </mode>
  <mode name='custom' supported='yes'>
    <model usable='yes' vendor='unknown'>qemu64</model>
    <model usable='no' vendor='Intel'>Haswell</model>
    <model usable='yes' vendor='Intel'>Westmere</model>
    <model usable='unknown' vendor='Intel'>Nehalem</model>
  </mode>
</cpu></domainCapabilities>"""


def recorded(settings=None, domcaps=DOMCAPS_QEMU):
    """A host's guest CPU as a sync records it."""
    return {"settings": settings or {},
            "domain_capabilities": {"qemu": host_capabilities.domain_cpu_capabilities(ET.fromstring(domcaps))}}


def test_domain_capabilities_are_read_into_modes_host_model_and_usable_models():
    offered = host_capabilities.domain_cpu_capabilities(ET.fromstring(DOMCAPS_QEMU))
    assert offered["modes"] == {"host-passthrough": False, "maximum": True, "host-model": True, "custom": True}
    assert offered["host_model"] == {"model": "EPYC", "vendor": "AMD", "features": {"acpi": "require", "vme": "disable"}}
    # "unknown" is not usable.
    assert offered["models"] == {"qemu64": True, "Haswell": False, "Westmere": True, "Nehalem": False}


BAD_SETTINGS = [
    pytest.param({"cpu_mode": "host"}, "cpu_mode", id="unknown-mode"),
    pytest.param({"cpu_mode": "custom"}, "cpu_models", id="custom-without-models"),
    pytest.param({"cpu_mode": "host-model", "cpu_models": ["Westmere"]}, "cpu_models", id="models-without-custom"),
    pytest.param({"cpu_models": ["Westmere"]}, "cpu_models", id="models-without-a-mode"),
    pytest.param({"cpu_mode": "custom", "cpu_models": ["West mere"]}, "cpu_models[0]", id="model-with-a-space"),
    pytest.param({"cpu_mode": "custom", "cpu_models": ["a'/><x"]}, "cpu_models[0]", id="model-breaks-xml"),
    pytest.param({"cpu_mode": "custom", "cpu_models": {"Westmere": 1}}, "cpu_models", id="models-not-a-list"),
    pytest.param({"cpu_mode": "host-model", "cpu_model_extra_flags": ["+a'b"]}, "cpu_model_extra_flags[0]",
                 id="flag-breaks-xml"),
    pytest.param({"cpu_mode": "host-model", "cpu_model_extra_flags": ["++pcid"]}, "cpu_model_extra_flags[0]",
                 id="flag-two-signs"),
    pytest.param({"cpu_mode": "none", "cpu_model_extra_flags": ["pcid"]}, "cpu_model_extra_flags",
                 id="flags-without-a-model"),
    pytest.param({"cpu_mode": "host-model", "cpu_model_extra_flags": ["+pcid", "-PCID"]}, "cpu_model_extra_flags",
                 id="flag-on-and-off"),
]


@pytest.mark.parametrize("settings, key", BAD_SETTINGS)
def test_bad_settings_are_refused_naming_the_hosts_field(settings, key):
    with pytest.raises(InputError) as caught:
        validate_hypervisors({"kvm1": {"uri": URI, **settings}})
    assert caught.value.field == f"hypervisors.kvm1.{key}"
    # The source's own options, named as such.
    with pytest.raises(InputError) as caught:
        validate_hypervisors({"kvm1": {"uri": URI}}, fleet_cpu=settings)
    assert caught.value.field == key


def test_a_host_takes_the_fleets_settings_unless_it_sets_its_own():
    fleet = {"cpu_mode": "custom", "cpu_models": ["Westmere"], "cpu_model_extra_flags": None}
    checked = validate_hypervisors({"kvm1": {"uri": URI}, "kvm2": {"uri": URI, "cpu_mode": "host-passthrough"}},
                                   fleet_cpu=fleet)
    assert checked["kvm1"] == {"uri": URI, "cpu_mode": "custom", "cpu_models": ["Westmere"]}
    # The three belong together: a host's own mode does not take the fleet's models.
    assert checked["kvm2"] == {"uri": URI, "cpu_mode": "host-passthrough"}


def test_nova_style_comma_separated_lists_and_flag_case_are_taken():
    settings = cpu_settings("", {"cpu_mode": "custom", "cpu_models": "Westmere, qemu64",
                                 "cpu_model_extra_flags": "+PCID,-vme,aes"})
    assert settings == {"cpu_mode": "custom", "cpu_models": ["Westmere", "qemu64"],
                        "cpu_model_extra_flags": ["+pcid", "-vme", "aes"]}


def test_nova_default_is_host_model_on_kvm_and_qemu_and_nothing_for_other_types():
    expected = {"mode": "host-model", "model": None, "features": [], "topology": TOPOLOGY}
    assert guest_cpu(recorded(), "hv1", "qemu", TOPOLOGY) == expected
    assert guest_cpu(None, "hv1", "kvm", TOPOLOGY)["mode"] == "host-model"
    assert guest_cpu(recorded(), "hv1", "lxc", TOPOLOGY) is None


def test_the_default_falls_back_to_none_where_libvirt_has_no_host_model_for_the_type():
    without = DOMCAPS_QEMU.replace("<mode name='host-model' supported='yes'>", "<mode name='host-model' supported='no'>")
    cpu = guest_cpu(recorded(domcaps=without), "hv1", "qemu", TOPOLOGY)
    assert cpu["mode"] == "none" and "no host-model CPU for qemu domains" in cpu["note"]
    # Asked for by name, it is refused.
    with pytest.raises(InputError, match="hypervisors.hv1.cpu_mode host-model cannot run on hv1 as a qemu domain") \
            as caught:
        guest_cpu(recorded({"cpu_mode": "host-model"}, without), "hv1", "qemu", TOPOLOGY)
    assert caught.value.field == "hypervisors.hv1.cpu_mode"


def test_host_passthrough_under_plain_qemu_is_refused_with_the_reason():
    with pytest.raises(InputError, match="cannot pass the host's CPU through; that needs kvm") as caught:
        guest_cpu(recorded({"cpu_mode": "host-passthrough"}), "hv1", "qemu", TOPOLOGY)
    assert caught.value.field == "hypervisors.hv1.cpu_mode"


def test_custom_takes_the_first_usable_model_in_libvirts_spelling_with_the_flags():
    cpu = guest_cpu(recorded({"cpu_mode": "custom", "cpu_models": ["haswell", "westmere", "qemu64"],
                              "cpu_model_extra_flags": ["+aes", "-vme"]}), "hv1", "qemu", TOPOLOGY)
    assert cpu == {"mode": "custom", "model": "Westmere", "topology": TOPOLOGY,
                   "features": [{"policy": "require", "name": "aes"}, {"policy": "disable", "name": "vme"}]}


def test_custom_models_none_of_which_the_host_runs_are_refused_naming_the_host_and_the_models():
    with pytest.raises(InputError) as caught:
        guest_cpu(recorded({"cpu_mode": "custom", "cpu_models": ["Haswell", "Skylake-Server"]}), "hv1", "qemu",
                  TOPOLOGY)
    assert caught.value.field == "hypervisors.hv1.cpu_models"
    message = str(caught.value)
    assert "hv1 cannot run any of hypervisors.hv1.cpu_models (Haswell, Skylake-Server) as a qemu domain" in message
    assert "unknown to its libvirt: Skylake-Server" in message
    assert "Usable there: Westmere, qemu64" in message


def test_custom_on_a_driver_that_reports_no_domain_capabilities_takes_the_first_model():
    cpu = guest_cpu({"settings": {"cpu_mode": "custom", "cpu_models": ["Haswell"]}}, "hv1", "qemu", TOPOLOGY)
    assert cpu["model"] == "Haswell"


def test_a_recorded_setting_that_does_not_check_is_refused_naming_the_host():
    """A ledger row is not trusted: the settings in it are checked again."""
    with pytest.raises(InputError) as caught:
        guest_cpu({"settings": {"cpu_mode": "custom", "cpu_models": ["x'/><devices/>"]}}, "hv1", "qemu", TOPOLOGY)
    assert caught.value.field == "hypervisors.hv1.cpu_models[0]"


BAD_RECORDS = [
    pytest.param("host-model", "cpu", id="not-a-mapping"),
    pytest.param({"mode": "host", "model": None}, "cpu.mode", id="unknown-mode"),
    pytest.param({"mode": "custom", "model": None}, "cpu.model", id="custom-without-model"),
    pytest.param({"mode": "host-model", "model": "Westmere"}, "cpu.model", id="model-without-custom"),
    pytest.param({"mode": "custom", "model": "W'/><x"}, "cpu.model", id="model-breaks-xml"),
    pytest.param({"mode": "custom", "model": "Westmere", "features": [{"policy": "forbid", "name": "aes"}]},
                 "cpu.features[0]", id="feature-policy"),
    pytest.param({"mode": "custom", "model": "Westmere", "features": [{"policy": "require", "name": "a b"}]},
                 "cpu.features[0]", id="feature-name"),
]


@pytest.mark.parametrize("record, field", BAD_RECORDS)
def test_a_recorded_cpu_that_does_not_check_is_refused_naming_the_field(record, field):
    with pytest.raises(InputError) as caught:
        recorded_cpu("cpu", record, TOPOLOGY)
    assert caught.value.field == field


def test_the_host_state_carries_the_hosts_guest_cpu_beside_its_own_cpu():
    offered = host_capabilities.domain_cpu_capabilities(ET.fromstring(DOMCAPS_QEMU))
    facts = {
        "nodename": "node1", "uuid": "11111111-2222-3333-4444-555555555555", "vcpus_total": 8,
        "hypervisor_type": "QEMU", "hypervisor_version": 7002000, "libvirt_version": 9000000,
        "cpu_info": {"arch": "x86_64", "model": "kvm64", "features": ["aes"]}, "numa_topology": {"cells": []},
        "supported_instances": [["x86_64", "qemu", "hvm"]], "domain_capabilities": {"qemu": offered},
        "memory": {"total_mb": 16000, "free_mb": 9000, "buffers_mb": 500, "cached_mb": 2500},
        "memory_source": "libvirt", "metrics": {}, "uri_uuid": "derived", "storage_pool": "default",
        "pools": [{"name": "default", "active": True, "capacity_mb": 1024, "allocation_mb": 0, "available_mb": 0}],
        "domains": [],
    }
    settings = validate_hypervisors({"hv1": {"uri": URI, "cpu_mode": "custom", "cpu_models": ["Westmere"]}})["hv1"]
    cpu_info = host_state("hv1", facts, settings)["cpu_info"]
    assert (cpu_info["model"], cpu_info["features"]) == ("kvm64", ["aes"])
    assert cpu_info["guest"] == {"settings": {"cpu_mode": "custom", "cpu_models": ["Westmere"]},
                                 "domain_capabilities": {"qemu": offered}}
    # What a build reads of it gives the guest its CPU.
    assert guest_cpu(cpu_info["guest"], "hv1", "qemu", TOPOLOGY)["model"] == "Westmere"
