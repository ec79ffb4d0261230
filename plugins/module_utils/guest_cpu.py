"""The guest CPU a hypervisor gives its guests: Nova's ``[libvirt]`` options ``cpu_mode``,
``cpu_models`` and ``cpu_model_extra_flags``, set for the fleet and per hypervisor in the
inventory source, checked there; and the domain's ``<cpu>`` they make on one host for one domain
type, checked against what that host's libvirt said it can run (its domain capabilities, recorded
at each sync). Pure: no libvirt, no Ansible.

Nova's defaults: without ``cpu_mode``, kvm and qemu guests get ``host-model`` (Nova's
``_get_guest_cpu_model_config``). Under plain QEMU (TCG) libvirt expands host-model into the
most the emulator offers as a named model (EPYC with extra features on an AMD machine); where a
host's libvirt says the domain type has no host-model, the default becomes ``none`` (QEMU's own
CPU) rather than a guest that would not start, and an explicit ``host-model`` is refused. The same
for ``host-passthrough``, which TCG never offers: it needs KVM.

Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.berth.fleet.plugins.module_utils.cpu_baseline import BASELINE_MODE
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

CPU_MODES = ("host-model", "host-passthrough", "custom", "none")
# What a hypervisor's cpu_mode may also say: its guests get its CPU baseline group's baseline
# (module_utils/cpu_baseline.py), defined as a custom model with its features.
SETTING_MODES = CPU_MODES + (BASELINE_MODE,)
CPU_SETTINGS = ("cpu_mode", "cpu_models", "cpu_model_extra_flags")
# The domain types whose guests get a CPU model (Nova: virt_type kvm or qemu).
MODEL_DOMAIN_TYPES = ("kvm", "qemu")
DEFAULT_CPU_MODE = "host-model"
# libvirt's CPU model names (Skylake-Server-noTSX-IBRS, EPYC-Rome, qemu64, 486) and feature
# names (sse4.2, avx512f, tsc_adjust, 3dnowprefetch): nothing that could leave an attribute.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
_FEATURE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_MAX_ITEMS = 64


def _names(field: str, value: Any, pattern: Any, what: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        # Nova's options are comma-separated lists; a YAML list reads better and is taken too.
        value = [item.strip() for item in value.split(",") if item.strip()]
    if not isinstance(value, (list, tuple)) or len(value) > _MAX_ITEMS:
        raise InputError(field, f"{field} must be a list of {what} (at most {_MAX_ITEMS}), got {value!r}")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not pattern.match(item):
            raise InputError(f"{field}[{index}]", f"{field}[{index}] is not a {what}: {item!r}")
    return list(value)


def cpu_settings(field: str, settings: Mapping[str, Any]) -> Dict[str, Any]:
    """``cpu_mode``, ``cpu_models`` and ``cpu_model_extra_flags`` of ``settings`` checked as Nova's
    compute checks them at start; errors name ``field``.<option>. ``cpu_mode`` None means Nova's
    default for the domain type."""
    prefix = f"{field}." if field else ""
    mode = settings.get("cpu_mode")
    if mode is not None and mode not in SETTING_MODES:
        raise InputError(f"{prefix}cpu_mode", f"{prefix}cpu_mode must be one of {', '.join(SETTING_MODES)}, "
                                              f"got {mode!r}")
    models = _names(f"{prefix}cpu_models", settings.get("cpu_models"), _MODEL_NAME, "libvirt CPU model name")
    flags = [flag.lower() for flag in _names(f"{prefix}cpu_model_extra_flags", settings.get("cpu_model_extra_flags"),
                                             re.compile(r"^[+-]?[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"),
                                             "CPU feature name, optionally prefixed with + or -")]
    if mode == "custom" and not models:
        raise InputError(f"{prefix}cpu_models", f"{prefix}cpu_models is required with cpu_mode custom")
    if models and mode != "custom":
        raise InputError(f"{prefix}cpu_models", f"{prefix}cpu_models is only taken with cpu_mode custom "
                                                f"(cpu_mode is {mode or 'unset'})")
    if flags and mode == "none":
        raise InputError(f"{prefix}cpu_model_extra_flags", f"{prefix}cpu_model_extra_flags needs a CPU model: not "
                                                           f"taken with cpu_mode none")
    if flags and mode == BASELINE_MODE:
        # The group's baseline is what every member can run: a feature added by one host's
        # settings would make its guests unable to move to the others.
        raise InputError(f"{prefix}cpu_model_extra_flags", f"{prefix}cpu_model_extra_flags is not taken with "
                                                           f"cpu_mode {BASELINE_MODE}: the group's baseline has "
                                                           f"its own features")
    seen: Dict[str, str] = {}
    for flag in flags:
        name = flag.lstrip("+-")
        if name in seen and seen[name] != flag:
            raise InputError(f"{prefix}cpu_model_extra_flags", f"{prefix}cpu_model_extra_flags both turns {name} "
                                                               f"on and off")
        seen[name] = flag
    return {"cpu_mode": mode, "cpu_models": models, "cpu_model_extra_flags": list(dict.fromkeys(flags))}


def merged_settings(fleet: Mapping[str, Any], host: Mapping[str, Any]) -> Dict[str, Any]:
    """A host's CPU settings: its own where it sets any of the three (they belong together: a
    custom mode and its models), else the fleet's."""
    own = {key: host[key] for key in CPU_SETTINGS if host.get(key) is not None}
    return own if own else {key: fleet[key] for key in CPU_SETTINGS if fleet.get(key) is not None}


