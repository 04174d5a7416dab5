"""Distributed cases on PyTorch's own engine: torch.distributed, DDP, torchrun (issue 15).

A distributed workload (`ddp`, `allreduce`) carries a `launcher` (Workload.launcher), which
perfsuite.run.execute.run_cases calls instead of the one-process runner:

- launch.py, in the process that runs the suite: writes the case as a job file and starts its
  ranks with `python -m torch.distributed.run --standalone --nproc-per-node N -m
  perfsuite.distributed JOBDIR` (gloo on CPU, NCCL on CUDA), with a timeout; rank 0 writes
  the case's one record, which comes back; a rank that raises, crashes or hangs is the case's
  failure with its reason (which rank, at which stage, its error). When perfsuite itself was
  started by torchrun on several nodes (`srun torchrun ... -m perfsuite run --suite FILE`),
  the cases whose world matches run on that world instead (attach.py).
- rank.py, in every rank: init_process_group, the workload's step built as usual (the ddp
  workload wraps the model of perfsuite.training.setup in DistributedDataParallel), timed by
  the normal runner (runner.time_case) with a clock that starts every block at a barrier and
  makes every rank take the same decisions (each reading is the slowest rank's), then the
  per-rank samples gathered to rank 0, which writes one record: per-rank medians in `extra`,
  the slowest rank's samples as `samples_s`, global throughput (`work` counts all ranks).
- comm.py: the communication share of one profiled step (torch.profiler): time in collectives
  against compute, and how much of it DDP overlapped with compute.
"""
