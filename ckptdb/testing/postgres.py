"""A throwaway PostgreSQL server for tests: a cluster of its own in a directory of its own,
reachable only through a Unix socket in that directory, stopped by its own process id.

>>> from ckptdb.testing.postgres import PostgresServer
>>> with PostgresServer() as server:                      # doctest: +SKIP
...     url = server.create_database("app")               # postgresql://postgres@/app?host=...
...     server.crash()                                     # as `pg_ctl stop -m immediate`
...     server.start()                                     # recovers from its WAL

The server binaries (``initdb``, ``postgres``, ``pg_isready``, ``createdb``) are found in
``$CKPTDB_PG_BINDIR``, else beside ``postgres`` on the ``PATH``, else in the newest
``/usr/lib/postgresql/*/bin``. PostgreSQL refuses to run as root: started by root, the
cluster belongs to the ``postgres`` system user (the directory is handed to it) and the
processes run as that user. Nothing listens on TCP (``listen_addresses=''``); the socket
directory is private to the server's user (root reaches it too), and authentication is
``trust`` inside it. Durability settings are PostgreSQL's defaults (``fsync``,
``synchronous_commit`` on): a test that kills the server tests the real thing.

Only the standard library and the server's own programs: no driver is needed to start,
check or stop it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

#: Every cluster listens on this port number inside its own socket directory (the number
#: only names the socket file there), so clusters never collide.
PORT = 5432

#: The programs a cluster needs, all from one server installation.
PROGRAMS = ("initdb", "postgres", "pg_isready", "createdb")


class PostgresServerError(RuntimeError):
    """The throwaway server could not be found, initialized, started or stopped (the
    message says which and quotes the server's log)."""


def find_bindir() -> Path:
    """The directory of the server programs (see the module docstring)."""
    candidates: list[Path] = []
    if env := os.environ.get("CKPTDB_PG_BINDIR"):
        candidates.append(Path(env))
    if found := shutil.which("postgres"):
        candidates.append(Path(found).resolve().parent)
    installed = Path("/usr/lib/postgresql")
    if installed.is_dir():
        versions = [p for p in installed.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: -int(p.name))]
    for bindir in candidates:
        if all((bindir / name).is_file() for name in PROGRAMS):
            return bindir
    raise PostgresServerError(
        "no PostgreSQL server programs found (initdb, postgres, pg_isready, createdb): "
        "install the server (Debian: `apt-get install postgresql`) or set "
        "CKPTDB_PG_BINDIR to the directory that holds them"
    )


@dataclass(frozen=True)
class _Owner:
    """Who the server runs as: the ``postgres`` system user when started by root (the
    server refuses root), else whoever runs this."""

    user: str | None
    uid: int
    gid: int

    @classmethod
    def choose(cls) -> _Owner:
        if os.geteuid() != 0:
            return cls(None, os.geteuid(), os.getegid())
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            raise PostgresServerError(
                "running as root, and PostgreSQL refuses root: create a `postgres` system "
                "user (the Debian package does) or run the tests as another user"
            ) from None
        return cls("postgres", entry.pw_uid, entry.pw_gid)

    def hand_over(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.uid, self.gid)


class PostgresServer:
    """One throwaway cluster (see the module docstring). ``directory``: where it lives
    (made, and removed by :meth:`close`, when not given); it must be short enough for a
    Unix socket path (about 100 characters)."""

    def __init__(self, directory: str | Path | None = None, *, bindir: Path | None = None):
        self.bindir = bindir or find_bindir()
        self._owner = _Owner.choose()
        self._made_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="ckpg-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.data = self.directory / "data"
        self.socket_dir = self.directory / "socket"
        self.log_path = self.directory / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        """Initialize the cluster (the first time) and start its server; return once it
        accepts connections. A cluster that was crashed recovers from its WAL here."""
        if self.running:
            return
        if not (self.data / "PG_VERSION").is_file():
            self._initdb()
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        self._owner.hand_over(self.socket_dir)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the server keeps writing to it
        try:
            self.process = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D",
                    str(self.data),
                    "-k",
                    str(self.socket_dir),
                    "-p",
                    str(PORT),
                    "-c",
                    "listen_addresses=",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=64MB",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self._owner.user,
                start_new_session=True,  # a Ctrl-C in the test runner is not the server's
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise PostgresServerError(
                    f"the PostgreSQL server exited at start (status {code}): {self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise PostgresServerError(
                    f"the PostgreSQL server did not accept connections in {timeout:.0f} s: "
                    f"{self._log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> None:
        """Shut the server down cleanly (a *fast* shutdown: open sessions are ended,
        committed work checkpointed) and wait for its process to exit."""
        self._signal(signal.SIGINT, timeout)

    def crash(self, timeout: float = 60.0) -> None:
        """Stop the server the way ``pg_ctl stop -m immediate`` does (SIGQUIT: every
        process exits at once, nothing is flushed or checkpointed); the next :meth:`start`
        runs crash recovery."""
        self._signal(signal.SIGQUIT, timeout)

    def close(self) -> None:
        """Stop the server and, when this object made the directory, remove it."""
        try:
            self.stop()
        finally:
            if self._made_directory:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what it serves ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the server process this object started is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id of the server (the postmaster), or None when it is not running."""
        return self.process.pid if self.running and self.process is not None else None

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` on this server (through its socket)."""
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={PORT}"

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        self._run("createdb", "-h", str(self.socket_dir), "-p", str(PORT), "-U", "postgres", name)
        return self.url(name)

    # -- internals -----------------------------------------------------------------------

    def _initdb(self) -> None:
        self.data.mkdir(mode=0o700, exist_ok=True)
        self._owner.hand_over(self.directory)
        self._owner.hand_over(self.data)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-instructions",
        )  # fmt: skip

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [str(self.bindir / program), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            user=self._owner.user,
            cwd=self.directory,
            check=False,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode(errors="replace").strip()
            raise PostgresServerError(f"{program} failed (status {done.returncode}): {output}")

    def _ready(self) -> bool:
        done = subprocess.run(
            [str(self.bindir / "pg_isready"), "-q", "-h", str(self.socket_dir), "-p", str(PORT)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return done.returncode == 0

    def _signal(self, signum: signal.Signals, timeout: float) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signum)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                # Whatever is left is this server's own process group (start_new_session).
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.process = None

    def _log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return " | ".join(text.strip().splitlines()[-lines:]) or "(the server log is empty)"
