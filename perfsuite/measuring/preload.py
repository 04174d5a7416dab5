"""Imported last by the workers' fork server (perfsuite.measuring.workers.PRELOAD): everything the
server imported (torch, torchvision, scipy) is moved out of the garbage collector's reach.

A worker forked from the server shares those objects' pages with it until it writes to them; a
full collection in the worker (the runner collects before the budget starts) would touch every
one of them, and copying those pages cost 0.5 s of a 1 s slot here. Frozen, they are skipped.

Ctrl-C: Python's own handler again (the server started with it ignored, so that its imports
could not be interrupted: workers._start_server), so a worker forked from here is interrupted as
any process is.
"""

import gc
import signal

gc.freeze()
signal.signal(signal.SIGINT, signal.default_int_handler)
