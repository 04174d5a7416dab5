import torch
from models.efficientnet import EfficientNetB0

import perfsuite


@perfsuite.workload(params={"batch_size": 4})
def cifar_eval(batch_size: int, device: str):
    """EfficientNetB0 (this repository's) forward in eval mode on a CIFAR-sized batch."""
    torch.manual_seed(0)
    model = EfficientNetB0().to(device).eval()
    x = torch.randn(batch_size, 3, 32, 32, device=device)

    def step():
        with torch.no_grad():
            model(x)

    return perfsuite.Step(step, items=batch_size, unit="images")
