import torch

from perfsuite.measuring.saved import saved_tensor_bytes


def test_counts_each_saved_storage_once():
    x = torch.randn(1000, requires_grad=True)
    # sigmoid saves its output (4000 bytes); mul saves both inputs: x (4000) and the sigmoid output again.
    n = saved_tensor_bytes(lambda: (x * torch.sigmoid(x)).sum())
    assert n == 8000


def test_no_grad_saves_nothing():
    x = torch.randn(1000, requires_grad=True)
    with torch.no_grad():
        assert saved_tensor_bytes(lambda: torch.sigmoid(x) * x) == 0
