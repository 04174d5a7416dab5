"""ResNet inference (an eval forward), offered to variants: which of eager, int8, ONNX Runtime,
OpenVINO and torch.compile should serve this classifier, and at what batch size?

    perfsuite variants resnet_eval -p batch_size=1,8 --variants int8-dynamic,onnxruntime,openvino,compile

The weights are random (nothing is downloaded): every variant is held to the predictions of the fp32
model on held-out images, as MLPerf holds a submission to 99% of its FP32 reference. A trained
checkpoint would be loaded in the builder, and its labelled data scored in `evaluate`.
"""

import torch
import torchvision

import perfsuite

HELD_OUT = 64


@perfsuite.workload(params={"batch_size": [1, 8], "model": "resnet18", "image": 112})
def resnet_eval(batch_size: int, model: str, image: int, device: str):
    """A ResNet's eval forward pass on a batch of images (inference)."""
    torch.manual_seed(0)
    net = getattr(torchvision.models, model)(num_classes=10).to(device).eval()
    x = torch.randn(batch_size, 3, image, image, device=device)
    held = torch.randn(HELD_OUT // batch_size * batch_size or batch_size, 3, image, image, device=device)

    def evaluate(forward) -> dict:
        with torch.inference_mode():
            preds = [forward(held[i : i + batch_size]).argmax(-1) for i in range(0, len(held), batch_size)]
        return {"predictions": torch.cat(preds).tolist()}

    def step():
        with torch.inference_mode():
            net(x)

    return perfsuite.Step(step, items=batch_size, unit="images", model=net, inputs=(x,), evaluate=evaluate)
