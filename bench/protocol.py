"""The one measurement protocol of the benchmarks: every contender of a comparison gets the same
warm-ups and the same number of timed rounds, in an order reversed every round (a b c, c b a,
a b c, ...), so that none gains from its place (a warmer JIT, a cooler machine); each is reported
as the median of its rounds with their range, and a ratio between two contenders as the median
of their per-round ratios (the two runs of one round are next to each other in time, so load
that drifts over the run cancels) with its range.

A contender is a function that runs the measured work once. One that lives in another process
(raw ONNX Runtime Java) is measured the same way: its function asks that process for one run
and returns the seconds it took there (see `Timed`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Timed:
    """Seconds measured by the contender itself (e.g. in another process), to be used instead of
    the wall time of its call."""

    seconds: float


class Answering:
    """A contender in another process (bench/RawOrt.java's JVM) that answers each ``run`` on its
    stdin with the seconds one run took there: each call is one timed run (`Timed`). The process
    says ``ready`` once loaded and ends on ``quit``."""

    def __init__(self, command: list[str]) -> None:
        import subprocess

        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self._answer("ready")

    def _answer(self, expected: str | None = None) -> str:
        line = self.process.stdout.readline().strip()  # type: ignore[union-attr]
        if not line or (expected and line != expected):
            self.process.kill()
            raise RuntimeError(
                f"{self.process.args[0]} failed (exit {self.process.wait()}): {line!r}"
            )
        return line

    def __call__(self) -> Timed:
        self.process.stdin.write("run\n")  # type: ignore[union-attr]
        return Timed(float(self._answer()))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")  # type: ignore[union-attr]
            self.process.stdin.close()  # type: ignore[union-attr]
            self.process.wait(timeout=60)


@dataclass(frozen=True)
class Spread:
    """A median with the least and greatest value it is the median of."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            raise ValueError("no values to take a median of")
        return cls(statistics.median(values), min(values), max(values))

    def text(self, digits: int = 2) -> str:
        """'median (low-high)', e.g. '0.94 (0.90-0.97)'."""
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}-{self.high:.{digits}f})"

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Rounds:
    """The timed rounds of one contender, in seconds, in the order they ran."""

    seconds: tuple[float, ...]

    def time(self) -> Spread:
        return Spread.of(list(self.seconds))

    def rate(self, items: int) -> Spread:
        """Items per second: the median round's, and the slowest and fastest rounds'."""
        return Spread.of([items / max(s, 1e-12) for s in self.seconds])


def ratio(a: Rounds, b: Rounds, items_a: int = 1, items_b: int = 1) -> Spread:
    """The rate of `a` over the rate of `b`, round by round (round i of both ran one after the
    other): their median and range. `items_*` are the items each processes per run."""
    if len(a.seconds) != len(b.seconds):
        raise ValueError("contenders of one ratio must have the same rounds")
    return Spread.of(
        [(items_a / sa) / (items_b / sb) for sa, sb in zip(a.seconds, b.seconds, strict=True)]
    )


def order_of(names: list[str], round_: int) -> list[str]:
    """The order contenders run in `round_` (0-based): as given in even rounds, reversed in odd."""
    return list(names) if round_ % 2 == 0 else list(reversed(names))


def measure(
    contenders: Mapping[str, Callable[[], object]],
    *,
    warmups: int,
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Rounds]:
    """Runs each contender `warmups` times untimed, then `rounds` times timed, every round in
    `order_of` its number (the warm-ups alternate the same way); returns each one's rounds. A
    contender that returns `Timed` is credited with the seconds it reports."""
    if rounds < 1 or warmups < 0:
        raise ValueError(f"need at least one round and no negative warm-ups: {rounds}, {warmups}")
    names = list(contenders)
    for round_ in range(warmups):
        for name in order_of(names, round_):
            contenders[name]()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in order_of(names, round_):
            start = clock()
            result = contenders[name]()
            took = clock() - start
            seconds[name].append(result.seconds if isinstance(result, Timed) else took)
    return {name: Rounds(tuple(s)) for name, s in seconds.items()}
