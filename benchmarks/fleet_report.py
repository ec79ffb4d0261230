"""The fleet report at fleet scale: `ansible-playbook playbooks/report.yml` on a ledger of 1,000 and
10,000 hypervisors, the size of the page, and how a real Chromium copes with it.

    .venv/bin/python benchmarks/fleet_report.py [--sizes 1000,10000] [--runs 3]
        [--output benchmarks/results/fleet_report.md]

Needs no root and no lab: the report reads the ledger only. Needs Debian's chromium and
chromium-driver (scripts/setup installs them).

The ledger (a SQLite file): synthetic hypervisors written by the tracker sync
(benchmarks/synthetic.py: generated libvirt facts through host_facts.host_state, each with two
to four unmanaged domains), then instances placed as a launch places them - the engine decides
on the ledger's host states, the ledger claims, each decision is recorded with its host states
as berth.fleet.schedule records them: 10 launches of 100 instances, one of them in an
anti-affinity server group, and one launch that finds no valid host. Half the instances are
then marked ACTIVE.

Measured per size, `--runs` rounds of: the empty play (benchmarks/playbooks/empty.yml, Ansible's
own start-up); report.yml writing a new page; report.yml again on the same page (no change).
Then, in this process: the ledger read (Ledger.fleet_view), the page model, the rendering, and
their tracemalloc peak. Then the page in headless Chromium (tests/integration/browser.py): from
navigation to the load event, and the page's filter (typing a host name) from the input event to
the end of the layout it causes.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests" / "integration")]

import synthetic  # noqa: E402
from browser import Browser  # noqa: E402
from fleet_scale import run, spread  # noqa: E402  (ansible-playbook with the timing callback; figures)

from ansible_collections.berth.fleet.plugins.module_utils.scheduler.driver import (  # noqa: E402
    needed_host_fields,
    schedule,
)
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.host_state import Flavor  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.request_spec import RequestSpec  # noqa: E402
from ansible_collections.berth.fleet.plugins.module_utils.scheduler.server_group import (  # noqa: E402
    server_group_from_dict,
)
from ansible_collections.berth.fleet.plugins.plugin_utils import _fleet_report as report  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils._fleet import Fleet, recorded_states  # noqa: E402
from ansible_collections.berth.fleet.plugins.plugin_utils.ledger import Ledger, safe_url  # noqa: E402

FLAVOR = Flavor.from_dict({"vcpus": 1, "memory_mb": 512, "root_gb": 1}, name="bench")
TOO_BIG = Flavor.from_dict({"vcpus": 64, "memory_mb": 1024, "root_gb": 1}, name="too-big")
LAUNCHES, PER_LAUNCH = 10, 100
REPORT_TASK = "Write the fleet report page"
# The page's filter, timed in the page: from the input event to the end of the layout it causes.
TIME_FILTER = """
var query = document.getElementById("q");
var started = performance.now();
query.value = arguments[0];
query.dispatchEvent(new Event("input"));
var height = document.body.offsetHeight;
var elapsed = performance.now() - started;
var shown = document.getElementById("shown").textContent;
query.value = "";
query.dispatchEvent(new Event("input"));
return [elapsed, shown, height];
"""
LOAD_TIME = """
var timing = performance.getEntriesByType("navigation")[0];
return [timing.loadEventEnd, timing.domContentLoadedEventEnd, document.querySelectorAll("#hvs > .hv").length];
"""


def launch(ledger: Ledger, name: str, flavor: Flavor, count: int, group: dict | None = None) -> bool:
    """Decide on the ledger's host states, claim, record: what berth.fleet.schedule does."""
    spec = RequestSpec(flavor=flavor, count=count, server_group=server_group_from_dict(group) if group else None)
    table, generations = ledger.host_table(needed_host_fields(spec))
    decision = schedule(table, spec)
    request = {"flavor": flavor.to_dict(), "count": count, "server_group": group}
    states = recorded_states(Fleet(table, generations, {}), decision)
    if not decision.ok:
        ledger.record_decision(name, "benchmark", request, states, decision.to_dict(), "no_valid_host")
        return False
    placements = [{"name": f"{name}-{index + 1}", "host": placement.host, "hypervisor_uuid": placement.uuid}
                  for index, placement in enumerate(decision.placements)]
    rows = ledger.claim(placements, flavor, "benchmark", server_group=group and group["name"])
    ledger.record_decision(name, "benchmark", request, states, decision.to_dict(), "claimed")
    for row in rows[: len(rows) // 2]:
        ledger.mark_active(row["uuid"])
    return True


def fill(url: str, size: int) -> dict:
    ledger = Ledger(url).open()
    began = time.perf_counter()
    synthetic.sync(ledger, 0, size)
    sync_s = time.perf_counter() - began
    ledger.create_server_group("spread", "anti-affinity")
    for number in range(LAUNCHES):
        group = ledger.scheduler_group("spread") if number == 0 else None
        assert launch(ledger, f"bench{number}", FLAVOR, PER_LAUNCH, group), f"launch bench{number} found no room"
    assert not launch(ledger, "too-big", TOO_BIG, 1)
    ledger.close()
    return {"sync_rate": size / sync_s}


def in_process(url: str, runs: int) -> dict:
    """The action's three steps in this process, timed (median of ``runs``), then once more under
    tracemalloc for their peak (tracing slows Python several times: never timed)."""
    ledger = Ledger(url).open()
    timings: dict[str, list[float]] = {"read_s": [], "model_s": [], "render_s": []}

    def steps() -> tuple[dict, str]:
        began = time.perf_counter()
        view = ledger.fleet_view()
        read = time.perf_counter()
        model = report.page_model(view, 600, safe_url(url))
        modelled = time.perf_counter()
        page = report.render(model)
        rendered = time.perf_counter()
        for key, seconds in (("read_s", read - began), ("model_s", modelled - read), ("render_s", rendered - modelled)):
            timings[key].append(seconds)
        return model, page

    for _round in range(runs):
        model, page = steps()
    tracemalloc.start()
    steps()
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ledger.close()
    encoded = page.encode()
    return {**{key: statistics.median(values[:runs]) for key, values in timings.items()}, "peak_mib": peak / 2 ** 20,
            "bytes": len(encoded), "gzip_bytes": len(gzip.compress(encoded, 6)),
            "instances": model["instance_total"], "hosts": len(model["hosts"])}


def in_browser(page: Path, host: str) -> dict:
    with Browser() as browser:
        began = time.perf_counter()
        browser.open(page)
        open_s = time.perf_counter() - began
        load_ms, ready_ms, rows = browser.run(LOAD_TIME)
        filter_ms, shown, _height = browser.run(TIME_FILTER, host)
        # Typed as a person types it, key by key (each key filters again).
        began = time.perf_counter()
        browser.type_into(browser.find("#q"), host)
        typed_s = time.perf_counter() - began
        assert browser.text(browser.find("#shown")) == f"1 of {rows:,} shown"
    return {"open_s": open_s, "load_ms": load_ms, "ready_ms": ready_ms, "rows": rows, "filter_ms": filter_ms,
            "shown": shown, "typed_s": typed_s, "typed_keys": len(host)}


def measure(url: str, work: Path, runs: int) -> dict:
    env = {"BERTH_LEDGER_URL": url}
    figures: dict[str, list] = {"empty": [], "write": [], "unchanged": []}
    os.environ.update(env)
    run(["-i", "localhost,", "playbooks/report.yml", "-e", f"report_path={work}/warm.html"])
    for round_ in range(runs):
        wall, _report = run(["-i", "localhost,", "benchmarks/playbooks/empty.yml"])
        figures["empty"].append(wall)
        page = work / f"fleet{round_}.html"
        for kind in ("write", "unchanged"):
            wall, timing = run(["-i", "localhost,", "playbooks/report.yml", "-e", f"report_path={page}"])
            [task] = [task for task in timing["tasks"] if task["task"] == REPORT_TASK]
            assert task["changed"] == (kind == "write"), (kind, task)
            figures[kind].append(wall)
            figures[f"{kind}_task"] = figures.get(f"{kind}_task", []) + [task["seconds"]]
    return figures


def write(path: str, results: list[dict], started: float, load_before: str, runs: int) -> None:
    lines = [
        "# The fleet report at fleet scale",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, "
        f"Python {platform.python_version()}. Load average before: {load_before}; after: "
        f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}. Whole run: {(time.time() - started) / 60:.1f} min.",
        "",
        "Reproduce: `.venv/bin/python benchmarks/fleet_report.py` (see its docstring for how the ledger is",
        f"filled and what is timed). Seconds, median (min-max) over {runs} runs. The command measured is",
        "`BERTH_LEDGER_URL=sqlite:///... ansible-playbook -i localhost, playbooks/report.yml -e report_path=fleet.html`;",
        "the empty play (`benchmarks/playbooks/empty.yml`) is Ansible's own start-up, timed in turn with it.",
        "",
        "## ansible-playbook playbooks/report.yml",
        "",
        "| hypervisors | instances | empty play | write the page | its task | again, unchanged | its task | "
        "page | gzipped |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        figures, split = result["figures"], result["split"]
        lines.append(
            f"| {result['size']:,} | {split['instances']:,} | {spread(figures['empty'])} | {spread(figures['write'])} | "
            f"{spread(figures['write_task'])} | {spread(figures['unchanged'])} | {spread(figures['unchanged_task'])} | "
            f"{split['bytes'] / 2 ** 20:.1f} MiB | {split['gzip_bytes'] / 2 ** 20:.2f} MiB |")
    lines += [
        "",
        "## In this process, milliseconds",
        "",
        "read = Ledger.fleet_view (hypervisors with usage and unmanaged domains, instances, server",
        "groups, the 20 newest decisions, one transaction); model = states and bars; render = Jinja2,",
        "autoescaped; median of the runs. Peak = tracemalloc peak of the three, in a run of its own.",
        "",
        "| hypervisors | read | model | render | peak MiB |",
        "|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        split = result["split"]
        lines.append(f"| {result['size']:,} | {split['read_s'] * 1000:.0f} | {split['model_s'] * 1000:.0f} | "
                     f"{split['render_s'] * 1000:.0f} | {split['peak_mib']:.0f} |")
    lines += [
        "",
        "## In headless Chromium (Debian's, through chromedriver)",
        "",
        "One load of the page: open = the WebDriver navigation, until the page has loaded; DOM ready and load = from the",
        "navigation's start (the page's own Navigation Timing); filter = the page's script hiding every",
        "row but one on an input event, with the layout that follows; typed = a host name typed key by",
        "key through WebDriver (the page filters again on each key).",
        "",
        "| hypervisors | rows | open s | DOM ready ms | load ms | filter ms | typed (keys) s |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        seen = result["browser"]
        lines.append(f"| {result['size']:,} | {seen['rows']:,} | {seen['open_s']:.2f} | {seen['ready_ms']:.0f} | "
                     f"{seen['load_ms']:.0f} | {seen['filter_ms']:.0f} | {seen['typed_s']:.2f} "
                     f"({seen['typed_keys']}) |")
    lines += ["", "## Setup", ""]
    for result in results:
        lines.append(f"- {result['size']:,} hypervisors: synced by the tracker sync at "
                     f"{result['fill']['sync_rate']:,.0f} hypervisors/s; {result['split']['instances']:,} instances "
                     f"in {LAUNCHES} launches of {PER_LAUNCH} (one in an anti-affinity group), one launch with no "
                     "valid host.")
    Path(path).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results" / "fleet_report.md"))
    options = parser.parse_args()
    started, load_before = time.time(), " ".join(Path("/proc/loadavg").read_text().split()[:3])
    work = Path(tempfile.mkdtemp(prefix="berth-report-", dir="/tmp"))
    results = []
    try:
        for size in sorted(int(size) for size in options.sizes.split(",")):
            url = f"sqlite:///{work}/ledger{size}.sqlite3"
            filled = fill(url, size)
            print(f"{size}: ledger filled, measuring", flush=True)
            figures = measure(url, work, options.runs)
            split = in_process(url, options.runs)
            seen = in_browser(work / "fleet0.html", f"synth{size // 2:06d}")
            results.append({"size": size, "fill": filled, "figures": figures, "split": split, "browser": seen})
            write(options.output, results, started, load_before, options.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(Path(options.output).read_text())


if __name__ == "__main__":
    main()
