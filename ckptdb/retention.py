"""Retention policies: which checkpoints of a namespace GC keeps.

A policy is a set of rules; a checkpoint is kept if *any* rule keeps it (composable, like
restic's ``--keep-*`` flags). Whatever the policy, GC always keeps every CURRENT, its
fallback and every pinned checkpoint, and never deletes bytes a kept checkpoint uses.

Thinning rules look at the lineage of CURRENT (parent links from CURRENT):

* ``keep_last=N``    -- CURRENT and its N-1 nearest ancestors;
* ``keep_every=N``   -- the newest checkpoint of every run of N generations;
* ``keep_hourly=N`` / ``keep_daily=N`` / ``keep_weekly=N`` -- the newest checkpoint of each of
  the N most recent hours / days / ISO weeks (UTC) that have one.

Value rules look at every stored checkpoint of the namespace:

* ``keep_within``    -- everything created within a duration ("90m", "36h", "7d", "2w");
* ``keep_best``      -- the best N by a numeric metadata key (``min`` or ``max``);
* ``keep_matching``  -- checkpoints whose metadata contains these key/value pairs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import errors, validation

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+)([smhdw])")
#: Zero is the same in every unit, so it is the one number text may give without one.
_ZERO = re.compile(r"0+")
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


#: The longest duration accepted (about 100 years): anything longer is a mistake, and
#: bounding it keeps millisecond arithmetic exact.
MAX_DURATION_SECONDS = 100 * 365 * 86400


def duration_seconds(value: str | int | float) -> float:
    """Seconds in a duration: a number of seconds, or text such as ``"7d"``, ``"1d12h"``,
    ``"90m"`` (``"0"`` too: zero needs no unit, any other text number does).
    InvalidInputError unless it is finite, not negative and at most
    :data:`MAX_DURATION_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise errors.InvalidInputError(
            f"not a duration: {value!r}; give seconds or text such as '7d'"
        )
    if isinstance(value, str):
        text = value.strip().lower()
        if _ZERO.fullmatch(text):
            return 0.0
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise errors.InvalidInputError(
                f"not a duration: {value!r}; use a number with a unit s, m, h, d or w, e.g. "
                "'7d', '36h', '1d12h'"
            )
        seconds = float(sum(int(n) * _UNITS[u] for n, u in parts))
    elif isinstance(value, int):
        # Compared as an int first: a huge int does not fit a float.
        seconds = float(max(-1, min(value, MAX_DURATION_SECONDS + 1)))
    else:
        if math.isnan(value):
            raise errors.InvalidInputError(f"not a duration: {value!r}")
        seconds = value
    if seconds < 0:
        raise errors.InvalidInputError(f"a duration cannot be negative: {str(value)[:40]}")
    if seconds > MAX_DURATION_SECONDS:
        raise errors.InvalidInputError(
            f"duration {str(value)[:40]} is longer than {MAX_DURATION_SECONDS} seconds (100 years)"
        )
    return seconds


def parse_duration(value: str | int | float) -> int:
    """Whole seconds in a duration (see :func:`duration_seconds`)."""
    return int(duration_seconds(value))


class KeepBest(BaseModel):
    """Keep the best ``n`` checkpoints by the numeric metadata value ``key``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(min_length=1)
    n: int = Field(ge=1)
    mode: Literal["min", "max"] = "min"


class RetentionPolicy(BaseModel):
    """Rules for what GC keeps (see the module docstring). Empty = keep only the protected
    checkpoints (every CURRENT, its fallback and pins).

    ``keep_within`` takes a duration (``"7d"``, ``"36h"``, ``"1d12h"`` or seconds) and holds
    whole seconds. The old name ``keep_within_seconds`` is still read (policies stored by
    earlier versions use it) and is a deprecated read-only alias."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keep_last: int | None = Field(default=None, ge=1)
    keep_within: int | None = Field(
        default=None, ge=0, description="keep everything newer than this many seconds"
    )
    keep_every: int | None = Field(default=None, ge=1)
    keep_hourly: int | None = Field(default=None, ge=1)
    keep_daily: int | None = Field(default=None, ge=1)
    keep_weekly: int | None = Field(default=None, ge=1)
    keep_best: tuple[KeepBest, ...] = ()
    keep_matching: dict[str, Any] | None = None

    def __init__(self, **rules: Any) -> None:
        # A bad rule is the caller's input: a typed ckptdb error, not pydantic's.
        try:
            super().__init__(**rules)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'policy'}: {e['msg']}"
                for e in exc.errors()
            )
            raise errors.InvalidPolicyError(
                f"invalid retention policy ({problems}); see RetentionPolicy for the rules"
            ) from exc

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, value: Any) -> Any:
        if isinstance(value, dict) and "keep_within_seconds" in value:
            value = dict(value)
            old = value.pop("keep_within_seconds")
            if old is not None:
                if value.get("keep_within") is not None:
                    raise ValueError("give keep_within only (keep_within_seconds is its old name)")
                value["keep_within"] = old
        return value

    @field_validator("keep_within", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value)

    @field_validator("keep_matching", mode="before")
    @classmethod
    def _matching(cls, value: Any) -> Any:
        # The same rules as metadata (finite numbers, str keys, bounded nesting): a rule
        # matches metadata, and it is stored as JSON.
        if value is not None:
            try:
                validation.metadata(value)
            except errors.InvalidMetadataError as exc:
                raise ValueError(f"keep_matching: {exc.message}") from exc
        return value

    @classmethod
    def build(cls, **rules: Any) -> RetentionPolicy:
        """Construct from keyword rules (the same as the constructor's); bad rules raise
        InvalidInputError."""
        try:
            return cls.model_validate(rules)
        except ValueError as exc:
            raise errors.InvalidInputError(f"invalid retention policy: {exc}") from exc

    def lineage_depth(self) -> int | None:
        """How far from CURRENT the lineage rules look: 0 when no rule uses the lineage,
        ``keep_last`` when it is the only one, None (all of it) otherwise."""
        if any(
            rule is not None
            for rule in (self.keep_every, self.keep_hourly, self.keep_daily, self.keep_weekly)
        ):
            return None
        return self.keep_last or 0

    def needs_metadata(self) -> bool:
        """True when evaluating the policy reads checkpoint metadata."""
        return bool(self.keep_best) or self.keep_matching is not None


class Candidate(NamedTuple):
    """What policy evaluation knows about one stored checkpoint. A named tuple, not a
    dataclass: GC builds one per stored checkpoint, and a tuple is ~3x cheaper to make."""

    seq: int
    generation: int
    created_at_ms: int
    depth: int | None  # distance from CURRENT along the lineage; None = not on it
    metadata: dict[str, Any] | None


def _newest_per_bucket(items: Iterable[Candidate], bucket_of: Any, buckets: int | None) -> set[int]:
    best: dict[int, Candidate] = {}
    for c in items:
        b = bucket_of(c)
        old = best.get(b)
        if old is None or (c.generation, c.created_at_ms) > (old.generation, old.created_at_ms):
            best[b] = c
    chosen = sorted(best.items(), reverse=True)
    if buckets is not None:
        chosen = chosen[:buckets]
    return {c.seq for _, c in chosen}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def kept_by_policy(policy: RetentionPolicy, candidates: list[Candidate], now_ms: int) -> set[int]:
    """Seqs of the checkpoints of one namespace that ``policy`` keeps."""
    keep: set[int] = set()
    lineage = [c for c in candidates if c.depth is not None]
    if policy.keep_last is not None:
        keep |= {c.seq for c in lineage if c.depth is not None and c.depth < policy.keep_last}
    if policy.keep_every is not None:
        every = policy.keep_every
        keep |= _newest_per_bucket(lineage, lambda c: (c.generation - 1) // every, None)
    if policy.keep_hourly is not None:
        keep |= _newest_per_bucket(
            lineage, lambda c: c.created_at_ms // HOUR_MS, policy.keep_hourly
        )
    if policy.keep_daily is not None:
        keep |= _newest_per_bucket(lineage, lambda c: c.created_at_ms // DAY_MS, policy.keep_daily)
    if policy.keep_weekly is not None:
        # Day 0 (1970-01-01) was a Thursday; +3 makes weeks start on Monday (ISO).
        keep |= _newest_per_bucket(
            lineage, lambda c: (c.created_at_ms // DAY_MS + 3) // 7, policy.keep_weekly
        )
    if policy.keep_within is not None:
        cutoff = now_ms - policy.keep_within * 1000
        keep |= {c.seq for c in candidates if c.created_at_ms >= cutoff}
    for best in policy.keep_best:
        scored = [
            (c.metadata[best.key], c)
            for c in candidates
            if c.metadata is not None and _is_number(c.metadata.get(best.key))
        ]
        scored.sort(key=lambda vc: (vc[0] if best.mode == "min" else -vc[0], -vc[1].generation))
        keep |= {c.seq for _, c in scored[: best.n]}
    if policy.keep_matching is not None:
        wanted = policy.keep_matching.items()
        keep |= {
            c.seq
            for c in candidates
            if c.metadata is not None and all(c.metadata.get(k) == v for k, v in wanted)
        }
    return keep
