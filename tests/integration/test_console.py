"""console.yml on the real lab fleet: one guest launched, its boot marker read back from its serial
log through libvirt - in --check too, changing nothing - first through a transient storage pool
that is gone afterwards, then through a pool the operator defined over the log directory, which
stays; the last line only with -e lines=1; an unknown instance refused with its name."""

from __future__ import annotations

import check
import fleet
import pytest
from conftest import changed_count, failed_messages, task_result

pytestmark = pytest.mark.integration

BOOT_TIMEOUT_S = 120
OPERATOR_POOL = "serial-logs"


def console(lab, *extra: str, check_mode: bool = False) -> dict:
    output = lab.playbook("console.yml", *extra, check=check_mode)
    assert output["rc"] == 0, failed_messages(output) or output["stderr"]
    assert changed_count(output) == 0
    return output


def pools(lab, host: str) -> list[str]:
    return sorted(lab.virsh(host, "pool-list", "--all", "--name").split())


def test_console_yml_shows_the_guest_s_boot_marker(clean_lab):
    lab = clean_lab
    launch = lab.playbook("launch.yml", "-e", "server_name=con", "-e", "flavor=m1.tiny")
    assert launch["rc"] == 0, failed_messages(launch) or launch["stderr"]
    [row] = lab.ledger_rows("instances")
    try:
        name, host, marker = row["name"], row["host"], check.MARKER.format(uuid=row["uuid"])
        assert check.wait_for_marker(fleet.log_dir(lab.dir, host) / f"{name}.serial.log", row["uuid"], BOOT_TIMEOUT_S)
        before = pools(lab, host)

        for check_mode in (True, False):
            output = console(lab, "-e", f"instance={name}", check_mode=check_mode)
            read = task_result(output, "Read the end of its serial console log")
            assert read["host"] == host and read["log"] == f"{fleet.QEMU_LOG_DIR}/{name}.serial.log"
            assert any(marker in line for line in read["output"]), read["output"]
            shown = task_result(output, "Show the console output")["msg"]
            assert shown[0].startswith(f"{name}: the last {len(read['output'])} line(s) of {read['log']} on {host}")
            assert shown[1:] == read["output"]
            # The transient pool it read through is gone.
            assert pools(lab, host) == before

        last = task_result(console(lab, "-e", f"instance={name}", "-e", "lines=1"), "Read the end of its serial console log")
        assert len(last["output"]) == 1 and last["truncated"]

        # The operator's own pool over the directory is read through, and kept.
        lab.virsh(host, "pool-create-as", OPERATOR_POOL, "dir", "--target", fleet.QEMU_LOG_DIR)
        try:
            read = task_result(console(lab, "-e", f"instance={name}"), "Read the end of its serial console log")
            assert any(marker in line for line in read["output"]), read["output"]
            assert pools(lab, host) == sorted([*before, OPERATOR_POOL])
        finally:
            lab.virsh(host, "pool-destroy", OPERATOR_POOL)
    finally:
        # The ledger is the session lab's: the instance goes as a user removes it.
        deleted = lab.playbook("delete.yml", "-e", "server_name=con")
        assert deleted["rc"] == 0, failed_messages(deleted)

    unknown = lab.playbook("console.yml", "-e", "instance=nobody")
    assert unknown["rc"] != 0
    assert failed_messages(unknown) == [f"no instance named nobody in the ledger at {fleet.ledger_url(lab.dir)} "
                                        f"(playbooks/list.yml lists them)"]
