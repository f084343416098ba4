"""Commands run as a user would: from a fresh login shell's environment
(clean_env), and bounded in time, killed whole past the limit (run_whole):
its session (a launcher and its ranks, make and its compilers, qemu), not
the first process alone, which would leave the others running."""

import contextlib
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Iterator, List, Optional, Tuple


def clean_env() -> dict:
    """What a user's fresh login shell has; nothing of the caller's."""
    return {"HOME": os.environ.get("HOME", "/"), "PATH": "/usr/bin:/bin", "TERM": "dumb"}


def run_whole(argv: List[str], timeout: float, input: Optional[str] = None, **popen) -> Tuple[int, str, str]:
    """Its exit code (-SIGKILL past the timeout), stdout and stderr, as text;
    input, if given, on its stdin."""
    if input is not None:
        popen["stdin"] = subprocess.PIPE
    return _in_session(argv, timeout, input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def run_in_session(argv: List[str], capture: bool = False, **popen) -> Tuple[int, Optional[str], Optional[str]]:
    """A command as run_whole runs it, with no time limit, its output shown
    unless captured: a Spack install or module refresh writing into the
    prefix, which a stop (a cancelled job, `kill`) must not leave running
    once onestack, and with it its lock on the prefix, is gone. In a session
    of its own a terminal is not its controlling one: a program that asks
    its stdin's terminal for its foreground group (Spack's build log) must
    get another stdin (stdin=subprocess.DEVNULL)."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} if capture else {}
    return _in_session(argv, None, None, **pipes, **popen)


def _in_session(
    argv: List[str], timeout: Optional[float], input: Optional[str], **popen
) -> Tuple[int, Optional[str], Optional[str]]:
    with stopped_as_exit(), _Held() as starting:
        proc = subprocess.Popen(argv, text=True, start_new_session=True, **popen)
        with proc:
            try:
                starting.release()
                out, err = proc.communicate(input=input, timeout=timeout)
                return proc.returncode, out, err
            except subprocess.TimeoutExpired:
                _kill_session(proc.pid)
                out, err = proc.communicate()
                return -signal.SIGKILL, out, err
            except BaseException:
                # Ctrl-C, SIGTERM, SIGHUP (stopped_as_exit): in a session of
                # its own, it no longer gets the signals its caller's group
                # gets, so it goes with the caller.
                _kill_session(proc.pid)
                raise


class _Held:
    """Ctrl-C and the stop signals held while a command's session is not, or
    only half, in hand: raised inside Popen (after its fork, before it
    returns) or before the `try` that ends the session, one would leave the
    session running, its pid unknown; raised inside _kill_session, it would
    leave the processes not killed yet. It is raised at release(), or at the
    block's end; within an outer such block (finished_whole), it is handed to
    that block, raised at its end. Signals reach the main thread only:
    elsewhere nothing is held."""

    current: Optional["_Held"] = None

    def __init__(self):
        self.signum: Optional[int] = None
        self.outer: Optional["_Held"] = None
        self.interrupt = None  # SIGINT's handler before, where this block replaced it

    def __enter__(self) -> "_Held":
        if threading.current_thread() is threading.main_thread():
            self.outer, _Held.current = _Held.current, self
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self.interrupt = signal.signal(signal.SIGINT, self.hold)
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc is None or _Held.current is not self:  # released already: what it held was raised then
            self.release()
            return
        # The block's own error goes on, the signal said with it: raised over
        # it, the signal would hide what the block could not do (a cluster
        # not fully removed, its leftovers listed).
        held, self.signum = self.signum, None
        self.release()
        if held is not None:
            exc.add_note(f"(stopped by signal {held} meanwhile)")

    def hold(self, signum, frame) -> None:
        self.signum = self.signum or signum

    def release(self) -> None:
        if _Held.current is not self:
            return
        _Held.current = self.outer
        if self.interrupt is not None:
            signal.signal(signal.SIGINT, self.interrupt)
        if self.signum is not None and self.outer is not None:
            self.outer.hold(self.signum, None)
            return
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise Stopped(self.signum)


def _kill_session(session: int) -> None:
    """SIGKILL to every process of the session, not its process group alone:
    Open MPI's launchers put each rank in a group of its own (setpgid), which
    killpg misses, and a rank left holding the output's pipe would keep the
    caller waiting for its end."""
    with _Held():
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                # After "(command)": state, parent, group, session.
                if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == session:
                    os.kill(int(stat.parent.name), signal.SIGKILL)
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as an interrupt: pytest ends the run on it
    (running its fixtures' teardown), where a SystemExit inside a test would
    fail that test alone and go on; `python -m onestack.cluster` exits with
    128 + the signal, as the signal itself would have it."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def stopped_as_exit() -> Iterator[None]:
    """SIGTERM and SIGHUP (a cancelled CI job, `timeout`, a closed terminal)
    end Python without running its `except` and `finally` blocks: within
    this block they raise Stopped instead, so that what was made is removed
    (a cluster) or ended (a command in a session of its own); a second one
    is ignored, not to stop that removal half-way. A signal ignored already
    (nohup's SIGHUP) stays ignored; within an outer such block, the outer's
    handler stays, which leaves the signals ignored until its end."""
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    armed = [s for s, handler in before.items() if handler not in (signal.SIG_IGN, None, _stop)]
    if not armed or threading.current_thread() is not threading.main_thread():  # signals reach it only
        yield
        return
    for sig in armed:
        signal.signal(sig, _stop)
    try:
        yield
    finally:
        for sig in armed:
            signal.signal(sig, before[sig])


@contextlib.contextmanager
def finished_whole() -> Iterator[None]:
    """A block that must finish once begun (a cluster's removal): Ctrl-C and
    the stop signals that reach it are held, and raised at its end (as
    Stopped or KeyboardInterrupt)."""
    with stopped_as_exit(), _Held():
        yield


def _stop(signum, frame):
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if _Held.current is not None:
        _Held.current.hold(signum, frame)
        return
    raise Stopped(signum)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
