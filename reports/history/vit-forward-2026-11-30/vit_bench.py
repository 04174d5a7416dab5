"""A ViT's eval forward over the repository's history (issue 49's ViT history, rerun): the
model built from each commit's vit_pytorch.vit.ViT with the same arguments and seed."""

import torch

import perfsuite


@perfsuite.workload(params={"batch_size": 4, "image": 64})
def vit_forward(batch_size: int, image: int, device: str):
    """vit_pytorch.vit.ViT (dim 256, depth 6, 8 heads, 8x8 patches): an eval forward under no_grad."""
    from vit_pytorch.vit import ViT

    torch.manual_seed(0)
    model = ViT(image_size=image, patch_size=8, num_classes=10, dim=256, depth=6, heads=8, mlp_dim=512)
    model = model.to(device).eval()
    x = torch.randn(batch_size, 3, image, image, device=device)

    def step():
        with torch.no_grad():
            model(x)

    return perfsuite.Step(step, items=batch_size, unit="images", model=model, inputs=(x,))
