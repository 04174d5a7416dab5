"""perfsuite.measuring.system: /proc and /sys readers on fake trees, the CPU-usage instrument, pinning, warnings."""

import json
import os

import pytest

from perfsuite.core.errors import ConfigError
from perfsuite.measuring import system

STAT = """cpu  1000 10 200 5000 30 0 5 {steal} 0 0
cpu0 500 5 100 2500 15 0 2 {steal} 0 0
intr 12345
"""


def _write_stat(proc, steal=0, user=1000, idle=5000):
    (proc / "stat").write_text(STAT.format(steal=steal).replace("1000 10", f"{user} 10").replace(" 5000 ", f" {idle} "))


def test_proc_stat_aggregate_line_and_busy_time():
    t = system.parse_proc_stat(STAT.format(steal=40))
    assert (t.user, t.idle, t.steal) == (1000, 5000, 40)
    assert t.total == 1000 + 10 + 200 + 5000 + 30 + 0 + 5 + 40
    assert t.busy == 1000 + 10 + 200 + 0 + 5  # not idle, iowait or steal
    # An old kernel without the steal column reads as no steal; a file without a cpu line is refused.
    assert system.parse_proc_stat("cpu  1 2 3 4 5 6 7\n").steal == 0
    with pytest.raises(ValueError, match="cpu"):
        system.parse_proc_stat("intr 1\n")


def test_cpu_usage_reports_steal_and_other_processes_over_the_region(tmp_path):
    _write_stat(tmp_path, steal=0, user=1000, idle=5000)
    times = iter([0.0, 2.0])  # the region lasts 2 s of the fake clock
    own = iter([10.0, 10.5])  # this process used 0.5 s of CPU in it
    usage = system.CpuUsage(proc=tmp_path, clock=lambda: next(times), own_cpu=lambda: next(own))
    with usage:
        # 2 s on 2 CPUs = 400 jiffies at 100 Hz: 150 busy (user), 20 stolen, 230 idle.
        _write_stat(tmp_path, steal=20, user=1150, idle=5230)
    r = usage.readings
    hz = system.clock_ticks()
    assert r["status"] == "ok" and r["wall_s"] == 2.0
    assert r["steal_fraction"] == pytest.approx(20 / 400)
    assert r["busy_fraction"] == pytest.approx(150 / 400)
    assert r["others_cpus"] == pytest.approx((150 / hz - 0.5) / 2.0)
    assert r["own_cpus"] == pytest.approx(0.25)


def test_cpu_usage_without_proc_stat_says_unavailable(tmp_path):
    with system.CpuUsage(proc=tmp_path) as usage:
        pass
    assert usage.readings["status"] == "unavailable"


def test_pid_stat_name_may_hold_spaces_and_parentheses():
    fields = " ".join(["S"] + ["0"] * 10 + ["700", "300"] + ["0"] * 20)
    assert system.parse_pid_stat(f"42 (my (odd) name) {fields}") == ("my (odd) name", 1000)


def _proc_tree(root, ticks: dict):
    for pid, (name, t) in ticks.items():
        d = root / str(pid)
        d.mkdir(exist_ok=True)
        fields = " ".join(["R"] + ["0"] * 10 + [str(t), "0"] + ["0"] * 20)
        (d / "stat").write_text(f"{pid} ({name}) {fields}")
        (d / "cmdline").write_bytes(f"{name}\0--flag\0".encode())


def test_busy_processes_over_a_window(tmp_path):
    hz = system.clock_ticks()
    _proc_tree(tmp_path, {10: ("spinner", 0), 11: ("idle", 0), 12: ("gone", 0), os.getpid(): ("me", 0)})
    (tmp_path / "self").mkdir()  # not a pid: ignored

    def sleep(window):
        # Over the window: spinner used 80% of a CPU, idle 2%, this process 100%; 12 ended.
        _proc_tree(
            tmp_path,
            {
                10: ("spinner", int(0.8 * hz * window)),
                11: ("idle", int(0.02 * hz * window)),
                os.getpid(): ("me", int(hz * window)),
            },
        )
        (tmp_path / "12" / "stat").unlink()

    busy = system.busy_processes(1.0, proc=tmp_path, sleep=sleep)
    assert busy == [{"pid": 10, "name": "spinner", "cpu": pytest.approx(0.8), "command": "spinner --flag"}]


def test_governors_and_turbo_from_a_fake_sys_tree(tmp_path):
    assert system.read_governors(tmp_path) == {} and system.read_turbo(tmp_path) is None
    for cpu, gov in (("cpu0", "performance"), ("cpu1", "powersave")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    assert system.read_governors(tmp_path) == {"cpu0": "performance", "cpu1": "powersave"}
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("0\n")
    assert system.read_turbo(tmp_path) is True
    (tmp_path / "intel_pstate" / "no_turbo").write_text("1\n")
    assert system.read_turbo(tmp_path) is False


@pytest.mark.parametrize("text, cpus", [("0", (0,)), ("0,2-4", (0, 2, 3, 4)), (" 1 , 3", (1, 3))])
def test_cpu_lists(text, cpus):
    assert system.parse_cpus(text) == cpus


@pytest.mark.parametrize("text", ["", "a", "3-1", "0,0", "1-"])
def test_bad_cpu_lists_are_refused(text):
    with pytest.raises(ValueError):
        system.parse_cpus(text)


def test_pinned_sets_affinity_and_threads_for_the_region_only():
    import torch

    before_cpus, before_threads = os.sched_getaffinity(0), torch.get_num_threads()
    one = min(before_cpus)
    with system.pinned((one,), 1):
        assert os.sched_getaffinity(0) == {one} and torch.get_num_threads() == 1
    assert os.sched_getaffinity(0) == before_cpus and torch.get_num_threads() == before_threads


def test_pinning_to_a_cpu_that_is_not_there_names_the_option():
    before = os.sched_getaffinity(0)
    with pytest.raises(ConfigError, match="--cpus 4095: cannot pin"):
        with system.pinned((4095,), None):
            pass
    assert os.sched_getaffinity(0) == before


def test_warnings_name_what_disturbs_measurements():
    quiet = {
        "cpu_governors": ["performance"],
        "cpu_turbo": False,
        "cpu_affinity": [0, 1],
        "load_avg": [0.3, 0.2, 0.1],
        "steal_fraction": 0.0,
        "busy_processes": [],
        "torch_threads": 2,
    }
    assert system.check(quiet) == []
    noisy = {
        **quiet,
        "cpu_governors": ["powersave"],
        "cpu_turbo": True,
        "load_avg": [3.5, 3, 3],
        "steal_fraction": 0.05,
        "torch_threads": 4,
        "busy_processes": [{"pid": 7, "name": "pytest", "cpu": 0.9, "command": "pytest"}],
    }
    text = "\n".join(system.check(noisy))
    for expected in (
        "governor is powersave",
        "turbo",
        "load average 3.50 on 2",
        "steal 5.0%",
        "pytest (7) 90%",
        "4 threads on 2 usable",
    ):
        assert expected in text


def test_system_command_prints_readings_and_warnings_as_json(capsys):
    from perfsuite.cli.app import main

    assert main(["system", "--window", "0.05", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in (
        "cpu_affinity",
        "load_avg",
        "steal_fraction",
        "others_cpus",
        "busy_processes",
        "torch_threads",
        "thread_env",
        "cpu_governors",
        "cpu_turbo",
    ):
        assert key in doc["readings"]
    assert isinstance(doc["warnings"], list)
