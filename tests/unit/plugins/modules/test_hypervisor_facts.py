"""berth.fleet.hypervisor_facts: bad input is refused before any connection, naming the option;
its options are those its DOCUMENTATION states."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.berth.fleet.plugins.module_utils import _documented_spec
from ansible_collections.berth.fleet.plugins.module_utils._documented_spec import (
    documented_argument_spec,
)
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError
from ansible_collections.berth.fleet.plugins.module_utils.host_facts import DEFAULT_AVAILABILITY_ZONE
from ansible_collections.berth.fleet.plugins.modules import hypervisor_facts
from ansible_collections.berth.fleet.plugins.modules.hypervisor_facts import run_module

DEFAULTS = {"name": "hv1", "uri": "qemu:///system", "storage_pool": "default", "timeout": 1.0,
            "cpu_allocation_ratio": None, "ram_allocation_ratio": None, "disk_allocation_ratio": None,
            "reserved_host_memory_mb": None, "reserved_host_disk_mb": None, "aggregates": [],
            "default_availability_zone": "nova", "uri_policy": None}


@pytest.mark.parametrize(
    "params, field",
    [
        ({"ram_allocation_ratio": -1.0}, "ram_allocation_ratio"),
        ({"reserved_host_memory_mb": -5}, "reserved_host_memory_mb"),
        ({"uri": "not a uri"}, "uri"),
        ({"aggregates": [{"metadata": {}}]}, "aggregates[0]"),
        ({"aggregates": [{"name": "a", "metadata": {"cpu_allocation_ratio": "x"}}]},
         "aggregates.a.metadata.cpu_allocation_ratio"),
    ],
    ids=["ratio", "reserved", "uri", "aggregate-without-name", "aggregate-ratio"],
)
def test_bad_options_name_the_option(params, field):
    with pytest.raises(InputError) as info:
        run_module(SimpleNamespace(params={**DEFAULTS, **params}))
    assert info.value.field == field


# ---- the argument spec, read from DOCUMENTATION on the hypervisor -------------------------------

def test_the_argument_spec_is_the_documented_one():
    """What the module accepts on the hypervisor: its DOCUMENTATION, read there by the converter
    the actions use on the controller; the options it has always had, and the URI policy."""
    assert documented_argument_spec(hypervisor_facts.DOCUMENTATION) == {
        "name": {"type": "str", "required": True},
        "uri": {"type": "str", "default": "qemu:///system"},
        "uri_policy": {"type": "dict"},
        "storage_pool": {"type": "str", "default": "default"},
        "timeout": {"type": "float", "default": 10},
        "cpu_allocation_ratio": {"type": "float"},
        "ram_allocation_ratio": {"type": "float"},
        "disk_allocation_ratio": {"type": "float"},
        "reserved_host_memory_mb": {"type": "int"},
        "reserved_host_disk_mb": {"type": "int"},
        "aggregates": {"type": "list", "elements": "dict", "default": []},
        "default_availability_zone": {"type": "str", "default": DEFAULT_AVAILABILITY_ZONE},
    }


def _run_main(monkeypatch, capsys, args):
    """main() as Ansible runs it: the arguments where AnsibleModule reads them, the answer on
    stdout."""
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    # The serialisation profile the controller would name (legacy: plain JSON).
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy")
    with pytest.raises(SystemExit):
        hypervisor_facts.main()
    return json.loads(capsys.readouterr().out)


def test_an_undocumented_option_is_refused(monkeypatch, capsys):
    result = _run_main(monkeypatch, capsys, {"name": "hv1", "colour": "blue"})
    assert result["failed"] and "Unsupported parameters" in result["msg"] and "colour" in result["msg"]


def test_without_pyyaml_the_module_says_so(monkeypatch, capsys):
    monkeypatch.setattr(_documented_spec, "HAS_YAML", False)
    result = _run_main(monkeypatch, capsys, {"name": "hv1"})
    assert result["failed"] and "PyYAML" in result["msg"]
