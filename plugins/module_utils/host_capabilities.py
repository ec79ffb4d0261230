"""A libvirt host's capabilities XML (virConnectGetCapabilities) read into host-state facts:
its UUID, CPU, NUMA cells (with their CPUs' thread siblings and pages) and the [arch, hypervisor
type, vm mode] triples it offers.

Pure parsing of an ElementTree: libvirt_host.Hypervisor.facts() fetches the XML. The XML comes
from a hypervisor, which is not trusted: a value Berth relies on that does not read (a cell id
that is no number, a host UUID that is no UUID) raises CapabilitiesError, and the host is down
with why; a count that does not read counts as 0, as one in a unit libvirt never uses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping

from ansible_collections.berth.fleet.plugins.module_utils._untrusted_text import whole_number
from ansible_collections.berth.fleet.plugins.module_utils.cpu_sets import parse_cpu_set
from ansible_collections.berth.fleet.plugins.module_utils.errors import InputError

_KIB_PER_MIB = 1024
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class CapabilitiesError(ValueError):
    """A capabilities XML that does not read as a host's (a hostile or broken hypervisor)."""


def host_uuid(caps: ET.Element) -> str:
    """The libvirt host UUID, Berth's identity of a hypervisor in the ledger ("" if none)."""
    text = (caps.findtext("host/uuid") or "").strip()
    if text and not _UUID.match(text):
        raise CapabilitiesError(f"the host UUID {text!r} is not a UUID")
    return text


def cpu_info(caps: ET.Element, info: list[Any]) -> dict[str, Any]:
    """Model, vendor, features and topology from the capabilities, else from getInfo().

    The test driver's capabilities carry no model or topology; getInfo() always has both.
    """
    cpu = caps.find("host/cpu")
    topology = cpu.find("topology") if cpu is not None else None
    if topology is not None:
        numbers = {key: whole_number(value) for key, value in topology.attrib.items()}
        layout = {key: number for key, number in numbers.items() if number is not None}
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


def numa_topology(caps: ET.Element, free_pages: Mapping[int, Mapping[int, int]] | None = None) -> dict[str, Any]:
    """NUMA cells of the host (empty where none are reported): per cell its id, memory_mb, cpus
    (ids), cpu_topology (per CPU its socket_id, die_id, core_id and siblings, the thread
    siblings' ids) and pages (per page size its size_kb, total as the capabilities count it, and
    free from ``free_pages``, {cell id: {size in KiB: free pages}} as virNodeGetFreePages gives
    it; None where that is unknown)."""
    free_pages = free_pages or {}
    cells = []
    for cell in caps.findall("host/topology/cells/cell"):
        cell_id = cell_number(cell)
        cpus = [_cpu(cpu) for cpu in cell.findall("cpus/cpu")]
        cells.append({
            "id": cell_id,
            "memory_mb": _kib(cell.find("memory")) // _KIB_PER_MIB,
            "cpus": sorted(cpu["id"] for cpu in cpus),
            "cpu_topology": sorted(cpus, key=lambda cpu: cpu["id"]),
            "pages": _pages(cell, free_pages.get(cell_id) or {}),
        })
    return {"cells": cells}


def cell_number(cell: ET.Element) -> int:
    """A NUMA cell's id (0 where it gives none); CapabilitiesError where it is not a number."""
    text = cell.get("id", "0")
    number = whole_number(text)
    if number is None:
        raise CapabilitiesError(f"NUMA cell id {text!r} is not a whole number")
    return number


def page_sizes_kb(caps: ET.Element) -> list[int]:
    """Every page size the host's cells count (KiB), for asking libvirt how many are free."""
    return sorted({page["size_kb"] for cell in caps.findall("host/topology/cells/cell") for page in _pages(cell, {})})


def _kib(element: ET.Element | None) -> int:
    """A size element in KiB; libvirt always reports KiB, so any other unit is not trusted (0)."""
    if element is None or element.get("unit", "KiB") != "KiB":
        return 0
    return _count(element.text)


def _count(text: str | None) -> int:
    return whole_number(text) or 0


def _cpu(cpu: ET.Element) -> dict[str, Any]:
    cpu_id = _count(cpu.get("id"))
    try:
        # libvirt writes siblings in the range syntax of Nova's CPU sets ("0,4" or "0-1").
        siblings = parse_cpu_set("siblings", cpu.get("siblings") or str(cpu_id))
    except InputError:
        siblings = [cpu_id]  # a host that says nonsense here has no siblings Berth relies on
    return {"id": cpu_id, "socket_id": _optional_id(cpu.get("socket_id")), "die_id": _optional_id(cpu.get("die_id")),
            "core_id": _optional_id(cpu.get("core_id")), "siblings": siblings}


def _optional_id(text: str | None) -> int | None:
    return whole_number(text)


def _pages(cell: ET.Element, free: Mapping[int, int]) -> list[dict[str, Any]]:
    pages = []
    for page in cell.findall("pages"):
        size_kb = _count(page.get("size"))
        if page.get("unit", "KiB") != "KiB" or not size_kb:
            continue  # not in libvirt's own unit: not trusted
        count = free.get(size_kb)
        pages.append({"size_kb": size_kb, "total": _count(page.text),
                      "free": int(count) if isinstance(count, int) and count >= 0 else None})
    return sorted(pages, key=lambda page: page["size_kb"])


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
