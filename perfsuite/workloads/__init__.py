"""Built-in workloads, one module per family; the registry imports them on first use."""

BUILTIN_MODULES = ("noop", "matmul", "autoencoder", "resnet", "mar", "checkpoint", "activation", "dataloader", "qwen", "ddp", "allreduce")
