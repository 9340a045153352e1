"""A conformance kit for host stores: checks that a store keeps the
:class:`~ckptdb.host_store.HostStore` contract, for the stores ckptdb ships and for the
one a host writes.

Give it a factory that returns a **new, empty store** on every call (its own directory,
database file, bucket prefix, ...); a check may call it more than once, and a store
with a ``close()`` method is closed when the check is done with it. Run every check and
read the report:

>>> import itertools, tempfile
>>> from ckptdb.host_store import FileHostStore
>>> from ckptdb.testing.host_store import run_conformance
>>> with tempfile.TemporaryDirectory() as tmp:
...     numbers = itertools.count()
...     report = run_conformance(lambda: FileHostStore(f"{tmp}/store-{next(numbers)}"))
>>> report.ok, len(report.results)
(True, 6)

``report.raise_for_failures()`` raises one AssertionError listing every failed check;
``print(report)`` shows one line per check. Under pytest, run each check as its own test
(a check raises :class:`ConformanceFailure`, an AssertionError, when the store breaks the
contract)::

    import pytest
    from ckptdb.testing.host_store import CHECKS

    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    def test_my_store_conforms(check, tmp_path):
        numbers = iter(range(100))
        check(lambda: MyStore(tmp_path / f"s{next(numbers)}"))

What is checked: round trips (empty bytes, every byte value, a few MiB); locations are
strings the kit never looks inside, distinct for distinct bytes, each still valid after
later puts; a location the store does not hold raises ``location_not_found`` and a string
it never returned a typed error; concurrent puts and gets from threads all round-trip; the
same bytes put twice give locations that both return them; bad keys and non-bytes data are
refused with typed errors, and unusual but valid keys (path-like, Unicode, long) work.
The kit imports nothing outside the standard library and ckptdb: no pytest at import time.
"""

from __future__ import annotations

import random
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from .. import errors
from ..host_store.protocol import MAX_KEY_CHARS, MAX_LOCATION_CHARS, HostStore

#: Makes a new, empty store on every call.
StoreFactory = Callable[[], HostStore]
#: A check: runs against stores from the factory, returns a one-line note on success and
#: raises ConformanceFailure when the store breaks the contract.
Check = Callable[[StoreFactory], str]

#: Threads and puts per thread of the concurrency check.
THREADS = 8
PUTS_PER_THREAD = 8
#: How long the concurrency check waits for its threads (seconds) before calling it a hang.
THREAD_TIMEOUT = 120.0
LARGE_SIZE = 3 * 1024 * 1024 + 17


class ConformanceFailure(AssertionError):
    """A store broke the host store contract; the message says which rule and how."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check."""

    name: str
    passed: bool
    #: On success what was checked (and any choice the store made, e.g. whether the same
    #: bytes gave the same location); on failure what went wrong.
    detail: str


@dataclass(frozen=True)
class ConformanceReport:
    """Every check's result, in the order they ran."""

    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """The checks that failed."""
        return tuple(r for r in self.results if not r.passed)

    def raise_for_failures(self) -> None:
        """Raise ConformanceFailure listing every failed check (nothing when all passed)."""
        if not self.ok:
            raise ConformanceFailure(
                "the store breaks the host store contract:\n"
                + "\n".join(f"- {r.name}: {r.detail}" for r in self.failures)
            )

    def __str__(self) -> str:
        return "\n".join(
            f"{'PASS' if r.passed else 'FAIL'} {r.name}: {r.detail}" for r in self.results
        )


# --- helpers -------------------------------------------------------------------------


