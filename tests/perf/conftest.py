"""pytest-benchmark front-end: options and perfsuite's fingerprint in machine_info."""


def pytest_addoption(parser, pluginmanager):
    parser.addoption(
        "--perfsuite-size",
        default="ci",
        choices=("ci", "cpu", "gpu"),
        help="workload size of the benchmark tests (default ci)",
    )
    # perfsuite's pytest plugin (perfsuite/frontends/pytest_plugin.py) adds the device and budget
    # options when perfsuite is installed; from a source tree on PYTHONPATH it is not, so register it
    # here (pytest_addoption is a historic hook: a plugin registered now still adds its options).
    if not pluginmanager.has_plugin("perfsuite"):
        from perfsuite.frontends import pytest_plugin

        pluginmanager.register(pytest_plugin, "perfsuite")


def pytest_generate_tests(metafunc):
    if "bench_case" in metafunc.fixturenames:
        from perfsuite.core import registry

        size = metafunc.config.getoption("--perfsuite-size")
        params, ids = [], []
        for name in registry.names():
            if getattr(registry.get(name), "launcher", None) is not None:
                continue  # distributed: its ranks run elsewhere (test_distributed_benchmarks.py)
            for case in registry.get(name).cases(size):  # the grid its file declares
                params.append((name, case))
                ids.append(f"{name}[{','.join(f'{k}={v}' for k, v in case.items())}]")
        metafunc.parametrize("bench_case", params, ids=ids)
    if "dist_case" in metafunc.fixturenames:
        from perfsuite.core import registry

        size = metafunc.config.getoption("--perfsuite-size")
        params = [
            (name, case)
            for name in registry.names()
            if getattr(registry.get(name), "launcher", None)
            for case in registry.get(name).cases(size)
        ]
        metafunc.parametrize(
            "dist_case", params, ids=[f"{n}[{','.join(f'{k}={v}' for k, v in c.items())}]" for n, c in params]
        )
