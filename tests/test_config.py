import pytest

from perfsuite.config import RunConfig, resolve_device
from perfsuite.errors import ConfigError, DeviceUnavailable


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
