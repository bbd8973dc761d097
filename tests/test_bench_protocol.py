"""The benchmarks' measurement protocol (bench/protocol.py): the same warm-ups and rounds for
every contender, the order reversed every round, medians with their range, per-round ratios."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import protocol  # noqa: E402


class FakeClock:
    """A clock that the contenders move forward by the seconds they are told to take."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_every_contender_gets_the_same_warmups_and_rounds_in_alternating_order():
    calls: list[str] = []
    contenders = {name: (lambda n=name: calls.append(n)) for name in ("a", "b", "c")}
    result = protocol.measure(contenders, warmups=2, rounds=3, clock=FakeClock())
    # Warm-ups a b c, c b a; rounds a b c, c b a, a b c.
    assert "".join(calls) == "abccbaabccbaabc"
    assert all(len(r.seconds) == 3 for r in result.values())
    # Each contender ran first and last equally often over an even number of rounds.
    firsts = [calls[i] for i in range(0, len(calls), 3)]
    assert firsts.count("a") == 3 and firsts.count("c") == 2


def test_rounds_are_the_wall_time_of_each_call_or_what_a_contender_reports():
    clock = FakeClock()
    took = {"fast": iter([1.0, 2.0, 4.0]), "slow": iter([3.0, 3.0, 9.0])}

    def run(name: str) -> None:
        clock.now += next(took[name])

    contenders = {
        "fast": lambda: run("fast"),
        "slow": lambda: run("slow"),
        "remote": lambda: protocol.Timed(0.5),  # measured in another process
    }
    result = protocol.measure(contenders, warmups=0, rounds=3, clock=clock)
    assert result["fast"].seconds == (1.0, 2.0, 4.0)
    assert result["slow"].seconds == (3.0, 3.0, 9.0)
    assert result["remote"].seconds == (0.5, 0.5, 0.5)
    rate = result["fast"].rate(items=8)
    assert (rate.median, rate.low, rate.high) == (float(np.median([8, 4, 2])), 2.0, 8.0)
    assert result["slow"].time().text(1) == "3.0 (3.0-9.0)"


def test_a_ratio_is_the_median_of_the_per_round_ratios_with_their_range():
    a = protocol.Rounds((1.0, 2.0, 4.0, 1.0))
    b = protocol.Rounds((2.0, 2.0, 2.0, 4.0))
    per_round = (10 / np.array(a.seconds)) / (5 / np.array(b.seconds))
    spread = protocol.ratio(a, b, items_a=10, items_b=5)
    assert spread.median == pytest.approx(float(np.median(per_round)))
    assert (spread.low, spread.high) == (pytest.approx(per_round.min()), per_round.max())
    # Not the ratio of the medians: load that drifts between rounds cancels within a round.
    assert spread.median != pytest.approx((10 / np.median(a.seconds)) / (5 / np.median(b.seconds)))


def test_mismatched_or_empty_measurements_are_refused():
    with pytest.raises(ValueError, match="same rounds"):
        protocol.ratio(protocol.Rounds((1.0,)), protocol.Rounds((1.0, 2.0)))
    with pytest.raises(ValueError, match="at least one round"):
        protocol.measure({"a": lambda: None}, warmups=1, rounds=0)
    with pytest.raises(ValueError, match="no values"):
        protocol.Spread.of([])