def guest_cpu_record(cpu_info: Any) -> Optional[Dict[str, Any]]:
    """The guest CPU part of a host's recorded ``cpu_info`` (host_facts.host_state puts it there
    as ``guest``), or None; what it holds is checked when a build reads it."""
    guest = cpu_info.get("guest") if isinstance(cpu_info, Mapping) else None
    return dict(guest) if isinstance(guest, Mapping) else None


def _feature(flag: str) -> Dict[str, str]:
    # Nova's _prepare_cpu_flag: "-flag" turns it off, "+flag" and "flag" require it.
    return {"policy": "disable" if flag.startswith("-") else "require", "name": flag.lstrip("+-")}


def guest_cpu(record: Optional[Mapping[str, Any]], host: str, domain_type: str,
              topology: Mapping[str, int], baseline: bool = False) -> Optional[Dict[str, Any]]:
    """The ``<cpu>`` element's contents (mode, model, features, topology) for a guest built on
    ``host`` as ``domain_type``, from the host's recorded CPU (``record``: ``settings``, its CPU
    settings, ``domain_capabilities``, {domain type: what libvirt said}, and ``baseline``, its
    CPU baseline group's); None for domain types without CPU models. ``baseline``: the guest
    asks for its group's baseline (the guest option cpu_baseline), whatever the host's
    cpu_mode. InputError naming the host's setting when the host cannot run it."""
    if domain_type not in MODEL_DOMAIN_TYPES:
        return None
    record = record if isinstance(record, Mapping) else {}
    field = f"hypervisors.{host}"
    settings = cpu_settings(field, record.get("settings") if isinstance(record.get("settings"), Mapping) else {})
    capabilities = record.get("domain_capabilities")
    capabilities = capabilities if isinstance(capabilities, Mapping) else {}
    offered = capabilities.get(domain_type) if isinstance(capabilities.get(domain_type), Mapping) else None
    modes = offered.get("modes") if offered and isinstance(offered.get("modes"), Mapping) else {}
    mode = settings["cpu_mode"]
    note = None
    if mode is None:
        mode = DEFAULT_CPU_MODE
        if modes.get(mode) is False:
            note = f"{host}'s libvirt offers no host-model CPU for {domain_type} domains: QEMU's own CPU instead"
            mode = "none"
    elif mode in ("host-model", "host-passthrough") and modes.get(mode) is False:
        why = " (plain QEMU emulation cannot pass the host's CPU through; that needs kvm)" \
            if mode == "host-passthrough" and domain_type == "qemu" else ""
        raise InputError(f"{field}.cpu_mode", f"{field}.cpu_mode {mode} cannot run on {host} as a {domain_type} "
                                              f"domain: its libvirt says the mode is not supported there{why}")
    if mode == BASELINE_MODE or baseline:
        return _baseline_cpu(field, host, domain_type, record.get("baseline"), topology)
    model = None
    if mode == "custom":
        model = _usable_model(field, host, domain_type, settings["cpu_models"], offered)
    cpu = {"mode": mode, "model": model, "features": [_feature(flag) for flag in settings["cpu_model_extra_flags"]],
           "topology": dict(topology)}
    if note:
        cpu["note"] = note
    return cpu


