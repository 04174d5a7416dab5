"""The command line's entry point: parse, dispatch to one module per command, map errors to exit codes.

Exit status, one meaning each: 0 success; 1 a confirmed slowdown (`compare`, `gate`, `bisect`
naming a commit, `history` among the commits it measured) and nothing else; 2 bad input or environment (the message names the file, field
or parameter); 3 some cases failed (their reasons are stored; `amp` whose precisions disagree);
4 an internal error (a bug: the message names a log file with the traceback); 5 undecided: a
comparison (`compare`, `gate`, `bisect`'s confirmation) could not tell, and needs more time or a
quieter machine (perfsuite.stats.verdict); 130 interrupted (every case finished before Ctrl-C is
on disk); 143 and 129 stopped by SIGTERM or SIGHUP, which end a command as Ctrl-C does
(perfsuite.cli.stop).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from rich.text import Text

from perfsuite.cli.console import make_console, output_failure
from perfsuite.cli.parser import COMMAND_MODULES, build_parser
from perfsuite.cli.stop import Stopped, import_torch_whole, stopping_as_interrupt
from perfsuite.cli.stored import store_given, stored_run
from perfsuite.core.discover import discover, find_project, project_paths, workload_files
from perfsuite.core.errors import PerfsuiteError, exception_text
from perfsuite.core.text import printable
from perfsuite.measuring.system import hide_credentials
from perfsuite.storage.write import write_new_text

# Each command's one function, by the name it is called with.
COMMANDS = {m.NAME: m.command for m in COMMAND_MODULES}

# Commands that name workloads: the user's own are discovered before they run.
WORKLOAD_COMMANDS = {m.NAME for m in COMMAND_MODULES if getattr(m, "NAMES_WORKLOADS", False)}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The command line as given (main([...]) from a script, else the process's): what the crash
    # log quotes, never sys.argv, which belongs to whatever called main.
    given = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout is None:  # started with standard output closed (`>&-`): Python gives None
        if sys.stderr is not None:
            print("error: standard output is closed; perfsuite reports there", file=sys.stderr)
        return 2
    console, err = make_console(), make_console(stderr=True)
    with stopping_as_interrupt():
        return _dispatch(args, given, console, err)


def _dispatch(args, argv: list[str], console, err) -> int:
    try:
        if _uses_processes(args):
            from perfsuite.measuring.workers import start_server_soon

            start_server_soon(_needs_vision(args))  # its torch import overlaps this process's own, below
        if args.command in WORKLOAD_COMMANDS:
            import_torch_whole()  # before the user's files import it: a Ctrl-C there aborts the process
            discover(args.workload_paths)
        with store_given(args.store), stored_run(args, err) as run:
            code = run.exit(COMMANDS[args.command](args, console, run.recorder))
        return _console_outcome(console, err, code)
    except PerfsuiteError as exc:
        # Messages quote files' contents: shown, never obeyed by the terminal.
        # soft_wrap: an error stays one line in a log or a grep, however long its path
        err.print(Text("error: ", style="bold red") + Text(printable(str(exc))), soft_wrap=True)
        return 2
    except Stopped as exc:  # SIGTERM or SIGHUP, handled as Ctrl-C is (perfsuite.cli.stop)
        err.print(f"stopped by {exc.name}", highlight=False)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        return 130
    except BrokenPipeError:  # `perfsuite list | head`: the reader left; nothing is wrong with perfsuite
        _quiet_stdout()
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug: no traceback on the console, one in a log file
        log = _crash_log(exc, argv)
        err.print(Text("internal error: ", style="bold red") + Text(exception_text(exc)))
        err.print(Text(f"this is a perfsuite bug; the traceback is in {log}"))
        return EXIT_INTERNAL


EXIT_INTERNAL = 4


def _console_outcome(console, err, code: int) -> int:
    """The exit code once the command has finished: its own, unless standard output failed on the
    way (a full disk, /dev/full; what was measured is saved all the same), which is exit 2."""
    failed = output_failure(console)
    if failed is None:
        return code
    failure, dropped = failed
    if failure.errno == errno.EPIPE:  # `perfsuite list | head`: the reader left; nothing to say
        _quiet_stdout()
        return code or 2
    tail = [line for line in dropped.splitlines() if line.strip()][-3:]
    err.print(
        Text(
            f"error: standard output failed ({failure.strerror or failure}); what was measured is saved. "
            "The last lines it could not show:\n" + "\n".join(tail)
        )
    )
    return code or 2


def _uses_processes(args) -> bool:
    """Whether the command will fork worker or side processes (so their server may start now)."""
    if args.command in ("gate", "bisect", "why", "history"):
        return getattr(args, "slowdown", None) is None  # the gate's self-check times in this process
    if args.command == "run":
        if getattr(args, "plan", False):
            return False
        if getattr(args, "suite", None) or getattr(args, "config", None):
            return True
        from perfsuite.core.config import RunConfig

        return _run_workers(RunConfig, args) > 1
    return False


def _needs_vision(args) -> bool:
    """Whether the server should import torchvision for this command: not when the named workload
    is the project's own (`[tool.perfsuite]`) and none of its files mentions torchvision (a file of
    the user's model that imports it anyway pays the import in each process, as any module of
    theirs does); perfsuite's own workloads and suites keep it."""
    given = getattr(args, "workload", None)  # `run` takes several names, the rest one
    names = [given] if isinstance(given, str) else given
    if not names or not isinstance(names, list) or getattr(args, "suite", None) or getattr(args, "config", None):
        return True

    try:
        project = find_project(Path.cwd())
        files = [f for p in (project_paths(project) if project else []) for f in workload_files(p)]
        files += [f for p in (getattr(args, "workload_paths", None) or []) for f in workload_files(Path(p))]
        texts = [f.read_text(errors="replace") for f in files]
    except (PerfsuiteError, OSError):
        return True  # discovery will say what is wrong; the server keeps its full preload
    declares = all(any(f"def {name}(" in t for t in texts) for name in names)
    return not declares or any("torchvision" in t for t in texts)


def _run_workers(RunConfig, args) -> int:
    """The worker processes `perfsuite run`'s flags ask for (RunConfig.workers: auto from the budget)."""
    given = {"max_time": args.max_time, "processes": getattr(args, "processes", None)}
    return RunConfig(**{k: v for k, v in given.items() if v is not None}).workers


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's final flush into the closed pipe
    does not print a traceback of its own."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _crash_log(exc: BaseException, argv: list[str]) -> str:
    """Write the traceback where the user can find it and attach it to a bug report."""
    import tempfile
    import traceback
    from datetime import datetime, timezone

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    for folder in (Path.home() / ".cache" / "perfsuite" / "logs", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"perfsuite-crash-{stamp}-{os.getpid()}.log"
            # A new file only: in a shared /tmp the name could be a link planted by another user.
            # A store URL on the command line may carry its password: never into a log file.
            write_new_text(path, f"perfsuite {hide_credentials(' '.join(argv))}\n{text}")
            return str(path)
        except (OSError, PerfsuiteError):
            continue
    return "(no writable log folder; traceback lost)"


if __name__ == "__main__":
    sys.exit(main())
