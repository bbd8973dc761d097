"""The params' validators, twins of the JVM's ``mmlspark.contracts.Check`` (which the code
generator writes into each wrapper's ``_python_param_checks`` as calls of these): each takes a
value, already converted by the param's type converter, and tells whether the JVM stage would
accept it. Where no JVM stage checks a value at set time (the Python backend, Spark Connect),
:class:`~mmlspark.core.wrapper.MMLParams` checks it with these.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "above",
    "all_of",
    "at_least",
    "between",
    "choice",
    "distinct_names",
    "lengths",
    "non_empty_name",
    "non_empty_names",
    "not_empty",
    "one_of",
]

Validator = Callable[[Any], bool]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def at_least(bound: float) -> Validator:
    """At least `bound` (Spark's ``ParamValidators.gtEq``)."""
    return lambda value: _number(value) >= bound


def above(bound: float) -> Validator:
    """Over `bound` (Spark's ``ParamValidators.gt``)."""
    return lambda value: _number(value) > bound


def between(lower: float, upper: float) -> Validator:
    """Between `lower` and `upper`, both included (Spark's ``ParamValidators.inRange``)."""
    return lambda value: lower <= _number(value) <= upper


def one_of(*allowed: Any) -> Validator:
    """One of `allowed`, exactly (Spark's ``ParamValidators.inArray``)."""
    return lambda value: any(value == a and type(value) is type(a) for a in allowed)


def choice(values: Sequence[str], aliases: Mapping[str, str]) -> Validator:
    """One of an enumerated string param's choices in any case, its aliases included (the JVM's
    ``Choices``: surrounding blanks are ignored)."""
    accepted = {v.lower() for v in values} | {a.lower() for a in aliases}
    return lambda value: isinstance(value, str) and value.strip().lower() in accepted


def non_empty_name(value: Any) -> bool:
    """A name: not null, not empty."""
    return isinstance(value, str) and len(value) > 0


def non_empty_names(value: Any) -> bool:
    """Names, each not null and not empty (the list itself may be empty)."""
    return all(isinstance(n, str) and len(n) > 0 for n in value)


def distinct_names(*, empty_allowed: bool) -> Validator:
    """A list of names without repeats (and, unless `empty_allowed`, not empty)."""
    return lambda names: (empty_allowed or len(names) > 0) and len(set(names)) == len(names)


def lengths(allowed: Sequence[int], *, positive: bool = False) -> Validator:
    """An array of one of the `allowed` lengths (and, when `positive`, of values over 0 only)."""
    return lambda values: (
        len(values) in allowed and (not positive or all(_number(v) > 0 for v in values))
    )


def not_empty(values: Any) -> bool:
    """An array with at least one entry."""
    return len(values) > 0


def all_of(*checks: Validator) -> Validator:
    """Every one of `checks`."""
    return lambda value: all(check(value) for check in checks)
