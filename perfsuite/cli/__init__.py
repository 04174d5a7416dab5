"""The command line: argparse and the console only, one module per command (app.py dispatches)."""

from perfsuite.cli.app import COMMANDS, EXIT_INTERNAL, main

__all__ = ["COMMANDS", "EXIT_INTERNAL", "main"]
