import pytest

from perfsuite.measuring import nvtx


def test_noop_without_cuda_or_when_disabled(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_start", lambda name: calls.append(name) or 1)
    monkeypatch.setattr(nvtx, "nvtx_available", lambda: False)
    with nvtx.nvtx_range("x"):
        pass
    monkeypatch.setattr(nvtx, "nvtx_available", lambda: True)
    with nvtx.nvtx_range("x", enabled=False):
        pass
    assert calls == []


def test_process_wide_range_is_opened_and_closed_even_on_error(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(nvtx, "nvtx_available", lambda: True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_start", lambda name: calls.append(("start", name)) or 7)
    monkeypatch.setattr(torch.cuda.nvtx, "range_end", lambda handle: calls.append(("end", handle)))
    with pytest.raises(ZeroDivisionError):
        with nvtx.nvtx_range("matmul/timed"):
            raise ZeroDivisionError("inside the range")
    assert calls == [("start", "matmul/timed"), ("end", 7)]
