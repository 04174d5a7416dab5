import torch
from myproj.model import Net

import perfsuite


def _agrees_with_float64(batch_size: int, width: int, device: str) -> None:
    """The model in fp32 computes what it computes in float64 (a correctness check)."""
    net = Net(width).to(device)
    x = torch.randn(batch_size, width, device=device)
    ref = Net(width).to(device).double()
    ref.load_state_dict(net.state_dict())
    torch.testing.assert_close(net(x).double(), ref(x.double()), rtol=1e-4, atol=1e-5)


@perfsuite.workload(params={"batch_size": [32, 128], "width": 256}, checks=_agrees_with_float64)
def tiny_mlp(batch_size: int, width: int, device: str):
    """A two-layer MLP training step."""
    model = Net(width).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch_size, width, device=device)
    y = torch.randint(0, 10, (batch_size,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return perfsuite.Step(step, items=batch_size, unit="samples")
