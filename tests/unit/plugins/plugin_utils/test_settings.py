"""Who sets what (plugin_utils/settings.py): every option of every module is a requester option,
an operator setting or the task's own; an operator setting has one documented default; and the
real action takes an operator setting from berth_<name> only, never from a play variable of its
bare name, which it ignores with a warning."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from unittest import mock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.berth.fleet.plugins.plugin_utils import _argspec
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import (
    OPERATOR_SETTINGS,
    REQUESTER_OPTIONS,
    SCHEDULER_SETTINGS,
    TASK_OPTIONS,
    Settings,
    variable_warning,
)

REPO = Path(__file__).resolve().parents[4]
MODULES = sorted(path.stem for path in (REPO / "plugins" / "modules").glob("*.py"))
ACTIONS = sorted(path.stem for path in (REPO / "plugins" / "action").glob("*.py"))
LISTS = {"requester": REQUESTER_OPTIONS, "operator": OPERATOR_SETTINGS, "task": TASK_OPTIONS}


def options(module):
    return _argspec.module_documentation(str(REPO / "plugins" / "modules" / f"{module}.py"))["options"]


def action_class(name):
    return importlib.import_module(f"ansible_collections.berth.fleet.plugins.action.{name}").ActionModule


# ---- the lists against the modules' documentation ------------------------------------------------

@pytest.mark.parametrize("module", MODULES)
def test_every_option_of_every_module_is_in_exactly_one_list(module):
    for option in options(module):
        found = [kind for kind, names in LISTS.items() if option in names]
        assert len(found) == 1, f"{module}'s option {option} is in {found or 'no list'} (plugin_utils/settings.py)"


def test_every_name_of_the_lists_is_an_option_of_some_module():
    documented = {option for module in MODULES for option in options(module)}
    for kind, names in LISTS.items():
        assert set(names) - documented == set(), f"{kind} names no module documents"


def test_the_scheduler_fragment_documents_the_scheduler_settings_for_every_module_that_schedules():
    fragment = _argspec.fragment_documentation("berth.fleet.scheduler")["options"]
    assert set(fragment) == set(SCHEDULER_SETTINGS) and set(SCHEDULER_SETTINGS) <= set(OPERATOR_SETTINGS)
    for module in ("schedule", "server", "capacity", "migrate", "resize"):
        doc = _argspec.module_documentation(str(REPO / "plugins" / "modules" / f"{module}.py"))
        assert "berth.fleet.scheduler" in doc["extends_documentation_fragment"], module
        assert {option: doc["options"][option] for option in fragment} == fragment, module


def _plain(value):
    """A default as the documentation's YAML would give it (a tuple as a list, a mapping as a dict)."""
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict) or hasattr(value, "items"):
        return {key: _plain(item) for key, item in value.items()}
    return value


SETTINGS_DEFAULTS = {
    item.name: _plain(item.default if item.default is not dataclasses.MISSING else item.default_factory())
    for item in dataclasses.fields(Settings)}


@pytest.mark.parametrize("setting", sorted(OPERATOR_SETTINGS))
def test_an_operator_setting_has_one_documented_default_and_it_is_the_settings_own(setting):
    defaults = {module: options(module)[setting].get("default") for module in MODULES if setting in options(module)}
    assert len({repr(value) for value in defaults.values()}) == 1, defaults
    if setting in SETTINGS_DEFAULTS:
        assert next(iter(defaults.values())) == SETTINGS_DEFAULTS[setting], (defaults, SETTINGS_DEFAULTS[setting])


# ---- the real action: berth_<name> sets an operator setting, a bare variable never --------------

