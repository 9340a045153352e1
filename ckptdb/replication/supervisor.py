"""Running Litestream as a supervised child process.

The child is started from the supervisor's own thread with ``PR_SET_PDEATHSIG`` =
SIGKILL (if this process dies, however it dies, the kernel ends the child too: nothing is
left running), in its own session (a Ctrl-C on the terminal reaches this process, which
then stops the child in order), with umask 077 and stdin closed. Output goes to a log file
in the private directory. If the child exits unexpectedly it is restarted after a back-off
that doubles from 0.5 s up to 30 s (reset after a minute of uptime). ``stop`` sends SIGTERM
to the child's own pid -- Litestream then finishes its last sync -- and SIGKILL after a
grace period.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_BACKOFF_START = 0.5
_BACKOFF_MAX = 30.0
_STABLE_SECONDS = 60.0


def _death_signal() -> Callable[[], None]:
    """A pre-exec hook asking the kernel to SIGKILL the child when its parent dies."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the context exit still stops the child
        return lambda: None

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return hook


class Supervisor:
    """Keeps one child process running until :meth:`stop`."""

    def __init__(self, argv: list[str], *, env: dict[str, str], log_path: str) -> None:
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.restarts = 0
        self.exits: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._spawn_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The pid of the running child, or None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def running(self) -> bool:
        """True while the child runs."""
        return self.pid is not None

    def start(self) -> None:
        """Start the child (and the thread that watches it)."""
        self._thread = threading.Thread(target=self._run, name="ckptdb-replicate", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._spawn_error is not None:
            raise self._spawn_error

    def _spawn(self) -> subprocess.Popen[bytes]:
        log = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            return subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                start_new_session=True,
                umask=0o077,
                preexec_fn=_death_signal(),  # noqa: PLW1509 -- only a prctl call, async-safe
                close_fds=True,
            )
        finally:
            os.close(log)

    def _run(self) -> None:
        backoff = _BACKOFF_START
        try:
            self._proc = self._spawn()
        except OSError as exc:
            self._spawn_error = exc
            self._started.set()
            return
        self._started.set()
        began = time.monotonic()
        while not self._stopping.is_set():
            proc = self._proc
            try:
                status = proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                continue
            if self._stopping.is_set():
                break
            self.exits.append(f"litestream exited with status {status}")
            if time.monotonic() - began > _STABLE_SECONDS:
                backoff = _BACKOFF_START
            if self._stopping.wait(backoff):
                break
            backoff = min(backoff * 2, _BACKOFF_MAX)
            with self._lock:
                if self._stopping.is_set():
                    break
                try:
                    self._proc = self._spawn()
                except OSError as exc:
                    self.exits.append(f"cannot restart litestream: {exc}")
                    continue
                self.restarts += 1
                began = time.monotonic()

    def kill_child(self) -> None:
        """SIGKILL the current child (tests and crash drills: it will be restarted)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)

    def stop(self, grace: float = 10.0) -> None:
        """Stop the child: SIGTERM to its pid, SIGKILL after ``grace`` seconds; idempotent."""
        with self._lock:
            self._stopping.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
            except ProcessLookupError:
                pass  # it exited on its own meanwhile: nothing left to stop
        if self._thread is not None:
            self._thread.join()

    def last_error(self) -> str | None:
        """The newest error Litestream logged, or the newest unexpected exit."""
        newest: str | None = None
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.path.getsize(self.log_path) - 65536))
                for raw in log.read().decode(errors="replace").splitlines():
                    if "level=ERROR" in raw or raw.startswith("ERROR") or "error:" in raw[:40]:
                        newest = raw.strip()
        except OSError:
            pass  # no log yet (the process never started): there is no error to report
        return newest or (self.exits[-1] if self.exits else None)
