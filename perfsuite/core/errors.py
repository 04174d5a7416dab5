"""User-facing errors: the CLI prints their message and exits non-zero, never a traceback."""


class PerfsuiteError(Exception):
    """Base class for every error caused by input or environment, not by a bug."""


class ConfigError(PerfsuiteError, ValueError):
    """A parameter, option or configuration value is wrong; the message names it."""


class DeviceUnavailable(PerfsuiteError):
    """The requested device does not exist on this machine."""


class RecordError(PerfsuiteError, ValueError):
    """A stored record or results file is corrupt, foreign or inconsistent."""


class Unsupported(PerfsuiteError):
    """This case cannot run here (e.g. fp16 training on CPU): a skip with a reason, not a failure."""


class StorageError(PerfsuiteError):
    """A result could not be written (disk full, a file-size limit, a folder that went away)."""


class WorkloadFileError(ConfigError):
    """A user's workload file (or an installed package's workloads) failed to import; the
    message carries their traceback."""
