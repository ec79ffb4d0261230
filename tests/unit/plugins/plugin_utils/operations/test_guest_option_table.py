"""A guest option is one row of GUEST_OPTIONS and one line of the domain template (issue 33): a
row added here, and nothing else of Berth changed, is accepted by the modules' argument spec and
documented, reaches the domain XML of a launch, the ledger's record of the instance (a real
SQLite ledger, through the schedule's claim and the build's mark_active), and the definition a
cold move renders again from that record. An instance recorded before the option existed moves
with the option's default."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.berth.fleet.plugins.module_utils import _guest
from ansible_collections.berth.fleet.plugins.module_utils._documented_spec import argument_spec
from ansible_collections.berth.fleet.plugins.module_utils.request import Built, Request
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.build import (
    DEFAULT_TEMPLATE,
    DomainTemplate,
    recorded_definition,
)
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.launch import check_request
from ansible_collections.berth.fleet.plugins.plugin_utils.operations.schedule import Schedule
from ansible_collections.berth.fleet.plugins.plugin_utils.settings import Settings

VIDEO = _guest.GuestOption(
    "video_model", "str", choices=("vga", "virtio", "bochs"), default="vga", image_property="hw_video_model",
    template="<video><model type>", description=("The model of the guest's video card.",))
POOL = "/var/lib/libvirt/images"
HOST = {
    "host": "hv1", "nodename": "hv1", "uuid": "hv-1", "uri": "qemu+ssh://hv1/system", "service_up": True,
    "disabled": False, "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 8192, "free_ram_mb": 8192,
    "total_usable_disk_gb": 200, "free_disk_mb": 204800, "num_instances": 0, "num_io_ops": 0,
    "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
    "reserved_host_memory_mb": 0, "reserved_host_disk_mb": 0, "domains": [],
    "supported_instances": [["x86_64", "qemu", "hvm"]], "aggregates": [],
}


@pytest.fixture
def with_video(monkeypatch, tmp_path):
    """GUEST_OPTIONS with VIDEO added, and the role's template with the one line that uses it."""
    monkeypatch.setattr(_guest, "GUEST_OPTIONS", (*_guest.GUEST_OPTIONS, VIDEO))
    text = Path(DEFAULT_TEMPLATE).read_text()
    line = "    <video><model type='{{ guest.video_model }}'/></video>\n"
    template = tmp_path / "domain.xml.j2"
    template.write_text(text.replace("  </devices>\n", line + "  </devices>\n"))
    return DomainTemplate(str(template))


def video_model(xml: str) -> str | None:
    model = ET.fromstring(xml).find("devices/video/model")
    return None if model is None else model.get("type")


def test_the_row_alone_makes_the_option_documented_and_accepted(with_video):
    """scripts/guest_fragment writes what guest_documentation gives into the doc fragment, from
    which every module's argument spec is derived (test_guest_fragment.py holds the two together)."""
    documented = _guest.guest_documentation()["video_model"]
    assert documented["choices"] == ["vga", "virtio", "bochs"] and documented["type"] == "str"
    assert documented["description"] == ["The model of the guest's video card.",
                                         "Not given, the image's C(hw_video_model) property decides, else V(vga)."]
    spec = argument_spec(_guest.guest_documentation())
    assert ArgumentSpecValidator(spec).validate({"video_model": "virtio"}).error_messages == []
    assert ArgumentSpecValidator(spec).validate({"video_model": "cirrus"}).error_messages != []


def test_the_option_reaches_the_domain_the_record_and_a_cold_moves_definition(with_video, tmp_path):
    settings = Settings(ledger_url=f"sqlite:///{tmp_path}/ledger.sqlite3")
    request = check_request({"flavor": "m1.tiny", "video_model": "virtio", "networks": [{"type": "user"}]}, settings)
    assert request.guest.values["video_model"] == "virtio"
    made = {"disk": {"path": f"{POOL}/root.qcow2"}, "seed": None, "nvram": None}
    assert video_model(with_video.render(request, "vid-1", "6c1f2b1e-3a4d-4e5f-8a9b-0c1d2e3f4a5b", made, "qemu",
                                         "/var/log/libvirt/qemu")) == "virtio"

    ledger = Ledger(settings.ledger_url).open(create=True)
    try:
        ledger.sync_hypervisors([HOST])
        planned = Schedule(request, settings, ["vid-1"], "vid", ledger, {}, check_mode=False).run()
        [placement] = planned["placements"]
        ledger.mark_active(placement["uuid"], Built(seed=False).to_record())
        [instance] = ledger.instances(["vid-1"])
    finally:
        ledger.close()
    assert instance["request"]["guest"]["video_model"] == "virtio"
    moved = recorded_definition(instance, with_video, POOL, ["qemu"], "/var/log/libvirt/qemu")
    assert video_model(moved) == "virtio"

    # Recorded before the option existed: it moves with the option's default.
    older = {**instance, "request": {**instance["request"], "guest": {
        key: value for key, value in instance["request"]["guest"].items() if key != "video_model"}}}
    assert video_model(recorded_definition(older, with_video, POOL, ["qemu"], "/var/log/libvirt/qemu")) == "vga"


def test_the_image_property_decides_where_the_launch_does_not(with_video):
    request = check_request({"flavor": "m1.tiny", "image": {"name": "img.qcow2",
                                                            "properties": {"hw_video_model": "bochs"}}}, Settings())
    assert request.guest.values["video_model"] == "bochs"
    assert Request.from_record(request.to_record())[0].guest.values["video_model"] == "bochs"
