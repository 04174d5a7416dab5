"""Variants: named transformations of a workload's model or step (precision, int8, compilers,
runtimes), each measured against the eager baseline on the gate's road and held to its accuracy.

registry: what a variant is, the built-ins' names and the user's declarations (`perfsuite.variant`);
builtin: the built-in transformations; apply: a variant applied to a built step, in a side process;
agreement: outputs and metrics against the baseline's. Every variant against eager is a job
(perfsuite.jobs.variants), its result a document kind (perfsuite.compare.variant_study).
"""
