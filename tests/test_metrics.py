import pytest
import torch

from perfsuite.training.evaluation import mar_at_k


def test_mar_hand_case():
    # Six 2-D codes, two classes. Class A points near +x, class B near +y, except a5 which
    # sits among the B codes.
    #   a0=(1,0) a1=(1,.1) a2=(1,-.1)  b3=(0,1) b4=(.1,1) a5=(.05,1)
    codes = torch.tensor([[1, 0], [1, 0.1], [1, -0.1], [0, 1], [0.1, 1], [0.05, 1]], dtype=torch.float32)
    labels = torch.tensor([0, 0, 0, 1, 1, 0])
    # k=2. Class A has 4 members (3 others each); class B has 2 (1 other each). Hits are divided
    # by min(k, others): the most a code can find.
    # a0: nearest a1, a2 -> 2 hits / min(2, 3).   a1: a0, a2 -> 2/2.   a2: a0, a1 -> 2/2.
    # b3: nearest a5 (angle .05) then b4 (.1) -> 1 hit / min(2, 1).
    # b4: a5 (.05 apart) and b3 -> 1/1.
    # a5: b4 and b3 -> 0 hits / 2.
    expected = (1 * 3 + 1 + 1 + 0) / 6
    assert mar_at_k(codes, labels, k=2) == pytest.approx(expected)


def test_mar_perfect_and_chunked():
    torch.manual_seed(0)
    centers = torch.randn(4, 16) * 10
    labels = torch.arange(4).repeat_interleave(25)
    codes = centers[labels] + 0.01 * torch.randn(100, 16)
    # Every neighbour is of the same class: 5 of the 5 possible found, the best score.
    assert mar_at_k(codes, labels, k=5) == pytest.approx(1.0)
    # A class smaller than k: its codes can find only the others of their class.
    small = torch.tensor([0, 0, 1, 1, 1, 1, 1, 1])
    assert mar_at_k(centers[small] + 0.01 * torch.randn(8, 16), small, k=5) == pytest.approx(1.0)
    noisy = torch.randn(100, 16)
    assert mar_at_k(noisy, labels, k=5, chunk=7) == pytest.approx(mar_at_k(noisy, labels, k=5, chunk=1000))


def test_mar_bad_input():
    with pytest.raises(ValueError, match="k must be"):
        mar_at_k(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), k=0)
    with pytest.raises(ValueError, match="N x D"):
        mar_at_k(torch.zeros(3), torch.zeros(3, dtype=torch.long))
