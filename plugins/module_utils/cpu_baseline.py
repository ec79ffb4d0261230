"""A migratable CPU for a group of hypervisors: the baseline of the CPUs their libvirt would give
a host-model guest (virConnectBaselineHypervisorCPU over the host-model CPUs each sync records
from the domain capabilities), which every member can run, so that a guest defined with it can
live-migrate anywhere in the group.

The operator lists the groups (aggregates) in ``cpu_baseline_groups``; the tracker sync computes
each group's baseline on one member's connection, records it on every member's guest CPU record
(``cpu_info.guest.baseline``) and names the members that cannot run it. A hypervisor whose
``cpu_mode`` is ``group-baseline`` gives its guests that CPU (guest_cpu.guest_cpu).

Pure: no libvirt, no Ansible. The XML libvirt answers comes from a hypervisor, which is not
trusted: it is parsed, its names checked, and the recorded baseline is built anew from them.
Python 3.9: modules ship this file to hypervisors with the rest of module_utils.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

BASELINE_MODE = "group-baseline"
_GROUP_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
_FEATURE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_VENDOR_NAME = re.compile(r"^[A-Za-z0-9 _.-]{0,64}$")
# The policies of the features of a host-model CPU and of a baseline libvirt gives.
_POLICIES = ("require", "disable")


def baseline_groups(value: Any, field: str = "cpu_baseline_groups") -> List[str]:
    """The operator's ``cpu_baseline_groups``: aggregate names, checked."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InputError(field, f"{field} must be a list of aggregate names, got {value!r}")
    for index, name in enumerate(value):
        if not isinstance(name, str) or not _GROUP_NAME.match(name):
            raise InputError(f"{field}[{index}]", f"{field}[{index}] is not an aggregate name (letters, digits "
                                                  f"and _): {name!r}")
    if len(set(value)) != len(value):
        raise InputError(field, f"{field} lists an aggregate twice: {list(value)!r}")
    return list(value)


def host_group(host: str, aggregates: Sequence[Mapping[str, Any]], groups: Sequence[str]) -> Optional[str]:
    """The one baseline group ``host`` is in (None: none); InputError where it is in two, whose
    baselines could differ: a guest can have one CPU only."""
    names = [str(agg.get("name")) for agg in aggregates if agg.get("name") in groups]
    if len(names) > 1:
        raise InputError("cpu_baseline_groups", f"{host} is in two CPU baseline groups ({', '.join(names)}): a "
                                                f"hypervisor can be in one only")
    return names[0] if names else None


def host_model_xml(host_model: Mapping[str, Any]) -> Optional[str]:
    """The host-model CPU a sync recorded (model, vendor, features by policy) as a ``<cpu>``
    libvirt's baseline takes; None where nothing was recorded. The disabled features stay: they
    are the model's features the host lacks (kvm64 without pni), which the baseline must lack
    too. No ``<arch>``: libvirt refuses it beside ``match``; the arch is the call's own."""
    model = host_model.get("model") if isinstance(host_model, Mapping) else None
    if not isinstance(model, str) or not _MODEL_NAME.match(model):
        return None
    cpu = ET.Element("cpu", mode="custom", match="exact")
    ET.SubElement(cpu, "model", fallback="forbid").text = model
    vendor = host_model.get("vendor")
    if isinstance(vendor, str) and vendor and _VENDOR_NAME.match(vendor):
        ET.SubElement(cpu, "vendor").text = vendor
    features = host_model.get("features") if isinstance(host_model.get("features"), Mapping) else {}
    for name, policy in sorted(features.items()):
        if policy in _POLICIES and isinstance(name, str) and _FEATURE_NAME.match(name):
            ET.SubElement(cpu, "feature", policy=policy, name=name)
    return ET.tostring(cpu, encoding="unicode")


def parse_baseline(host: str, xml: str) -> Dict[str, Any]:
    """libvirt's baseline ``<cpu>`` as {model, vendor, features: [{policy, name}]}; InputError
    naming ``host`` (whose libvirt answered) where it does not read as one."""
    try:
        cpu = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise InputError("cpu_baseline_groups", f"{host}'s libvirt answered a baseline CPU that is no XML: {exc}")
    model = (cpu.findtext("model") or "").strip()
    if cpu.tag != "cpu" or not _MODEL_NAME.match(model):
        raise InputError("cpu_baseline_groups", f"{host}'s libvirt answered a baseline CPU without a CPU model name")
    vendor = (cpu.findtext("vendor") or "").strip()
    features = []
    for feature in cpu.findall("feature"):
        name, policy = feature.get("name", ""), feature.get("policy", "require")
        if policy not in _POLICIES or not _FEATURE_NAME.match(name):
            raise InputError("cpu_baseline_groups", f"{host}'s libvirt answered a baseline CPU feature that does "
                                                    f"not read: {name!r} ({policy!r})")
        features.append({"policy": policy, "name": name})
    return {"model": model, "vendor": vendor if _VENDOR_NAME.match(vendor) else "",
            "features": sorted(features, key=lambda item: (item["name"], item["policy"]))}


def baseline_xml(cpu: Mapping[str, Any]) -> str:
    """A recorded baseline as the ``<cpu>`` a member's libvirt compares with its own."""
    element = ET.Element("cpu", mode="custom", match="exact")
    ET.SubElement(element, "model", fallback="forbid").text = cpu["model"]
    if cpu.get("vendor"):
        ET.SubElement(element, "vendor").text = cpu["vendor"]
    for feature in cpu.get("features", []):
        ET.SubElement(element, "feature", policy=feature["policy"], name=feature["name"])
    return ET.tostring(element, encoding="unicode")


def described(cpu: Mapping[str, Any]) -> str:
    """A baseline in a line: its model, then +feature / -feature."""
    features = " ".join(("+" if item["policy"] == "require" else "-") + item["name"] for item in cpu["features"])
    return " ".join(filter(None, (cpu["model"], features)))


def host_cpu_arch(cpu_info: Any) -> str:
    """The host's CPU architecture as the sync recorded it (x86_64 where it says none)."""
    arch = cpu_info.get("arch") if isinstance(cpu_info, Mapping) else None
    return arch if isinstance(arch, str) and _MODEL_NAME.match(arch) else "x86_64"
