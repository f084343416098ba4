"""Commands run as a user would: from a fresh login shell's environment
(clean_env), and bounded in time, killed whole past the limit (run_whole):
its session (a launcher and its ranks, make and its compilers, qemu), not
the first process alone, which would leave the others running."""

import os
import signal
import subprocess
from pathlib import Path
from typing import List, Optional, Tuple


def clean_env() -> dict:
    """What a user's fresh login shell has; nothing of the caller's."""
    return {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin", "TERM": "dumb"}


def run_whole(argv: List[str], timeout: float, input: Optional[str] = None, **popen) -> Tuple[int, str, str]:
    """Its exit code (-SIGKILL past the timeout), stdout and stderr, as text;
    input, if given, on its stdin."""
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    with subprocess.Popen(
        argv, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **popen
    ) as proc:
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
            return proc.returncode, out, err
        except subprocess.TimeoutExpired:
            _kill_session(proc.pid)
            out, err = proc.communicate()
            return -signal.SIGKILL, out, err
        except BaseException:
            # Ctrl-C (KeyboardInterrupt), or a signal a caller turned into an
            # exception: in a session of its own, it no longer gets the
            # terminal's signal, so it goes with the caller.
            _kill_session(proc.pid)
            raise


def _kill_session(session: int) -> None:
    """SIGKILL to every process of the session, not its process group alone:
    Open MPI's launchers put each rank in a group of its own (setpgid), which
    killpg misses, and a rank left holding the output's pipe would keep the
    caller waiting for its end."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # After "(command)": state, parent, group, session.
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
