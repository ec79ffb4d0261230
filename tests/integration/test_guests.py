"""Guests people run, on the real lab fleet: UEFI with a per-instance NVRAM volume that migrates
and is deleted with the instance, the serial console, the guest agent channel, graphics, disk
bus and NIC model, and cloud images by URL from a local HTTP server (which the operator's
berth_image_url_policy must allow: by default a launch's URL reaches public addresses only)."""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import check
import fleet
import pytest
from conftest import changed_count, failed_messages, fleet_snapshot, task_result

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 180
OVMF_VARS_TEMPLATE = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


def row_of(lab, name: str) -> dict:
    return next(r for r in lab.ledger_rows("instances") if r["name"] == name)


def pool_file(lab, host: str, volume: str) -> Path:
    return fleet.host_path(lab.dir, host, f"/var/lib/libvirt/images/{volume}")


def live_xml(lab, host: str, name: str) -> ET.Element:
    return ET.fromstring(lab.virsh(host, "dumpxml", name))


def refresh_pools(lab) -> None:
    """libvirt lists a UEFI guest's NVRAM in the pool from the pool's next refresh after the
    domain's first start (a sync, or any Berth read of the pool), not at once."""
    for host in lab.hosts:
        lab.virsh(host, "pool-refresh", "default")


def snapshot(lab) -> dict:
    refresh_pools(lab)
    return fleet_snapshot(lab)


def volumes_of(lab, uuid: str) -> dict[str, list[str]]:
    refresh_pools(lab)
    names = {host: [line.split()[0] for line in lab.virsh(host, "vol-list", "default").splitlines()[2:] if line.strip()]
             for host in lab.hosts}
    return {host: sorted(name for name in names[host] if uuid in name) for host in lab.hosts}


def assert_triplet_then_idempotent(lab, extra: tuple[str, ...]) -> dict:
    """Dry run (nothing changes), real run, dry run again and a second real run (no change)."""
    before = snapshot(lab)
    dry = lab.playbook("launch.yml", *extra, "--diff", check=True)
    assert dry["rc"] == 0, failed_messages(dry)
    assert snapshot(lab) == before
    real = lab.playbook("launch.yml", *extra)
    assert real["rc"] == 0, failed_messages(real)
    assert changed_count(real) > 0
    after = snapshot(lab)
    again = lab.playbook("launch.yml", *extra, check=True)
    assert again["rc"] == 0 and changed_count(again) == 0, failed_messages(again)
    second = lab.playbook("launch.yml", *extra)
    assert second["rc"] == 0 and changed_count(second) == 0, failed_messages(second)
    assert snapshot(lab) == after
    return dry


