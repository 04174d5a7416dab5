"""The command line: argparse and the console only, one module per command. The entry point is
perfsuite.cli.app.main (app.py parses and dispatches); this package's own module imports nothing,
so a command module importing a sibling (`from perfsuite.cli import options`) makes no cycle."""
