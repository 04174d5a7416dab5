"""The console's side of the engine's events (perfsuite.run.execute.Events, perfsuite.suite.run.SuiteEvents):
what `run`, a suite, `pair` and `gate` print as each case starts, ends, fails or is skipped."""

from __future__ import annotations

from rich.text import Text

from perfsuite.core.record import Record
from perfsuite.measuring.workers import describe
from perfsuite.run.execute import Events
from perfsuite.suite.run import SuiteEvents


class RunEvents(Events):
    """Prints what happens to each case of a run; a progress bar for sweeps."""

    def __init__(self, console, total: int, progress=None) -> None:
        self.console, self.total, self.progress = console, total, progress
        self.task = progress.add_task("", total=total) if progress is not None else None

    def _advance(self) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)

    def start(self, case) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=case.label)
        else:
            self.console.print(Text(case.label))

    def done(self, case, record) -> None:
        self._advance()

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed: {case.label}: {failure['error']}", style="red"))
        self._advance()

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skipped: {case.label}: {reason}", style="yellow"))
        self._advance()

    def traced(self, case, trace, table) -> None:
        self.console.print(Text(f"trace: {trace}  top operators: {table}"))


class SuiteConsoleEvents(SuiteEvents):
    """Prints a suite's progress: its correctness checks, each entry's cases, what was refused."""

    def __init__(self, console) -> None:
        self.console = console

    def checks_started(self, workloads: list[str]) -> None:
        self.console.print(
            Text(
                f"correctness checks before timing ({', '.join(workloads)}; `checks: false` in the "
                "suite or --no-checks skips them)"
            ),
            highlight=False,
        )

    def check_done(self, result) -> None:
        self.console.print(Text(result.line(), style="" if result.ok else "bold red"), highlight=False)

    def refused(self, entry: str, why: str, todo: int, finished: int) -> None:
        self.console.print(Text(f"skip {entry} ({todo} case(s)): {why}", style="bold red"), highlight=False)
        if finished:
            self.console.print(
                Text(
                    f"warning {entry}: {finished} case(s) in this folder were measured before its "
                    "check failed; they stay, but the step they timed may be wrong",
                    style="yellow",
                ),
                highlight=False,
            )

    def entry_started(self, entry: str, kind: str, todo: int) -> None:
        pass

    def case_events(self, entry: str):
        return EntryEvents(self.console, entry)


class EntryEvents(Events):
    """One suite entry's cases, each line prefixed with the entry's name."""

    def __init__(self, console, entry: str) -> None:
        self.console, self.entry = console, entry

    def start(self, case) -> None:
        self.console.print(Text(f"{self.entry}: {case.label}"), highlight=False)

    def done(self, case, result) -> None:
        if isinstance(result, Record):
            line = describe(result)  # a case measured in worker processes: its between-process spread
        else:
            line = comparison_line(result)
        if line:
            self.console.print(Text(f"{self.entry}: {line}"), highlight=False)

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed {self.entry} {case.label}: {failure['error']}", style="red"))

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skip {self.entry} {case.label}: {reason}", style="yellow"))

    def traced(self, case, trace, table) -> None:
        pass


def comparison_line(result) -> str | None:
    """One line for a pair or a precision comparison."""
    if hasattr(result, "time_ratio"):
        ci = result.time_ratio_ci
        ci_txt = "" if ci is None else f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
        saved = (
            ""
            if result.saved_ratio is None
            else f"; saved for backward {result.a}/{result.b} = {result.saved_ratio:.2f}"
        )
        return f"time {result.a}/{result.b} = {result.time_ratio:.3f}{ci_txt} over {len(result.ratios)} pairs{saved}"
    if hasattr(result, "verdict"):
        return result.verdict()
    return None


def print_process_spread(console, records) -> None:
    """With --processes: how much of each case's spread is between processes."""
    for rec in records:
        if line := describe(rec):
            console.print(Text(line))
        if drift := rec.conditions.get("machine_drift"):
            console.print(
                Text(
                    f"{rec.label()}: the interval includes ±{drift['half_width']:.1%}, how far this "
                    f"machine's speed moved over its last {drift['runs']} runs of this case "
                    f"({drift['hours']:.1f} h; machine-speed log)"
                )
            )


class GateEvents(Events):
    """Prints what happens to each gated case; the verdicts themselves come after
    Benjamini-Hochberg has run across the cases."""

    def __init__(self, console, done=None) -> None:
        self.console, self.on_done = console, done

    def start(self, case) -> None:
        pass

    def done(self, case, result) -> None:
        if self.on_done is not None:
            self.on_done(case, result)

    def failed(self, case, failure) -> None:
        self.console.print(Text(f"failed: {case.label}: {failure['error']}", style="red"))

    def skipped(self, case, reason) -> None:
        self.console.print(Text(f"skipped {case.label}: {reason}", style="yellow"))

    def traced(self, case, trace, table) -> None:
        pass