@contextmanager
def _store(make_store: StoreFactory) -> Iterator[HostStore]:
    store = make_store()
    if not isinstance(store, HostStore):
        raise ConformanceFailure(
            f"the factory returned {type(store).__name__}, which has no put/get methods"
        )
    try:
        yield store
    finally:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def _put(store: HostStore, data: bytes, key: str) -> str:
    location = store.put(data, key=key)
    if not isinstance(location, str):
        raise ConformanceFailure(
            f"put(key={key[:40]!r}) returned {type(location).__name__}, not a str location"
        )
    if not location or len(location) > MAX_LOCATION_CHARS or "\x00" in location:
        raise ConformanceFailure(
            f"put(key={key[:40]!r}) returned {location[:80]!r}: a location must be a non-empty "
            f"str of at most {MAX_LOCATION_CHARS} characters without NUL"
        )
    return location


def _expect_bytes(store: HostStore, location: str, data: bytes, what: str) -> None:
    try:
        got = store.get(location)
    except errors.CkptdbError as exc:
        raise ConformanceFailure(
            f"get() of {what} raised {type(exc).__name__} (code {exc.code!r}: {exc!s:.200}); "
            "every location put returned must stay valid"
        ) from exc
    if not isinstance(got, bytes):
        raise ConformanceFailure(f"get() of {what} returned {type(got).__name__}, not bytes")
    if got != data:
        raise ConformanceFailure(
            f"get() of {what} returned {len(got)} bytes that differ from the {len(data)} "
            f"put (first difference at byte {_first_difference(got, data)})"
        )


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _expect_error(
    call: Callable[[], object],
    expected: tuple[type[errors.CkptdbError], ...],
    what: str,
    *,
    exact_code: bool = True,
) -> None:
    """``call()`` must raise one of ``expected`` with a message -- and, when ``exact_code``,
    with that class's own code (programs branch on codes; a subclass must keep it)."""
    names = " or ".join(f"{cls.__name__} (code {cls.code!r})" for cls in expected)
    try:
        value = call()
    except expected as exc:
        if exact_code and exc.code not in {cls.code for cls in expected}:
            raise ConformanceFailure(
                f"{what} raised {type(exc).__name__} with code {exc.code!r}, expected {names}"
            ) from exc
        if not str(exc).strip():
            raise ConformanceFailure(
                f"{what} raised {type(exc).__name__} with an empty message"
            ) from exc
        return
    except Exception as exc:
        code = f" with code {exc.code!r}" if isinstance(exc, errors.CkptdbError) else ""
        raise ConformanceFailure(
            f"{what} raised {type(exc).__name__}({exc!s:.200}){code}, expected {names}"
        ) from exc
    shown = f"{len(value)} bytes" if isinstance(value, bytes) else f"{value!r:.80}"
    raise ConformanceFailure(f"{what} returned {shown} instead of raising {names}")


def _untyped(store: HostStore) -> Any:
    """The store, for calls that pass it wrong types on purpose."""
    return store


def _payload(seed: int, size: int) -> bytes:
    # Reproducible test bytes, not secrets: a failure names the same payload every run.
    return random.Random(seed).randbytes(size)  # noqa: S311 - test data, not crypto


# --- the checks ----------------------------------------------------------------------


def check_round_trip(make_store: StoreFactory) -> str:
    """Bytes come back exactly: empty, one byte, every byte value, a few MiB; twice each."""
    cases = {
        "empty bytes": b"",
        "one NUL byte": b"\x00",
        "every byte value": bytes(range(256)),
        f"{LARGE_SIZE} random bytes": _payload(14, LARGE_SIZE),
    }
    with _store(make_store) as store:
        locations = {
            what: _put(store, data, f"round-trip-{i}")
            for i, (what, data) in enumerate(cases.items())
        }
        for _ in range(2):
            for what, data in cases.items():
                _expect_bytes(store, locations[what], data, what)
    return f"{len(cases)} payloads up to {LARGE_SIZE} bytes round-trip"


