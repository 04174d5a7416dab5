"""The user's model at inference, offered to variants (`perfsuite variants classify --variants ...`):
the Step names the model and its inputs, so perfsuite can rebuild the step from int8, compiled,
ONNX Runtime or OpenVINO versions of it, and an evaluation scores any of them on held-out data.
The file also declares a variant of the user's own: pruning half of each layer's weights."""

import copy

import torch
from myproj.model import Net

import perfsuite

HELD_OUT = 512


@perfsuite.variant("pruned-50")
def pruned(model):
    """Half of each Linear layer's weights zeroed by magnitude (unstructured L1 pruning)."""
    from torch.nn.utils import prune

    out = copy.deepcopy(model)
    for layer in out.modules():
        if isinstance(layer, torch.nn.Linear):
            prune.l1_unstructured(layer, "weight", amount=0.5)
            prune.remove(layer, "weight")
    return out


@perfsuite.workload(params={"batch_size": [1, 64], "width": 256})
def classify(batch_size: int, width: int, device: str):
    """The MLP classifier's forward pass (inference)."""
    model = Net(width).to(device).eval()
    x = torch.randn(batch_size, width, device=device)
    # Held-out inputs labelled by the fp32 model itself: the reference every variant is held to
    # (MLPerf's "99% of the FP32 reference"); a trained model would read its labelled data here.
    held_x = torch.randn(HELD_OUT, width, device=device)
    with torch.inference_mode():
        held_y = model(held_x).argmax(-1)

    def evaluate(forward) -> dict:
        with torch.inference_mode():
            preds = torch.cat([forward(held_x[i : i + batch_size]).argmax(-1) for i in range(0, HELD_OUT, batch_size)])
        return {"accuracy": float((preds == held_y).float().mean()), "predictions": preds.tolist()}

    def step():
        with torch.inference_mode():
            model(x)

    return perfsuite.Step(step, items=batch_size, unit="samples", model=model, inputs=(x,), evaluate=evaluate)
