"""Training-step machinery shared by the training workloads: precision, schedule, checkpoints."""