def check_locations_are_opaque(make_store: StoreFactory) -> str:
    """Distinct bytes get distinct locations, all valid after later puts, even under one key
    (the key is a label, not an identity). The kit only stores and compares locations."""
    payloads = [f"version {i}".encode() * (i + 1) for i in range(6)]
    with _store(make_store) as store:
        locations = [_put(store, data, "same-label") for data in payloads]
        if len(set(locations)) != len(locations):
            raise ConformanceFailure(
                "different bytes put under one key got the same location: the key must not "
                "be the identity (a later put would replace an earlier one)"
            )
        for i, (location, data) in enumerate(zip(locations, payloads, strict=True)):
            _expect_bytes(store, location, data, f"put #{i} under one key, after later puts")
    return f"{len(payloads)} puts under one key: {len(payloads)} distinct, valid locations"


def check_missing_location(make_store: StoreFactory) -> str:
    """A location the store does not hold raises location_not_found; anything it could
    never have returned raises location_not_found or invalid_location. The unknown location
    is one a second store from the factory returned: stores from the factory must not share
    their contents."""
    with _store(make_store) as first:
        location = _put(first, b"held by the first store only", "missing-check")
    with _store(make_store) as second:
        _expect_error(
            lambda: second.get(location),
            (errors.LocationNotFoundError,),
            "get() on a fresh store of a location another store returned",
        )
        strings = [
            "",
            "no-such-location",
            "../x",
            "/etc/passwd",
            "a\x00b",
            "x" * 5000,
            "ckptdb:",
            "\u2603",
        ]
        for text in strings:
            _expect_error(
                partial(second.get, text),
                (errors.LocationNotFoundError, errors.InvalidLocationError),
                f"get({text[:20]!r}) on an empty store",
            )
        for thing in (None, b"bytes", 7):
            _expect_error(
                partial(_untyped(second).get, thing),
                (errors.InvalidLocationError,),
                f"get() of a {type(thing).__name__}",
            )
    return f"an unknown location and {len(strings) + 3} foreign values raise typed errors"


def check_concurrent_puts(make_store: StoreFactory) -> str:
    """Puts from many threads at once (distinct and shared bytes) all round-trip, then
    concurrent gets return them."""
    failures: list[str] = []
    results: dict[tuple[int, int], tuple[str, bytes]] = {}
    lock = threading.Lock()

    with _store(make_store) as store:
        start = threading.Barrier(THREADS, timeout=THREAD_TIMEOUT)

        def putter(t: int) -> None:
            try:
                start.wait()
                for i in range(PUTS_PER_THREAD):
                    # Every fourth put is the same bytes in every thread (duplicate puts
                    # racing each other); the others are unique to their thread.
                    data = b"shared bytes" if i % 4 == 0 else _payload(t * 1000 + i, 512 + i)
                    location = _put(store, data, f"thread-{t}/put-{i}")
                    with lock:
                        results[(t, i)] = (location, data)
            except Exception as exc:
                # Reported by the check below (the main thread cannot catch it).
                with lock:
                    failures.append(f"thread {t}: {type(exc).__name__}: {exc!s:.200}")

        _run_threads(putter)
        if failures:
            raise ConformanceFailure("concurrent puts failed: " + "; ".join(failures[:5]))
        by_location: dict[str, bytes] = {}
        for (t, i), (location, data) in sorted(results.items()):
            if by_location.setdefault(location, data) != data:
                raise ConformanceFailure(
                    f"concurrent puts of different bytes got the same location "
                    f"(thread {t}, put {i}): one of them is lost"
                )
        items = sorted(results.values())

        def getter(t: int) -> None:
            try:
                for location, data in items[t::THREADS]:
                    _expect_bytes(store, location, data, "a location put by another thread")
            except Exception as exc:
                # Reported by the check below (the main thread cannot catch it).
                with lock:
                    failures.append(f"thread {t}: {type(exc).__name__}: {exc!s:.200}")

        _run_threads(getter)
        if failures:
            raise ConformanceFailure("concurrent gets failed: " + "; ".join(failures[:5]))
    return f"{THREADS} threads x {PUTS_PER_THREAD} puts, then concurrent gets, all round-trip"


