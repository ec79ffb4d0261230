"""Key pairs and static network settings on the real lab fleet: what a launch gives reaches the
guest's NoCloud seed (read back through libvirt), the lab guest takes its address and keys from
it (its console says so, and SSH with the key from the seed gets in at that address), and bad
keys or addresses are refused naming the field before anything is claimed or made."""

from __future__ import annotations

import io
import json
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import fleet
import pycdlib
import pytest
from conftest import failed_messages, fleet_snapshot

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 180


def make_key(directory: Path, name: str) -> tuple[Path, str]:
    key = directory / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, key.with_name(f"{name}.pub").read_text().strip()


def lab_subnet_prefix(lab, host: str) -> str:
    """The first three octets of ``host``'s lab network (its bridge is <prefix>.1/24)."""
    network = ET.fromstring(lab.virsh(host, "net-dumpxml", fleet.NETWORK_NAME))
    return network.find("ip").get("address").rsplit(".", 1)[0]


def seed_files(lab, host: str, volume: str, directory: Path) -> dict[str, str]:
    """The seed volume downloaded through libvirt and read with pycdlib, as cloud-init reads it."""
    target = directory / volume
    lab.virsh(host, "vol-download", "--pool", "default", volume, str(target))
    iso = pycdlib.PyCdlib()
    iso.open(str(target))
    try:
        files = {}
        for child in iso.list_children(rr_path="/"):
            if child.is_file():
                name = child.rock_ridge.name().decode()
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, rr_path=f"/{name}")
                files[name] = out.getvalue().decode()
        return files
    finally:
        iso.close()


def wait_for_lines(log: Path, wanted: list[str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if all(line in text for line in wanted):
            break
        time.sleep(0.5)
    return text


def test_a_key_pair_keys_and_a_static_address_reach_the_guest_through_its_seed(lab, tmp_path):
    pair_key, pair_public = make_key(tmp_path, "pair")
    _own_key, own_public = make_key(tmp_path, "own")
    prefix = lab_subnet_prefix(lab, "hv1")
    address = f"{prefix}.5"  # below the lab network's DHCP range (.10 - .250)
    request = {
        "name": "seeded", "berth_force_hosts": ["hv1"], "key_name": "lab-pair", "ssh_authorized_keys": [own_public],
        # The lab's cloud kernel has no AHCI driver: its guests read their seed on IDE.
        "cdrom_bus": "ide",
        "networks": [{"type": "network", "name": fleet.NETWORK_NAME, "addresses": [f"{address}/24"],
                      "gateway": f"{prefix}.1", "nameservers": {"addresses": [f"{prefix}.1"], "search": ["lab"]}}],
        # The operator's key pairs, as the inventory's berth_key_pairs gives them.
        "berth_key_pairs": {"lab-pair": pair_public, "other": own_public},
    }
    launched = lab.playbook("launch.yml", "-e", json.dumps(request))
    assert launched["rc"] == 0, failed_messages(launched)
    row = next(r for r in lab.ledger_rows("instances") if r["name"] == "seeded-1")
    uuid = row["uuid"]
    assert (row["host"], row["state"]) == ("hv1", "ACTIVE")
    domain = ET.fromstring(lab.virsh("hv1", "dumpxml", "seeded-1"))
    assert domain.find("devices/disk[@device='cdrom']/target").attrib == {"dev": "hda", "bus": "ide"}
    mac = domain.find("devices/interface/mac").get("address")

    files = seed_files(lab, "hv1", f"berth-{uuid}-seed.iso", tmp_path)
    assert files["user-data"] == ""  # no user_data: the empty file cloud-init needs
    meta = json.loads(files["meta-data"])
    assert meta["public-keys"] == [pair_public, own_public]
    assert json.loads(files["network-config"]) == {"version": 2, "ethernets": {"nic0": {
        "match": {"macaddress": mac}, "addresses": [f"{address}/24"], "dhcp4": False,
        "routes": [{"to": "0.0.0.0/0", "via": f"{prefix}.1"}],
        "nameservers": {"addresses": [f"{prefix}.1"], "search": ["lab"]}}}}

    # The lab guest reads its seed: both keys, and the static address instead of DHCP.
    log = fleet.log_dir(lab.dir, "hv1") / "seeded-1.serial.log"
    wanted = ["BERTH-GUEST-KEYS 2", f"BERTH-GUEST-NET eth0 {address}"]
    text = wait_for_lines(log, wanted, BOOT_TIMEOUT_S)
    assert all(line in text for line in wanted), text[-2000:]
    # In with the key pair's key from the seed (the guest's own built-in key is not this one),
    # at the static address, the guest's host key checked against the lab's known_hosts.
    known_hosts = Path(lab.dir) / "guest" / "ssh" / "known_hosts"
    ssh = subprocess.run(
        ["ssh", "-i", str(pair_key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
         "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes", f"root@{address}",
         "ip -4 addr show eth0"],
        capture_output=True, text=True, timeout=60, check=False)
    assert ssh.returncode == 0, ssh.stderr
    assert f"inet {address}/24" in ssh.stdout

    deleted = lab.playbook("delete.yml", "-e", "name=seeded")
    assert deleted["rc"] == 0, failed_messages(deleted)
    assert uuid not in lab.virsh("hv1", "vol-list", "default")


GOOD_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMHAHKTOP2ZweYwdkDpx84WRcq9TQF+EoJE7iTdXnww7 alice@example"
BAD_REQUESTS = [
    pytest.param({"ssh_authorized_keys": [GOOD_KEY, "ssh-rsa " + GOOD_KEY.split()[1]]},
                 "ssh_authorized_keys[1]: the key says it is ssh-rsa but its data is a 'ssh-ed25519' key",
                 id="key-type-mismatch"),
    pytest.param({"key_name": "nobody", "berth_key_pairs": {"alice": GOOD_KEY}},
                 "key_name 'nobody' is not a key pair of the inventory's berth_key_pairs (known key pairs: alice)",
                 id="unknown-key-name"),
    pytest.param({"networks": [{"type": "user"}, {"type": "user", "addresses": ["10.0.2.20/24"],
                                                  "gateway": "10.0.3.1"}]},
                 "networks[1].gateway: 10.0.3.1 is not inside the interface's IPv4 subnets (10.0.2.0/24)",
                 id="gateway-outside"),
]


@pytest.mark.parametrize("override, expected", BAD_REQUESTS)
def test_bad_keys_and_addresses_are_refused_naming_the_field_with_nothing_made(lab, override, expected):
    before = fleet_snapshot(lab)
    result = lab.playbook("launch.yml", "-e", json.dumps({"name": "badseed", **override}))
    assert result["rc"] != 0
    message = " ".join(failed_messages(result))
    assert expected in message, message
    # No volume, no domain, no instance row, no claim.
    assert fleet_snapshot(lab) == before
