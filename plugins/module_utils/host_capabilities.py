"""A libvirt host's capabilities XML (virConnectGetCapabilities) read into host-state facts:
its UUID, CPU, NUMA cells and the [arch, hypervisor type, vm mode] triples it offers.

Pure parsing of an ElementTree: libvirt_host.Hypervisor.facts() fetches the XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

_KIB_PER_MIB = 1024


def host_uuid(caps: ET.Element) -> str:
    """The libvirt host UUID, Berth's identity of a hypervisor in the ledger ("" if none)."""
    return caps.findtext("host/uuid") or ""


def cpu_info(caps: ET.Element, info: list[Any]) -> dict[str, Any]:
    """Model, vendor, features and topology from the capabilities, else from getInfo().

    The test driver's capabilities carry no model or topology; getInfo() always has both.
    """
    cpu = caps.find("host/cpu")
    topology = cpu.find("topology") if cpu is not None else None
    if topology is not None:
        layout = {key: int(value) for key, value in topology.attrib.items() if value.isdigit()}
    else:
        layout = {"sockets": int(info[5]), "cores": int(info[6]), "threads": int(info[7])}
    features = [] if cpu is None else [f.get("name", "") for f in cpu.findall("feature")]
    return {
        "arch": (cpu.findtext("arch") if cpu is not None else "") or "",
        "model": (cpu.findtext("model") if cpu is not None else "") or str(info[0]),
        "vendor": (cpu.findtext("vendor") if cpu is not None else "") or "",
        "features": sorted(features),
        "topology": layout,
        "mhz": int(info[3]),
    }


def numa_topology(caps: ET.Element) -> dict[str, Any]:
    """NUMA cells of the host: id, memory and CPU ids of each (empty where none are reported)."""
    cells = []
    for cell in caps.findall("host/topology/cells/cell"):
        memory = cell.find("memory")
        memory_kib = int(memory.text or 0) if memory is not None else 0
        if memory is not None and memory.get("unit", "KiB") != "KiB":
            memory_kib = 0  # libvirt always reports KiB; anything else is not trusted
        cells.append({
            "id": int(cell.get("id", "0")),
            "memory_mb": memory_kib // _KIB_PER_MIB,
            "cpus": sorted(int(cpu.get("id", "0")) for cpu in cell.findall("cpus/cpu")),
        })
    return {"cells": cells}


def supported_instances(caps: ET.Element) -> list[list[str]]:
    """[arch, hypervisor type, vm mode] triples, as Nova reports them."""
    triples = []
    for guest in caps.findall("guest"):
        arch = guest.find("arch")
        if arch is None:
            continue
        for domain in arch.findall("domain"):
            triples.append([arch.get("name", ""), domain.get("type", ""), guest.findtext("os_type") or ""])
    return triples


def domain_cpu_capabilities(domcaps: ET.Element) -> dict[str, Any]:
    """What a domain type offers a guest's CPU, from libvirt's domain capabilities
    (virConnectGetDomainCapabilities): each CPU mode's support, the host-model CPU libvirt would
    give (model, vendor, features by policy) and every custom model with whether it is usable."""
    modes: dict[str, bool] = {}
    host_model: dict[str, Any] = {}
    models: dict[str, bool] = {}
    for mode in domcaps.findall("cpu/mode"):
        name = mode.get("name", "")
        modes[name] = mode.get("supported") == "yes"
        if name == "host-model":
            host_model = {"model": mode.findtext("model") or "", "vendor": mode.findtext("vendor") or "",
                          "features": {feature.get("name", ""): feature.get("policy", "")
                                       for feature in mode.findall("feature")}}
        elif name == "custom":
            # libvirt says "unknown" where it could not tell: not counted as usable.
            models.update({(model.text or "").strip(): model.get("usable") == "yes"
                           for model in mode.findall("model") if (model.text or "").strip()})
    return {"modes": modes, "host_model": host_model, "models": models}