# A value of each operator setting that validates and is not its default.
MULTIPLIER = 2.5
VALUES = {
    "ledger_url": "sqlite:////srv/berth/ledger.sqlite3",
    "ledger": False,
    "uri_policy": {"allow_tcp": True},
    "source": "inventory",
    "hypervisor_group": "kvm",
    "service_down_time": 120,
    "lease_seconds": 60,
    "max_attempts": 5,
    "storage_pool": "fast",
    "serial_log_dir": "/srv/serial",
    "flavors_file": "/etc/berth/flavors.yml",
    "key_pairs": {"ops": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOps ops"},
    "boot": {"kernel": "/boot/vmlinuz", "initrd": "/boot/initrd.img", "cmdline": "console=ttyS0"},
    "project_id": "team-a",
    "image_source_dirs": ["/srv/images"],
    "image_cache_dir": "/var/cache/berth",
    "image_max_mb": 1024,
    "image_timeout": 5.0,
    "image_validate_certs": False,
    "image_url_policy": {"schemes": ["https"], "hosts": ["mirror.example"], "networks": ["10.0.0.0/8"],
                         "public": False},
    "pci_alias": [{"name": "nic", "vendor_id": "8086", "product_id": "154c"}],
    "enabled_mdev_types": ["nvidia-35"],
    "force_hosts": ["hv1"],
    "force_nodes": ["node1"],
    "enabled_filters": ["ComputeFilter"],
    "weighers": ["RAMWeigher"],
    "host_subset_size": 2,
    "seed": 7,
    "driver": "chance",
    "engine": "plain",
    "explain": "compact",
    "default_availability_zone": "az0",
    "max_instances_per_host": 5,
    "max_io_ops_per_host": 2,
    "isolated_hosts": ["hv9"],
    "isolated_images": ["secret"],
    "restrict_isolated_hosts_to_isolated_images": False,
    "metrics_weight_setting": ["cpu.percent=1.0"],
    "metrics_weight_of_unavailable": -1.0,
    "metrics_required": False,
    "image_props_weight_setting": ["os_distro=2"],
    "aggregate_image_properties_isolation_namespace": "ns",
    "aggregate_image_properties_isolation_separator": ":",
    "migrate_max_retries": 2,
    "skip_cpu_compare_on_dest": True,
    "transfer_timeout": 60.0,
    "keep_leftovers": True,
    "cpu_baseline_groups": ["rack1"],
    "fence_command": ["/usr/local/bin/fence-ipmi", "{hypervisor}"],
    "fence_timeout": 30.0,
    "shared_pools": ["nfs"],
    "decisions_max_age_days": 7,
    "decisions_max_count": 100,
    "failover_hosts": 2,
    "failover_enforce": "warn",
    "snapshot_consistency": "stopped",
    "rebalance_threshold": 0.2,
    "rebalance_min_gain": 0.01,
    "rebalance_max_moves": 3,
    "rebalance_cooldown_seconds": 60,
    "placement": "packing",
    "packing_time_limit": 2.5,
    "packing_objective": "stranded",
    **{name: MULTIPLIER for name in OPERATOR_SETTINGS if name.endswith("_weight_multiplier")},
}
# What each action needs besides, to validate.
REQUIRED = {"name": "web", "flavor": "m1.tiny", "host": "hv1", "domain": "legacy", "path": "/tmp/report.html",
            "state": "present", "entries": [{"name": "web", "flavor": "m1.tiny"}], "image": "golden.qcow2"}


def test_the_table_covers_every_operator_setting():
    assert set(VALUES) == set(OPERATOR_SETTINGS)


def run_action(name, task_args, task_vars):
    """The action ``name`` run as Ansible runs it (a real Task, Templar and loader), up to the
    operation it would start: returns the result and the validated arguments the operation got."""
    action_type = action_class(name)
    task = Task()
    task.args = {**{key: value for key, value in REQUIRED.items() if action_type.ARGUMENT_SPEC.get(key, {}).get("required")},
                 **task_args}
    task.check_mode = True
    loader = DataLoader()
    action = action_type(task=task, connection=mock.MagicMock(), play_context=PlayContext(), loader=loader,
                         templar=Templar(loader=loader), shared_loader_obj=None)
    reached = {}
    action.run_berth = lambda args, _task_vars: reached.update(args) or {"changed": False}
    return action.run(task_vars=task_vars), reached


def expected(setting):
    if setting == "uri_policy":
        return True  # compared as allow_tcp, the policy being resolved to its settings
    return VALUES[setting]


def reached_value(args, setting):
    return args["uri_policy"]["allow_tcp"] if setting == "uri_policy" else args[setting]


@pytest.fixture(autouse=True)
def _no_policy_from_the_environment(monkeypatch):
    for variable in ("BERTH_URI_POLICY", "BERTH_SSH_KEYFILE", "BERTH_SSH_KNOWN_HOSTS"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.parametrize("setting", sorted(OPERATOR_SETTINGS))
def test_a_launch_ignores_an_operator_setting_s_bare_variable_and_takes_its_berth_one(setting):
    """launch.yml's task (berth.fleet.server with from_vars) where it takes the setting; else the
    first action that does (no from_vars there: a bare variable is simply not one of its inputs)."""
    name = "server" if setting in action_class("server").ARGUMENT_SPEC else next(
        action for action in ACTIONS if setting in action_class(action).ARGUMENT_SPEC)
    task_args = {"from_vars": True} if name == "server" else {}
    result, args = run_action(name, task_args, {setting: VALUES[setting]})
    assert not result.get("failed"), result
    assert reached_value(args, setting) != expected(setting)
    assert result.get("warnings", []) == ([variable_warning(setting, setting)] if name == "server" else [])

    result, args = run_action(name, task_args, {f"berth_{setting}": VALUES[setting]})
    assert not result.get("failed") and not result.get("warnings"), result
    assert reached_value(args, setting) == expected(setting)


def test_the_warning_names_the_variable_and_the_one_to_set():
    result, _args = run_action("server", {"from_vars": True}, {"image_source_dirs": ["/"]})
    (warning,) = result["warnings"]
    assert warning.startswith("the play variable image_source_dirs is ignored") and "berth_image_source_dirs" in warning
    (warning,) = run_action("server", {"from_vars": True}, {"boot": {"initrd": "/etc/shadow"}})[0]["warnings"]
    assert "berth_boot_kernel, berth_boot_initrd and berth_boot_cmdline" in warning


def test_the_warning_stays_when_the_task_fails():
    result, _args = run_action("server", {"from_vars": True}, {"max_attempts": 5, "flavor": {"vcpus": 0}})
    assert result["warnings"] == [variable_warning("max_attempts", "max_attempts")]
    result, _args = run_action("server", {"from_vars": True}, {"max_attempts": 5, "count": 0})
    assert result["failed"] and result["field"] == "count"
    assert result["warnings"] == [variable_warning("max_attempts", "max_attempts")]


def test_boot_comes_from_the_operator_s_three_variables():
    boot = VALUES["boot"]
    _result, args = run_action("server", {"from_vars": True},
                               {f"berth_boot_{part}": value for part, value in boot.items()})
    assert args["boot"] == boot


def test_a_requester_option_comes_from_its_bare_variable_else_from_berth():
    _result, args = run_action("server", {"from_vars": True},
                               {"flavor": "m1.small", "berth_flavor": "m1.large", "berth_availability_zone": "az1",
                                "networks": [{"type": "user"}]})
    assert (args["flavor"], args["availability_zone"], args["networks"]) == ("m1.small", "az1", [{"type": "user"}])


def test_the_task_s_own_arguments_win_for_operator_settings_too():
    """The play's author is the operator: what a task sets, no variable changes."""
    _result, args = run_action("server", {"from_vars": True, "max_attempts": 2},
                               {"berth_max_attempts": 5, "max_attempts": 9})
    assert args["max_attempts"] == 2


def test_the_task_s_own_options_come_from_no_variable():
    result, args = run_action("server", {"from_vars": True}, {"timeout": 1.0, "berth_timeout": 2.0,
                                                              "template": "/etc/evil.j2"})
    assert (args["timeout"], args["template"]) == (30, None) and not result.get("warnings")


def test_an_ad_hoc_task_reads_the_inventory_s_settings():
    """ansible -m berth.fleet.capacity: no from_vars; the berth_* settings all the same, a bare
    variable never."""
    _result, args = run_action("capacity", {}, {"berth_enabled_filters": ["RamFilter"], "weighers": ["RAMWeigher"],
                                                "berth_service_down_time": 60})
    assert (args["enabled_filters"], args["weighers"], args["service_down_time"]) == (["RamFilter"], None, 60)


def test_the_role_takes_requester_options_from_instance_variables_and_settings_from_berth_ones():
    result, args = run_action("instance", {"from_vars": True, "placements": []},
                              {"instance_image": "debian.qcow2", "instance_storage_pool": "elsewhere",
                               "berth_serial_log_dir": "/srv/serial", "instance_name": "other",
                               "instance_timeout": 1.0})
    assert (args["image"], args["storage_pool"], args["serial_log_dir"]) == ("debian.qcow2", "default", "/srv/serial")
    assert (args["name"], args["timeout"]) == (None, 30)
    assert result["warnings"] == [variable_warning("instance_storage_pool", "storage_pool")]


@pytest.mark.parametrize("name", ["server", "schedule"])
def test_both_launch_paths_take_the_operator_s_failover_headroom(name):
    """launch.yml (berth.fleet.server) and the roles' launch (berth.fleet.schedule, which claims)
    both run the headroom check before their claim: each reads the operator's berth_failover_*
    settings, so that the roles cannot launch past a headroom launch.yml keeps."""
    task_args = {"from_vars": True} if name == "server" else {}
    _result, args = run_action(name, task_args, {"berth_failover_hosts": 1, "berth_failover_enforce": "warn"})
    assert (args["failover_hosts"], args["failover_enforce"]) == (1, "warn")
