"""How the worker and the starter end their process.

The Temporal SDK runs a Rust runtime with threads of its own. A process that
used it and then ends the usual way can abort while the interpreter shuts
down (``Fatal Python error: PyGILState_Release``, status 134) or hang there
for ever, after its work succeeded: the runtime's threads outlive Python
(https://github.com/temporalio/sdk-python/issues/300). Scripts, CI and
Kubernetes read the exit status, so the installed commands run ``main()``,
flush what they printed and leave with ``os._exit``, skipping that shutdown:
the documented status, every time. Code that calls ``main()`` itself (the
tests) gets the usual ``SystemExit`` instead.
"""

import io
import os
import sys
import traceback
from collections.abc import Callable
from typing import NoReturn

# Ctrl+C before the command handles it itself: 128 + SIGINT, as a shell says.
EXIT_INTERRUPTED = 130
# Its output went to a pipe whose reader stopped reading (`| head`): 128 +
# SIGPIPE, the status a shell gives a command that pipe ended.
EXIT_BROKEN_PIPE = 141


def exit_after(main: Callable[[], object]) -> NoReturn:
    """Run a command's ``main()`` and end the process with its status, skipping
    the interpreter's shutdown (which the Temporal SDK's threads can crash).

    Args:
        main: the command, called without arguments; a ``SystemExit`` it
            raises gives the status, any other error status 1.
    """
    # Each line reaches a pipe (a log collector, `| tee`) as it is printed.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    try:
        main()
        status = 0
    except SystemExit as stop:
        status = _status(stop)
    except KeyboardInterrupt:
        status = EXIT_INTERRUPTED
    except BrokenPipeError:
        # Nobody reads any more: nothing to say, and nowhere to say it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_BROKEN_PIPE
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            # What the command printed was lost: not a success to report.
            if stream is sys.stdout and status == 0:
                status = EXIT_BROKEN_PIPE
        except (OSError, ValueError):
            pass  # nowhere left to write to
    os._exit(status)


def _status(stop: SystemExit) -> int:
    """The status, and the message, Python itself would give a SystemExit."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1