def read_pty_until(path: str, text: str, timeout_s: float) -> str:
    """What the guest writes to its console's pty (as `virsh console` shows it), until ``text``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    seen = b""
    deadline = time.monotonic() + timeout_s
    try:
        while text.encode() not in seen and time.monotonic() < deadline:
            ready, _w, _x = select.select([fd], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except BlockingIOError:
                    pass
    finally:
        os.close(fd)
    return seen.decode(errors="replace")


def test_uefi_guest_boots_its_nvram_is_a_pool_volume_that_migrates_live_and_cold_and_is_deleted(lab):
    extra = ("-e", json.dumps({"name": "efi", "firmware": "uefi", "berth_force_hosts": ["hv1"]}))
    dry = assert_triplet_then_idempotent(lab, extra)
    planned = ET.fromstring(task_result(dry, "Launch the instances")["diff"][0]["after"])
    assert planned.find("os").get("firmware") == "efi"

    row = row_of(lab, "efi-1")
    uuid, nvram = row["uuid"], f"berth-{row['uuid']}-nvram.fd"
    domain = live_xml(lab, "hv1", "efi-1")
    # libvirt chose OVMF from the hypervisor's firmware descriptors and made the NVRAM from its
    # template, at the path Berth gave: a volume of the pool.
    assert domain.findtext("os/loader").startswith("/usr/share/OVMF/OVMF_CODE")
    assert domain.findtext("os/nvram") == f"/var/lib/libvirt/images/{nvram}"
    assert domain.find("os/nvram").get("template") == str(OVMF_VARS_TEMPLATE)
    # Direct kernel boot under UEFI: OVMF loads the kernel QEMU hands it, and the guest's init
    # prints its marker on the serial console.
    log = fleet.log_dir(lab.dir, "hv1") / "efi-1.serial.log"
    assert check.wait_for_marker(log, uuid, BOOT_TIMEOUT_S), log.read_text(errors="replace")[-2000:]
    assert volumes_of(lab, uuid)["hv1"] == sorted([f"berth-{uuid}-root.qcow2", nvram])
    booted_vars = pool_file(lab, "hv1", nvram).read_bytes()
    # OVMF wrote its variables on the way (boot entries, counters): the store is this guest's own.
    assert booted_vars != OVMF_VARS_TEMPLATE.read_bytes()

    before = snapshot(lab)
    dry_move = lab.playbook("migrate.yml", "-e", "instance=efi-1", "-e", "to_host=hv2", "-e", "mode=live", check=True)
    assert dry_move["rc"] == 0, failed_messages(dry_move)  # no longer refused for its NVRAM
    assert snapshot(lab) == before
    live = lab.playbook("migrate.yml", "-e", "instance=efi-1", "-e", "to_host=hv2", "-e", "mode=live")
    assert live["rc"] == 0, failed_messages(live)
    assert task_result(live, "Migrate the instance")["mode"] == "live"
    assert volumes_of(lab, uuid) == {"hv1": [], "hv2": sorted([f"berth-{uuid}-root.qcow2", nvram]), "hv3": []}
    # The variables came along (not a fresh copy of the template), and the guest runs on.
    assert pool_file(lab, "hv2", nvram).read_bytes() == booted_vars
    assert lab.virsh("hv2", "domstate", "efi-1").strip() == "running"
    assert live_xml(lab, "hv2", "efi-1").findtext("os/nvram") == f"/var/lib/libvirt/images/{nvram}"

    # Cold, of a stopped guest: the store read here is the one that must arrive on hv3.
    lab.virsh("hv2", "destroy", "efi-1")
    stopped_vars = pool_file(lab, "hv2", nvram).read_bytes()
    cold = lab.playbook("migrate.yml", "-e", "instance=efi-1", "-e", "to_host=hv3", "-e", "mode=cold")
    assert cold["rc"] == 0, failed_messages(cold)
    assert task_result(cold, "Migrate the instance")["mode"] == "cold"
    assert volumes_of(lab, uuid) == {"hv1": [], "hv2": [], "hv3": sorted([f"berth-{uuid}-root.qcow2", nvram])}
    assert pool_file(lab, "hv3", nvram).read_bytes() == stopped_vars
    # It boots UEFI again on its new host, from the store it brought.
    lab.virsh("hv3", "start", "efi-1")
    log = fleet.log_dir(lab.dir, "hv3") / "efi-1.serial.log"
    assert check.wait_for_marker(log, uuid, BOOT_TIMEOUT_S), "the UEFI guest did not boot on its new host"

    deleted = lab.playbook("delete.yml", "-e", "name=efi")
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert volumes_of(lab, uuid) == {host: [] for host in lab.hosts}
    assert not pool_file(lab, "hv3", nvram).exists()


def test_console_agent_channel_graphics_disk_bus_and_nic_model(lab):
    options = {"name": "hw", "disk_bus": "sata", "nic_model": "e1000", "networks": [{"type": "user"}],
               "user_data": "#cloud-config\nhostname: hw\n",
               "graphics": {"type": "vnc", "listen": "127.0.0.2"}, "berth_force_hosts": ["hv2"]}
    extra = ("-e", json.dumps(options))
    assert_triplet_then_idempotent(lab, extra)
    row = row_of(lab, "hw-1")
    domain = live_xml(lab, "hv2", "hw-1")

    root = domain.find("devices/disk[@device='disk']/target")
    assert (root.get("dev"), root.get("bus")) == ("sda", "sata")
    seed = domain.find("devices/disk[@device='cdrom']/target")
    assert (seed.get("dev"), seed.get("bus")) == ("sdd", "sata")
    assert [m.get("type") for m in domain.findall("devices/interface/model")] == ["e1000"]
    channel = domain.find("devices/channel[@type='unix']")
    assert channel.find("target").get("name") == "org.qemu.guest_agent.0"
    # The busybox guest runs no agent: the channel is there, nobody answers on it.
    assert channel.find("target").get("state") == "disconnected"

    # VNC answers on the address it was told to listen on.
    graphics = domain.find("devices/graphics")
    assert graphics.get("type") == "vnc" and graphics.get("listen") == "127.0.0.2"
    with socket.create_connection(("127.0.0.2", int(graphics.get("port"))), timeout=10) as vnc:
        assert vnc.recv(12).startswith(b"RFB ")

    # The serial console is a pty (virsh console) and its output still reaches the serial log.
    serial = domain.find("devices/serial")
    assert serial.get("type") == "pty"
    log = fleet.log_dir(lab.dir, "hv2") / "hw-1.serial.log"
    assert check.wait_for_marker(log, row["uuid"], BOOT_TIMEOUT_S)
    marker = f"BERTH-GUEST-BOOTED instance={row['uuid']}"
    # The guest repeats its marker every 30 s: the pty shows the next one.
    assert marker in read_pty_until(serial.find("source").get("path"), marker, 45)

    assert lab.playbook("delete.yml", "-e", "name=hw")["rc"] == 0


@pytest.mark.parametrize("options", [
    {"disk_bus": "scsi", "nic_model": "rtl8139", "graphics": "spice", "guest_agent": False},
    {"disk_bus": "ide", "nic_model": "e1000e", "graphics": "vnc"},
], ids=["scsi-rtl8139-spice-no-agent", "ide-e1000e-vnc"])
def test_other_buses_and_models_define_and_run(lab, options):
    launched = lab.playbook("launch.yml", "-e", json.dumps({"name": "bus", "networks": [{"type": "user"}],
                                                            **options}))
    assert launched["rc"] == 0, failed_messages(launched)
    row = row_of(lab, "bus-1")
    domain = live_xml(lab, row["host"], "bus-1")
    assert lab.virsh(row["host"], "domstate", "bus-1").strip() == "running"
    assert domain.find("devices/disk[@device='disk']/target").get("bus") == options["disk_bus"]
    assert domain.find("devices/interface/model").get("type") == options["nic_model"]
    graphics = domain.find("devices/graphics")
    assert (graphics.get("type"), graphics.get("listen")) == (options["graphics"], "127.0.0.1")
    assert (domain.find("devices/channel") is not None) == options.get("guest_agent", True)
    assert lab.playbook("delete.yml", "-e", "name=bus")["rc"] == 0


BAD_GUEST = [
    # Refused by the argument spec, which takes its choices from the module's documentation.
    pytest.param({"firmware": "efi"}, "value of firmware must be one of: bios, uefi, got: efi", id="firmware"),
    pytest.param({"disk_bus": "usb"}, "value of disk_bus must be one of: virtio, scsi, sata, ide, got: usb",
                 id="disk-bus"),
    pytest.param({"nic_model": "e1000'/><x"}, "nic_model must be one of", id="nic-model-xml"),
    pytest.param({"graphics": {"type": "vnc", "listen": "0.0.0.0'/>"}}, "graphics.listen", id="listen-xml"),
    pytest.param({"guest_agent": "perhaps"}, "guest_agent", id="agent"),
    pytest.param({"image": {"name": "x.qcow2", "properties": {"hw_disk_bus": "floppy"}}},
                 "image.properties.hw_disk_bus", id="image-property"),
    pytest.param({"image": {"name": "x.qcow2", "url": "ftp://127.0.0.1/x"}}, "image.url", id="url-scheme"),
    pytest.param({"image": {"name": "x.qcow2", "url": "http://127.0.0.1:9/x"}}, "image.checksum is required",
                 id="url-without-checksum"),
]


@pytest.mark.parametrize("override, expected", BAD_GUEST)
def test_bad_guest_options_are_refused_before_anything_changes(lab, override, expected):
    before = fleet_snapshot(lab)
    result = lab.playbook("launch.yml", "-e", json.dumps({"name": "badhw", **override}))
    assert result["rc"] != 0
    message = " ".join(failed_messages(result))
    assert expected in message, message
    assert fleet_snapshot(lab) == before


# ---- images by URL -------------------------------------------------------------------------------

class ImageServer:
    """python -m http.server on 127.0.0.1, started here and stopped by its PID; it logs each
    request on stderr, which is how the test counts downloads."""

    def __init__(self, directory: Path, log: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = log
        self._log_handle = open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                                      "--directory", str(directory), str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=self._log_handle)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, "http.server did not start"
                time.sleep(0.1)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def gets(self, name: str) -> int:
        return self.log.read_text().count(f'"GET /{name} ')

    def stop(self) -> None:
        os.kill(self.proc.pid, 15)
        self.proc.wait(timeout=30)
        self._log_handle.close()


# The operator's setting, as an extra variable of whoever runs ansible-playbook with the lab's
# inventory, that lets the controller download from the test's own server on 127.0.0.1.
LOCAL_IMAGES = ("-e", json.dumps({"berth_image_url_policy": {"networks": ["127.0.0.1/32"]}}))


@pytest.fixture
def image_server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    server = ImageServer(served, tmp_path / "http.log")
    try:
        yield served, server
    finally:
        server.stop()


def test_image_by_url_checked_before_any_claim_uploaded_once_and_reused(lab, image_server, tmp_path):
    served, server = image_server
    image_file = served / "cloud.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image_file), "64M"], check=True)
    checksum = "sha256:" + hashlib.sha256(image_file.read_bytes()).hexdigest()
    cache = tmp_path / "controller-cache"
    image = {"name": "cloud.qcow2", "url": server.url("cloud.qcow2"), "checksum": checksum}

    # A wrong checksum: refused by the request check, before the schedule claims anything.
    wrong = {**image, "checksum": "sha256:" + "0" * 64}
    before = fleet_snapshot(lab)
    refused = lab.playbook("launch.yml", "-e", json.dumps({"name": "url", "count": 2, "image": wrong}),
                           "-e", f"berth_image_cache_dir={cache}", *LOCAL_IMAGES)
    assert refused["rc"] != 0
    assert task_result(refused, "Launch the instances")["field"] == "image.checksum"
    message = " ".join(failed_messages(refused))
    assert "checksum mismatch" in message and checksum.split(":")[1] not in message
    assert fleet_snapshot(lab) == before  # no claim, no instance, no volume uploaded anywhere
    assert server.gets("cloud.qcow2") == 1 and not any(cache.iterdir())
    # A dry run downloads and refuses it the same way.
    refused_dry = lab.playbook("launch.yml", "-e", json.dumps({"name": "url", "count": 2, "image": wrong}),
                               "-e", f"berth_image_cache_dir={cache}", *LOCAL_IMAGES, check=True)
    assert refused_dry["rc"] != 0
    assert task_result(refused_dry, "Launch the instances")["field"] == "image.checksum"
    assert fleet_snapshot(lab) == before
    assert server.gets("cloud.qcow2") == 2 and not any(cache.iterdir())

    # The check-mode triplet: the dry run downloads (into the controller's cache only, to check
    # the checksum as the real run will), the real run takes it from there.
    extra = ("-e", json.dumps({"name": "url", "count": 2, "image": image}), "-e", f"berth_image_cache_dir={cache}",
             *LOCAL_IMAGES)
    assert_triplet_then_idempotent(lab, extra)
    assert server.gets("cloud.qcow2") == 3
    rows = [row_of(lab, "url-1"), row_of(lab, "url-2")]
    hosts = sorted({row["host"] for row in rows})
    pool_copies = {}
    for row in rows:
        overlay = ET.fromstring(lab.virsh(row["host"], "vol-dumpxml", "--pool", "default",
                                          f"berth-{row['uuid']}-root.qcow2"))
        assert overlay.findtext("backingStore/path") == "/var/lib/libvirt/images/cloud.qcow2"
    for host in hosts:
        copy = pool_file(lab, host, "cloud.qcow2")
        assert copy.read_bytes() == image_file.read_bytes()
        pool_copies[host] = (copy.stat().st_ino, copy.stat().st_mtime_ns)

    # A second launch on the same hosts: no download, no upload (the pool's copies are the same files).
    reused = lab.playbook("launch.yml", "-e", json.dumps({"name": "again", "count": 2, "image": image,
                                                          "berth_force_hosts": hosts}),
                          "-e", f"berth_image_cache_dir={cache}", *LOCAL_IMAGES)
    assert reused["rc"] == 0, failed_messages(reused)
    assert server.gets("cloud.qcow2") == 3
    for host in hosts:
        copy = pool_file(lab, host, "cloud.qcow2")
        assert (copy.stat().st_ino, copy.stat().st_mtime_ns) == pool_copies[host]

    for name in ("url", "again"):
        assert lab.playbook("delete.yml", "-e", f"name={name}")["rc"] == 0
    for host in hosts:
        lab.virsh(host, "vol-delete", "--pool", "default", "cloud.qcow2")


def test_a_pool_image_of_the_same_name_with_other_bytes_is_refused_not_reused(lab, image_server, tmp_path):
    served, server = image_server
    image_file = served / "clash.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image_file), "64M"], check=True)
    checksum = "sha256:" + hashlib.sha256(image_file.read_bytes()).hexdigest()
    # hv3's pool already has a clash.qcow2, but another one.
    other = pool_file(lab, "hv3", "clash.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(other), "32M"], check=True)
    lab.virsh("hv3", "pool-refresh", "default")
    try:
        request = {"name": "clash", "berth_force_hosts": ["hv3"],
                   "image": {"name": "clash.qcow2", "url": server.url("clash.qcow2"), "checksum": checksum}}
        result = lab.playbook("launch.yml", "-e", json.dumps(request), "-e", f"berth_image_cache_dir={tmp_path / 'c'}",
                              *LOCAL_IMAGES)
        assert result["rc"] != 0
        message = " ".join(failed_messages(result))
        assert "storage pool default on hv3 has a volume clash.qcow2 with checksum sha256:" in message, message
        assert f"not image.checksum {checksum}" in message
        # Nothing of the instance stays on hv3, and hv3's image is untouched.
        assert [v for v in lab.virsh("hv3", "vol-list", "default").split() if v.startswith("berth-")] == []
        assert other.stat().st_size < image_file.stat().st_size or other.read_bytes() != image_file.read_bytes()
    finally:
        lab.playbook("delete.yml", "-e", "name=clash")
        lab.virsh("hv3", "vol-delete", "--pool", "default", "clash.qcow2")


def test_an_image_url_on_the_controller_s_loopback_is_refused_before_any_fetch_unless_the_operator_allows_it(
        lab, image_server, tmp_path):
    """Issue 34's request forgery: a survey's image answer names a "metadata" document that only
    the controller reaches (here a server of the test's own on 127.0.0.1). Refused before the
    controller connects, nothing claimed; a requester's own image_url_policy changes nothing;
    the operator's, from the inventory's group vars or an extra variable, lets it be fetched
    (then refused on its checksum, whose digest is never told)."""
    served, server = image_server
    document = json.dumps({"AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "controller-credentials"}).encode()
    (served / "metadata").write_bytes(document)
    cache = tmp_path / "controller-cache"
    # As an AWX survey's text field gives it: JSON text, decoded by the action.
    image = json.dumps({"name": "meta.raw", "format": "raw", "url": server.url("metadata"),
                        "checksum": "sha256:" + "0" * 64})
    request = ("-e", json.dumps({"server_name": "ssrf", "image": image}), "-e", f"berth_image_cache_dir={cache}")
    before = fleet_snapshot(lab)

    refused = lab.playbook("launch.yml", *request)
    assert refused["rc"] != 0
    result = task_result(refused, "Launch the instances")
    assert result["field"] == "image.url"
    assert "127.0.0.1, which is a loopback address" in result["msg"] and "berth_image_url_policy" in result["msg"]
    assert server.gets("metadata") == 0 and not any(cache.iterdir())
    assert fleet_snapshot(lab) == before

    # The requester's own policy (an extra variable of the bare name, as a survey's answer) is ignored.
    asked = lab.playbook("launch.yml", *request, "-e", json.dumps({"image_url_policy": {"networks": ["0.0.0.0/0"]}}))
    result = task_result(asked, "Launch the instances")
    assert asked["rc"] != 0 and result["field"] == "image.url"
    # Printed by Ansible (ansible-core 2.21 takes the result's warnings out of it).
    assert "the play variable image_url_policy is ignored" in asked["stderr"] + json.dumps(result.get("warnings"))
    assert server.gets("metadata") == 0

    # The operator's inventory allows the server: fetched, and refused on the checksum.
    operator = tmp_path / "operator-inventory"
    (operator / "group_vars").mkdir(parents=True)
    (operator / "hosts.yml").write_text("all: {}\n")
    (operator / "group_vars" / "all.yml").write_text('berth_image_url_policy: {networks: ["127.0.0.1/32"]}\n')
    fetched = lab.playbook("launch.yml", "-i", str(operator), *request)
    assert fetched["rc"] != 0
    result = task_result(fetched, "Launch the instances")
    assert result["field"] == "image.checksum" and "checksum mismatch" in result["msg"]
    assert hashlib.sha256(document).hexdigest() not in result["msg"]
    assert server.gets("metadata") == 1 and not any(cache.iterdir())
    assert fleet_snapshot(lab) == before

    # The same from the operator's extra variable.
    again = lab.playbook("launch.yml", *request, *LOCAL_IMAGES)
    assert task_result(again, "Launch the instances")["field"] == "image.checksum"
    assert server.gets("metadata") == 2 and fleet_snapshot(lab) == before