def _baseline_cpu(field: str, host: str, domain_type: str, baseline: Any,
                  topology: Mapping[str, int]) -> Dict[str, Any]:
    """The guest CPU of a host whose cpu_mode is group-baseline: its group's recorded baseline
    for ``domain_type`` as a custom model with its features (checked again by recorded_cpu)."""
    cpus = baseline.get("cpus") if isinstance(baseline, Mapping) else None
    cpu = cpus.get(domain_type) if isinstance(cpus, Mapping) else None
    if not isinstance(cpu, Mapping):
        group = f" of its group {baseline.get('group')}" if isinstance(baseline, Mapping) else ""
        raise InputError(f"{field}.cpu_baseline", f"{host} has no CPU baseline{group} recorded for {domain_type} "
                                                  f"domains, which cpu_mode {BASELINE_MODE} or the guest option "
                                                  f"cpu_baseline asks for (list its aggregate in "
                                                  f"berth_cpu_baseline_groups and run gather.yml)")
    checked = recorded_cpu(f"{field}.cpu_baseline", {"mode": "custom", "model": cpu.get("model"),
                                                     "features": cpu.get("features")}, topology)
    return {**checked, "baseline_group": str(baseline.get("group"))}


def _usable_model(field: str, host: str, domain_type: str, models: List[str],
                  offered: Optional[Mapping[str, Any]]) -> str:
    """The first of ``models`` the host's libvirt says it can run as ``domain_type``, under
    libvirt's own spelling (Nova's names are case-insensitive); the first one where the host's
    libvirt did not say (a driver without domain capabilities)."""
    usable = offered.get("models") if offered and isinstance(offered.get("models"), Mapping) else None
    if not usable:
        return models[0]
    spelled = {str(name).lower(): str(name) for name in usable}
    for model in models:
        name = spelled.get(model.lower())
        if name is not None and usable[name] is True:
            return name
    unknown = [model for model in models if model.lower() not in spelled]
    runnable = sorted(name for name, ok in usable.items() if ok is True)
    said = f"unknown to its libvirt: {', '.join(unknown)}; " if unknown else ""
    raise InputError(f"{field}.cpu_models", f"{host} cannot run any of {field}.cpu_models ({', '.join(models)}) as a "
                                            f"{domain_type} domain ({said}libvirt's domain capabilities mark the "
                                            f"others not usable). Usable there: {', '.join(runnable) or 'none'}")


def recorded_cpu(field: str, cpu: Any, topology: Mapping[str, int]) -> Optional[Dict[str, Any]]:
    """A build record's CPU (mode, model, features) checked again as a launch checks it (a
    ledger row is not trusted), with ``topology`` computed for the flavor it is defined with."""
    if cpu is None:
        return None
    if not isinstance(cpu, Mapping):
        raise InputError(field, f"{field} must be a mapping, got {cpu!r}")
    mode = cpu.get("mode")
    if mode not in CPU_MODES:
        raise InputError(f"{field}.mode", f"{field}.mode must be one of {', '.join(CPU_MODES)}, got {mode!r}")
    model = cpu.get("model")
    if (mode == "custom") != (model is not None) or (model is not None and (
            not isinstance(model, str) or not _MODEL_NAME.match(model))):
        raise InputError(f"{field}.model", f"{field}.model must be a libvirt CPU model name with mode custom "
                                           f"and nothing otherwise, got {model!r}")
    features = cpu.get("features") or []
    if not isinstance(features, list) or len(features) > _MAX_ITEMS:
        raise InputError(f"{field}.features", f"{field}.features must be a list, got {features!r}")
    checked = []
    for index, feature in enumerate(features):
        if not isinstance(feature, Mapping) or feature.get("policy") not in ("require", "disable") or \
                not isinstance(feature.get("name"), str) or not _FEATURE_NAME.match(feature["name"]):
            raise InputError(f"{field}.features[{index}]", f"{field}.features[{index}] must be {{policy: require or "
                                                           f"disable, name: a CPU feature}}, got {feature!r}")
        checked.append({"policy": feature["policy"], "name": feature["name"]})
    return {"mode": mode, "model": model, "features": checked, "topology": dict(topology)}
