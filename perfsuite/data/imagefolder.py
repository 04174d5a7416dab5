"""An image-folder dataset (class sub-folders, PNG and JPEG decoded for real) with torchvision
v2 augmentations, and the generated CIFAR-like / ImageNet-like folders used without a path."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfsuite.core.errors import ConfigError
from perfsuite.storage import write

EXTENSIONS = (".png", ".jpg", ".jpeg")


@dataclass(frozen=True)
class Generated:
    name: str
    side: int
    count: int
    classes: int
    ext: str


# Small enough to generate in seconds on 2 cores, large enough for several batches per epoch.
GENERATED = {
    "cifar-like": Generated("cifar-like", 32, 2560, 10, ".png"),
    "imagenet-like": Generated("imagenet-like", 224, 512, 8, ".jpg"),
}
_MARKER = ".complete"


def generated_folder(kind: str, cache_dir: Path, count: int | None = None) -> Path:
    """The folder for `kind`, generated once into `cache_dir` (a marker file is written last, so
    an interrupted generation is redone, never half-used)."""
    from PIL import Image

    spec = GENERATED[kind]
    count = count or spec.count
    root = Path(cache_dir) / f"{kind}-{count}-v1"
    if (root / _MARKER).exists():
        return root
    rng = np.random.default_rng(0)
    for i in range(count):
        cls = root / f"class_{i % spec.classes:02d}"
        write.make_dir(cls, "image folder")
        # Smooth noise compresses like a photo more than white noise does.
        small = rng.integers(0, 256, size=(spec.side // 4 or 1, spec.side // 4 or 1, 3), dtype=np.uint8)
        # (Pillow sets its module-level constants with setattr, which its type hints do not declare)
        img = Image.fromarray(small).resize((spec.side, spec.side), Image.BILINEAR)  # type: ignore[attr-defined]
        with write.atomic(cls / f"{i:06d}{spec.ext}") as fh:
            img.save(fh, format="JPEG", quality=90) if spec.ext == ".jpg" else img.save(fh, format=spec.ext[1:].upper())
    write.write_text(root / _MARKER, "ok\n")
    return root


def scan(root: str | os.PathLike) -> tuple[list[Path], list[int], list[str]]:
    """Image files and class indices under `root`; errors name the path."""
    root = Path(root)
    if not root.exists():
        raise ConfigError(f"parameter 'dataset': {root} does not exist")
    if not root.is_dir():
        raise ConfigError(f"parameter 'dataset': {root} is not a folder")
    classes = sorted(d.name for d in root.iterdir() if d.is_dir())
    files, labels = [], []
    for idx, name in enumerate(classes):
        for f in sorted((root / name).iterdir()):
            if f.suffix.lower() in EXTENSIONS:
                files.append(f)
                labels.append(idx)
    if not files:
        raise ConfigError(f"parameter 'dataset': {root} holds no PNG or JPEG images in class sub-folders")
    return files, labels, classes


class ImageFolderDataset:
    """Decodes each image on access (the work a DataLoader's workers do) and transforms it."""

    def __init__(self, root: str | os.PathLike, transform=None) -> None:
        self.files, self.labels, self.classes = scan(root)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        # Pillow decodes: torchvision's own image decoders are deprecated as of 0.29.
        from PIL import Image, UnidentifiedImageError
        from torchvision.transforms.v2.functional import pil_to_tensor

        path = self.files[i]
        try:
            with Image.open(path) as im:
                img = pil_to_tensor(im.convert("RGB"))
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise ConfigError(f"cannot decode image {path}: {exc}") from None
        if self.transform is not None:
            img = self.transform(img)
        return img, self.labels[i]


def train_transform(side: int):
    """Random crop with padding, horizontal flip, float conversion and normalisation."""
    import torch
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.RandomCrop(side, padding=side // 8),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
