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


# What a user's code (a step, check, hook or workload file) may raise that is its own failure, not
# the end of perfsuite: any Exception, and SystemExit (sys.exit in a step is a BaseException).
# KeyboardInterrupt is not among them: Ctrl-C stops the run.
USER_CODE_ERRORS = (Exception, SystemExit)


def exception_text(exc: BaseException) -> str:
    """`Type: message` of any exception, never raising: a user's exception whose __str__ raises
    (or returns no string) is named by its type. Not escaped here: the console writer
    (perfsuite.cli.console) and the files escape what they show."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except USER_CODE_ERRORS as inner:
        text = f"(its message cannot be shown: str() raised {type(inner).__name__})"
    return f"{name}: {text}" if text.strip() else name
