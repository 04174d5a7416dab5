import pytest

from perfsuite.core.config import RunConfig, resolve_device
from perfsuite.core.errors import ConfigError, DeviceUnavailable


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_time": 0}, "max_time"),
        ({"max_time": -3}, "max_time"),
        ({"target_rel_ci": 0}, "target_rel_ci"),
        ({"min_time": 5, "max_time": 1}, "min_time"),
        ({"min_samples": 0}, "min_samples"),
        ({"timing": "sometimes"}, "timing must be one of event, host"),
        ({"confidence": 1.5}, "confidence"),
    ],
)
def test_bad_config_names_the_field(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**kwargs)


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        RunConfig().max_time = 3


def test_device_resolution():
    import torch

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda:0" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="--device must be"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable, match="no CUDA device"):
            resolve_device("cuda:1")


@pytest.mark.parametrize("spec", ["cuda:abc", "cuda:-1", "cuda:"])
def test_a_misspelt_cuda_device_is_bad_input_on_any_machine(spec):
    from perfsuite.core.config import resolve_device
    from perfsuite.core.errors import ConfigError

    with pytest.raises(ConfigError, match="expected cuda:N"):
        resolve_device(spec)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"processes": 0}, "processes must be an integer"),
        ({"processes": 2.5}, "processes must be an integer"),
        ({"threads": 0}, "threads must be an integer"),
        ({"threads": True}, "threads must be an integer"),
        ({"cpus": ()}, "cpus must be a non-empty list"),
        ({"cpus": (0, 0)}, "cpus must be a non-empty list of distinct"),
        ({"cpus": (-1,)}, "cpus must be"),
    ],
)
def test_bad_worker_and_pinning_settings_name_the_field(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        RunConfig(**kwargs)


def test_worker_and_pinning_settings_default_to_the_budget_and_one_cpu_thread():
    from perfsuite.core.config import auto_processes

    cfg = RunConfig()
    assert (cfg.processes, cfg.cpus, cfg.threads) == (None, None, None)
    # Workers by default, as many as the budget allows: one per 2 s, 2 to 5; a short budget stays here.
    assert cfg.workers == 5 and RunConfig(max_time=4).workers == 3 and RunConfig(max_time=3.9).workers == 1
    assert [auto_processes(t) for t in (0.1, 1, 4, 5, 7, 60)] == [1, 1, 3, 3, 3, 5]  # never 2: t(1) = 12.7
    assert RunConfig(processes=1, max_time=60).workers == 1 and RunConfig(processes=8).workers == 8
    # One torch thread on the CPU unless asked (torch.utils.benchmark's default); CUDA keeps torch's own.
    assert cfg.threads_on("cpu") == 1 and cfg.threads_on("cuda:0") is None
    assert RunConfig(threads=2).threads_on("cpu") == 2
    assert RunConfig(cpus=[0, 1]).cpus == (0, 1)  # a list (from YAML or JSON) becomes a tuple
