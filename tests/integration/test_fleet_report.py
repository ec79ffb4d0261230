"""The fleet report (playbooks/report.yml, berth.fleet.fleet_report) of a real ledger, made by the
tracker sync of the lab fleet and real launches, rendered by ansible-playbook and looked at in a
real headless Chromium (tests/integration/browser.py): what a person sees on the page.

Set BERTH_REPORT_SCREENSHOT=<path.png> to keep a screenshot of the whole page there
(benchmarks/report_screenshot.py does, for benchmarks/results/fleet_report.png).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from browser import Browser
from conftest import REPO, ansible_env, changed_count, failed_messages, task_result

from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger

pytestmark = pytest.mark.integration

GROUP = "rpt-aa"
LAUNCHES = ({"name": "rpt-web", "count": 2, "flavor": "m1.tiny", "server_group": GROUP},
            {"name": "rpt-db", "count": 1, "flavor": "m1.tiny"})
TOO_BIG = {"name": "rpt-huge", "count": 1, "flavor": {"name": "huge", "vcpus": 1, "memory_mb": 4_000_000, "root_gb": 1}}
HTML_HOST = "<b>hv-html</b>"
HTML_REASON = "<b>firmware</b> & <img src=x onerror=\"document.title='pwned'\">"
REPORT_TASK = "Write the fleet report page"


def run_module(lab, inventory: str, module: str, args: dict) -> None:
    """One ad hoc task on localhost, as an operator runs it."""
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible"), "-i", inventory, "localhost", "-m", module,
         "-a", json.dumps({**args, "ledger_url": "{{ berth_ledger_url }}"})],
        cwd=REPO, env=ansible_env(), capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def hypervisor_rows(ledger_path: Path) -> dict[str, dict]:
    """The ledger's hypervisor rows, read with sqlite3 directly (not Berth's code)."""
    with sqlite3.connect(ledger_path) as db:
        db.row_factory = sqlite3.Row
        return {row["name"]: dict(row) for row in db.execute("SELECT * FROM hypervisors")}


def expected_fill(row: dict) -> dict[str, float]:
    """Used over limit per bar, as Nova's Newton filters count them: used includes the reserved
    amount, the limit is the capacity times the allocation ratio."""
    return {
        "vCPU": row["vcpus_used"] / (row["vcpus_total"] * row["cpu_allocation_ratio"]),
        "RAM": (row["reserved_host_memory_mb"] + row["memory_mb_used"])
        / (row["total_usable_ram_mb"] * row["ram_allocation_ratio"]),
        "disk": (row["reserved_host_disk_mb"] + row["disk_mb_used"])
        / (row["total_usable_disk_gb"] * 1024 * row["disk_allocation_ratio"]),
    }


def an_unanswered_host(name: str, uuid: str) -> dict:
    """The host state of a hypervisor that a gather once recorded and that then stopped being
    gathered (a controller whose schedule stopped, a slice that no longer runs)."""
    return {"host": name, "nodename": name, "uuid": uuid, "service_up": True, "disabled": False,
            "vcpus_total": 8, "vcpus_used": 0, "total_usable_ram_mb": 16384, "free_ram_mb": 15872,
            "total_usable_disk_gb": 200, "free_disk_mb": 200 * 1024, "num_instances": 0, "num_io_ops": 0,
            "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0,
            "reserved_host_memory_mb": 512, "reserved_host_disk_mb": 0, "domains": []}


# What the page's rows show, measured in the browser: each bar's filled width over its track's.
MEASURE_ROWS = """
var rows = {};
document.querySelectorAll("#hvs > .hv").forEach(function (row) {
  row.scrollIntoView();
  var bars = {};
  row.querySelectorAll(".hd .res").forEach(function (bar) {
    var track = bar.querySelector(".track").getBoundingClientRect().width;
    var filled = 0;
    bar.querySelectorAll(".track .rsv, .track .use").forEach(function (part) {
      filled += part.getBoundingClientRect().width;
    });
    bars[bar.querySelector(".lbl").textContent] = [filled, track, bar.querySelector(".num").textContent];
  });
  rows[row.querySelector(".name").firstChild.textContent] = {id: row.id, bars: bars};
});
window.scrollTo(0, 0);
return rows;
"""


@pytest.fixture
def reported_fleet(lab, tmp_path):
    """A ledger of its own: the lab's three hypervisors gathered, three instances (two in an
    anti-affinity group), a launch that found no valid host, hv2 disabled with a reason written
    in HTML, hv3 down (its daemon stopped), and a hypervisor named in HTML whose last sync is two
    hours old. Everything launched is deleted afterwards."""
    ledger_path = tmp_path / "ledger.sqlite3"
    url = f"sqlite:///{ledger_path}"
    inventory = lab.inventory_copy(tmp_path, url, aggregates={
        "rack_a": {"hosts": ["hv1", "hv2"], "metadata": {"availability_zone": "az-a"}}})

    def playbook(name: str, *extra: str, check: bool = False) -> dict:
        return lab.finish(lab.start_playbook(name, *extra, *(["--check"] if check else []), inventory=inventory))

    stopped, launched = False, []
    try:
        gathered = playbook("gather.yml")
        assert gathered["rc"] == 0, failed_messages(gathered)
        run_module(lab, inventory, "berth.fleet.server_group", {"name": GROUP, "policy": "anti-affinity"})
        for launch in LAUNCHES:
            launched.append(launch["name"])
            output = playbook("launch.yml", "-e", json.dumps(launch))
            assert output["rc"] == 0, failed_messages(output)
        refused = playbook("launch.yml", "-e", json.dumps(TOO_BIG))
        assert refused["rc"] != 0 and "no valid host" in " ".join(failed_messages(refused))
        run_module(lab, inventory, "berth.fleet.hypervisor", {"host": "hv2", "state": "disabled", "reason": HTML_REASON})
        lab.stop_daemon("hv3")
        stopped = True
        gathered = playbook("gather.yml")
        assert gathered["rc"] == 0, failed_messages(gathered)
        # A hypervisor named in HTML, recorded by the tracker sync as any other, then not gathered
        # for two hours: its last sync is set back rather than waited for.
        ledger = Ledger(url).open()
        ledger.tracker_sync([an_unanswered_host(HTML_HOST, "6c0ffee0-0000-4000-8000-000000000001")])
        ledger.close()
        with sqlite3.connect(ledger_path) as db:
            db.execute("UPDATE hypervisors SET synced_at = datetime('now', '-2 hours') WHERE name = ?", (HTML_HOST,))
        yield {"playbook": playbook, "ledger_path": ledger_path, "url": url, "tmp_path": tmp_path}
    finally:
        if stopped:
            lab.start_daemon("hv3")
        left = [name for name in launched if playbook("delete.yml", "-e", f"name={name}")["rc"] != 0]
    assert not left, f"delete.yml failed for {left}"


def test_fleet_report_written_idempotently_and_read_in_a_browser(lab, reported_fleet):
    playbook, ledger_path = reported_fleet["playbook"], reported_fleet["ledger_path"]
    page = reported_fleet["tmp_path"] / "report" / "fleet.html"
    page.parent.mkdir()
    write = ("-e", f"report_path={page}")

    # The check-mode triplet, then a second real run: nothing written in check mode, and the
    # same fleet leaves the written page as it is.
    dry = playbook("report.yml", *write, check=True)
    assert dry["rc"] == 0 and changed_count(dry) == 1, failed_messages(dry)
    assert task_result(dry, REPORT_TASK)["msg"].startswith(f"would write {page} (")
    assert not page.exists()
    real = playbook("report.yml", *write)
    assert real["rc"] == 0 and changed_count(real) == 1, failed_messages(real)
    result = task_result(real, REPORT_TASK)
    assert (result["hypervisors"], result["instances"]) == (4, 3)
    assert result["states"] == {"up": 2, "stale": 1, "down": 1, "missing": 0, "disabled": 1}
    written = page.read_bytes()
    assert result["bytes"] == len(written)
    again = playbook("report.yml", *write, check=True)
    assert again["rc"] == 0 and changed_count(again) == 0
    # The page needs the ledger alone: no inventory of the hypervisors, none of them contacted.
    second = lab.finish(lab.start_playbook("report.yml", *write, inventory="localhost,",
                                           env={"BERTH_LEDGER_URL": reported_fleet["url"]}))
    assert second["rc"] == 0 and changed_count(second) == 0, failed_messages(second)
    assert page.read_bytes() == written

    rows = hypervisor_rows(ledger_path)
    with Browser() as browser:
        browser.open(page)
        assert browser.run("return document.title;") == "Berth fleet: 4 hypervisors"
        screenshot = reported_fleet["tmp_path"] / "fleet_report.png"
        browser.screenshot(screenshot, full_page=True)
        if os.environ.get("BERTH_REPORT_SCREENSHOT"):
            browser.screenshot(Path(os.environ["BERTH_REPORT_SCREENSHOT"]), full_page=True)
        # Nothing was fetched from anywhere: the page is whole by itself.
        assert browser.run("return performance.getEntriesByType('resource').length;") == 0

        shown = browser.run(MEASURE_ROWS)
        assert sorted(shown) == sorted([HTML_HOST, "hv1", "hv2", "hv3"])
        for name, row in rows.items():
            for label, fill in expected_fill(row).items():
                filled_px, track_px, _text = shown[name]["bars"][label]
                # Each bar is as wide as used/limit, to the pixel (and never past its track).
                assert abs(filled_px - min(fill, 1.0) * track_px) <= 1.0, (name, label, filled_px, track_px, fill)
        hv1 = rows["hv1"]
        assert shown["hv1"]["bars"]["vCPU"][2] == \
            f"{hv1['vcpus_used']} / {hv1['vcpus_total'] * hv1['cpu_allocation_ratio']:g} vCPUs"
        assert any(rows[host]["memory_mb_used"] > 0 for host in ("hv1", "hv2", "hv3")), "no instance claimed RAM"

        def row_text(name: str) -> str:
            return browser.text(browser.find(f"#{shown[name]['id']}"))

        # States with their reasons, as the ledger recorded them; names from users as text.
        down = row_text("hv3")
        assert "down" in down and f"down: {rows['hv3']['down_reason']}" in down, down
        stale = row_text(HTML_HOST)
        assert stale.startswith(HTML_HOST), stale
        assert re.search(r"stale: not synced for over 600 s \(service_down_time\); last sync \S+ \S+ UTC \(2 h ago\)",
                         stale), stale
        disabled = row_text("hv2")
        assert "disabled" in disabled and f"disabled: {HTML_REASON}" in disabled, disabled
        assert "az-a · rack_a" in row_text("hv1")
        assert browser.run("return document.querySelectorAll('#hvs b, img, #hvs script').length;") == 0
        assert browser.run("return document.title;") == "Berth fleet: 4 hypervisors"

        # The instances under their hypervisors, the group with its members and policy.
        placed = {name: row["host"] for name, row in
                  ((row["name"], row) for row in lab_rows(ledger_path, "instances"))}
        assert sorted(placed) == ["rpt-db-1", "rpt-web-1", "rpt-web-2"]
        for instance, host in placed.items():
            assert instance in row_text(host)
        assert placed["rpt-web-1"] != placed["rpt-web-2"]
        groups = browser.text(browser.find("#groups"))
        assert f"{GROUP} anti-affinity rpt-web-1 on {placed['rpt-web-1']}, rpt-web-2 on {placed['rpt-web-2']}" in groups

        # The decisions, newest first, with their explanations.
        decisions = browser.find_all("#decisions > details")
        assert len(decisions) == 3
        refused = browser.text(decisions[0])
        assert refused.startswith("no valid host rpt-huge"), refused
        assert "0/3 hosts are available for instance 1 of 1" in refused
        assert all(f"{host}:" in refused for host in ("hv1", "hv2", "hv3")), refused
        web = browser.text(decisions[2])
        assert f"placed 2 instances on {placed['rpt-web-1']}, {placed['rpt-web-2']}" in web
        assert f"server group {GROUP}" in web and "RAMWeigher" in web, web

        # Typing a name hides every other hypervisor; an instance's name finds its hypervisor.
        query = browser.find("#q")
        browser.type_into(query, "hv1")
        visible = {name for name, row in shown.items() if browser.displayed(browser.find(f"#{row['id']}"))}
        assert visible == {"hv1"}
        assert browser.text(browser.find("#shown")) == "1 of 4 shown"
        browser.clear(query)
        browser.type_into(query, "rpt-db-1")
        visible = {name for name, row in shown.items() if browser.displayed(browser.find(f"#{row['id']}"))}
        assert visible == {placed["rpt-db-1"]}
        # The state filter: clicking the summary's "down" count shows the down hypervisor alone.
        browser.clear(query)
        browser.click(browser.find("button[data-state='down']"))
        visible = {name for name, row in shown.items() if browser.displayed(browser.find(f"#{row['id']}"))}
        assert visible == {"hv3"}


def lab_rows(ledger_path: Path, table: str) -> list[dict]:
    with sqlite3.connect(ledger_path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(f"SELECT * FROM {table} ORDER BY 1")]
