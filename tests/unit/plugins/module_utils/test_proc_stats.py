"""/proc parsing, on sample files with values worked out by hand."""

from __future__ import annotations

import os

from ansible_collections.berth.fleet.plugins.module_utils import proc_stats

MEMINFO = """MemTotal:       24684000 kB
MemFree:        20480000 kB
MemAvailable:   23000000 kB
Buffers:           10240 kB
Cached:           614400 kB
SwapCached:            0 kB
HugePages_Total:       0
"""

STAT = """cpu  100 20 30 4000 50 6 7 0 0 0
cpu0 50 10 15 2000 25 3 3 0 0 0
intr 12345
"""


def test_meminfo_in_mib(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    assert proc_stats.meminfo(str(path)) == {
        "total_mb": 24684000 // 1024, "free_mb": 20000, "buffers_mb": 10, "cached_mb": 600,
    }


def test_loadavg(tmp_path):
    path = tmp_path / "loadavg"
    path.write_text("0.50 1.25 2.00 1/234 5678\n")
    assert proc_stats.loadavg(str(path)) == {"load_1m": 0.5, "load_5m": 1.25, "load_15m": 2.0}


def test_cpu_times_fold_like_libvirt(tmp_path):
    path = tmp_path / "stat"
    path.write_text(STAT)
    ns_per_tick = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    assert proc_stats.cpu_times(str(path)) == {
        "cpu_user_ns": (100 + 20) * ns_per_tick,      # user + nice
        "cpu_kernel_ns": (30 + 6 + 7) * ns_per_tick,  # system + irq + softirq
        "cpu_idle_ns": 4000 * ns_per_tick,
        "cpu_iowait_ns": 50 * ns_per_tick,
    }
