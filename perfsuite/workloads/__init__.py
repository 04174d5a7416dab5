"""Built-in workloads, one module per family; the registry imports every module here on first use."""
