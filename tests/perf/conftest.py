"""pytest-benchmark front-end: options and perfsuite's fingerprint in machine_info."""


def pytest_addoption(parser):
    parser.addoption("--perfsuite-size", default="ci", choices=("ci", "cpu", "gpu"),
                     help="workload size of the benchmark tests (default ci)")
    parser.addoption("--perfsuite-device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.addoption("--perfsuite-max-time", type=float, default=3.0,
                     help="seconds per benchmark case, calibration included (default 3)")


def pytest_benchmark_update_machine_info(config, machine_info):
    from perfsuite.measure.env import fingerprint

    machine_info["perfsuite"] = fingerprint()


def pytest_generate_tests(metafunc):
    if "bench_case" in metafunc.fixturenames:
        from perfsuite.core import registry
        from benchmarks._grids import cases

        size = metafunc.config.getoption("--perfsuite-size")
        params, ids = [], []
        for name in registry.names():
            if getattr(registry.get(name), "launcher", None) is not None:
                continue  # distributed: its ranks run elsewhere (test_distributed_benchmarks.py)
            for case in cases(name, size):
                params.append((name, case))
                ids.append(f"{name}[{','.join(f'{k}={v}' for k, v in case.items())}]")
        metafunc.parametrize("bench_case", params, ids=ids)
    if "dist_case" in metafunc.fixturenames:
        from perfsuite.core import registry
        from benchmarks._grids import cases

        size = metafunc.config.getoption("--perfsuite-size")
        params = [(name, case) for name in registry.names() if getattr(registry.get(name), "launcher", None)
                  for case in cases(name, size)]
        metafunc.parametrize("dist_case", params,
                             ids=[f"{n}[{','.join(f'{k}={v}' for k, v in c.items())}]" for n, c in params])