def _run_threads(target: Callable[[int], None]) -> None:
    threads = [
        threading.Thread(target=target, args=(t,), name=f"conformance-{t}", daemon=True)
        for t in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT)
    hung = [t.name for t in threads if t.is_alive()]
    if hung:
        raise ConformanceFailure(
            f"{len(hung)} threads did not finish within {THREAD_TIMEOUT:.0f} s (a deadlock?)"
        )


def check_same_bytes_twice(make_store: StoreFactory) -> str:
    """The same bytes put twice under one key, and again under another key: every location
    returned is valid. Whether they are equal is the store's choice; the note says which."""
    data = b"the same bytes, put more than once"
    with _store(make_store) as store:
        first = _put(store, data, "twice")
        second = _put(store, data, "twice")
        third = _put(store, data, "twice-other-key")
        for what, location in (
            ("the first put", first),
            ("the second put", second),
            ("the put under another key", third),
        ):
            _expect_bytes(store, location, data, what)
    same_key = "the same location" if first == second else "distinct locations"
    other_key = "the same location" if third == first else "a distinct location"
    return f"same key twice: {same_key}; another key: {other_key}; all valid"


def check_bad_input_rejected(make_store: StoreFactory) -> str:
    """Bad keys raise invalid_store_key and non-bytes data an InvalidInputError, before
    anything is stored; unusual but valid keys (path-like, Unicode, the longest) work."""
    bad_keys: list[object] = [
        "",
        "a\x00b",
        "k" * (MAX_KEY_CHARS + 1),
        "bad \ud800 half",
        None,
        b"bytes-key",
        7,
    ]
    good_keys = [
        "../../etc/passwd",
        "/absolute/path",
        "a/b/c.json",
        ".",
        "..",
        "with space",
        "line\nbreak",
        "unicode \u2603 \u00e9t\u00e9",
        "@:~#%?",
        "k" * MAX_KEY_CHARS,
    ]
    with _store(make_store) as store:
        for key in bad_keys:
            _expect_error(
                partial(_untyped(store).put, b"x", key=key),
                (errors.InvalidStoreKeyError,),
                f"put(key={key!r:.30})",
            )
        for thing in ("text", None, 42, [1, 2]):
            _expect_error(
                partial(_untyped(store).put, thing, key="bad-data"),
                (errors.InvalidInputError,),
                f"put() of a {type(thing).__name__}",
                exact_code=False,
            )
        for i, key in enumerate(good_keys):
            data = f"stored under unusual key {i}".encode()
            _expect_bytes(store, _put(store, data, key), data, f"a put under key {key!r:.30}")
    return (
        f"{len(bad_keys)} bad keys and 4 non-bytes values refused; "
        f"{len(good_keys)} unusual keys work"
    )


#: Every check, in the order :func:`run_conformance` runs them.
CHECKS: tuple[Check, ...] = (
    check_round_trip,
    check_locations_are_opaque,
    check_missing_location,
    check_concurrent_puts,
    check_same_bytes_twice,
    check_bad_input_rejected,
)


def run_conformance(
    make_store: StoreFactory, *, checks: tuple[Check, ...] = CHECKS
) -> ConformanceReport:
    """Run ``checks`` against stores from ``make_store`` and report on each.

    A check that raises anything but ConformanceFailure (a crash in the store) is a failed
    check too; its detail holds the exception and where it was raised. KeyboardInterrupt and
    other BaseExceptions propagate."""
    results = []
    for check in checks:
        name = check.__name__
        try:
            detail = check(make_store)
        except ConformanceFailure as exc:
            results.append(CheckResult(name, False, str(exc)))
        except Exception as exc:
            where = traceback.format_exception(exc)[-2].strip().replace("\n", " | ")
            results.append(
                CheckResult(name, False, f"raised {type(exc).__name__}: {exc!s:.300} ({where})")
            )
        else:
            results.append(CheckResult(name, True, detail))
    return ConformanceReport(tuple(results))
