"""Imported first by the workers' fork server (perfsuite.measuring.workers.PRELOAD): a Ctrl-C
while the server imports torch ends it silently, at once.

The server's interpreter starts with Ctrl-C ignored (workers._start_server: multiprocessing
protects it only after its preload, and a Ctrl-C before printed a KeyboardInterrupt traceback
beside the command's quiet "interrupted", issue 51). Ignored through the preload, the server
would go on importing for seconds after the command ended; with the system's default action it
ends quietly, as the command does. preload.py, imported last, gives it Python's own handler.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_DFL)
