"""pytest-benchmark front-end: options and perfsuite's fingerprint in machine_info."""


def pytest_addoption(parser):
    parser.addoption("--perfsuite-size", default="ci", choices=("ci", "cpu", "gpu"),
                     help="workload size of the benchmark tests (default ci)")
    parser.addoption("--perfsuite-device", default="auto", help="auto | cpu | cuda | cuda:N")


def pytest_benchmark_update_machine_info(config, machine_info):
    from perfsuite.env import fingerprint

    machine_info["perfsuite"] = fingerprint()


def pytest_generate_tests(metafunc):
    if "bench_case" in metafunc.fixturenames:
        from perfsuite import registry
        from benchmarks._grids import cases

        size = metafunc.config.getoption("--perfsuite-size")
        params, ids = [], []
        for name in registry.names():
            for case in cases(name, size):
                params.append((name, case))
                ids.append(f"{name}[{','.join(f'{k}={v}' for k, v in case.items())}]")
        metafunc.parametrize("bench_case", params, ids=ids)
