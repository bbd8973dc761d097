"""SynapseML's names for params whose concept a stage shares under another name."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

_S = TypeVar("_S", bound=type)


def synapseml_names(
    aliases: dict[str, str], refused: dict[str, str] | None = None
) -> Callable[[_S], _S]:
    """A class decorator: the stage's constructor and ``setParams`` take SynapseML's name for a
    param (``aliases`` maps it to ours) as a keyword too, and the stage gains ``set``/``get``
    methods under that name. The keyword signatures list the aliases, so help() shows them.
    SynapseML params with no counterpart (``refused`` maps each to what to do instead) fail as
    keywords and as ``set``/``get`` methods with a TypeError saying that."""
    refused = refused or {}

    def decorate(cls: _S) -> _S:
        base_init: Any = cls.__init__  # type: ignore[misc]
        base_set_params: Any = cls.setParams  # type: ignore[attr-defined]

        def renamed(kwargs: dict[str, Any]) -> dict[str, Any]:
            for name in kwargs:
                if name in refused:
                    _refuse(cls.__name__, name, refused[name])
            return renamed_keywords(cls.__name__, kwargs, lambda k: aliases.get(k, k))

        @functools.wraps(base_init)
        def __init__(self: Any, **kwargs: Any) -> None:
            base_init(self, **renamed(kwargs))

        @functools.wraps(base_set_params)
        def setParams(self: Any, **kwargs: Any) -> Any:
            base_set_params(self, **renamed(kwargs))
            return self

        for method, base in ((__init__, base_init), (setParams, base_set_params)):
            signature = inspect.signature(base)
            params = signature.parameters
            extra = [
                inspect.Parameter(
                    alias,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=params[target].annotation if target in params else Any,
                )
                for alias, target in aliases.items()
            ]
            setattr(  # noqa: B010 - the wrapper's signature, for help() and inspect
                method, "__signature__", signature.replace(parameters=[*params.values(), *extra])
            )
        cls.__init__ = __init__  # type: ignore[misc]
        cls.setParams = setParams  # type: ignore[attr-defined]
        for alias, ours in aliases.items():
            suffix, target = alias[0].upper() + alias[1:], ours[0].upper() + ours[1:]
            setattr(cls, f"set{suffix}", _delegate(f"set{target}", alias))
            setattr(cls, f"get{suffix}", _delegate(f"get{target}", alias))
        for name, instead in refused.items():
            suffix = name[0].upper() + name[1:]
            for prefix in ("set", "get"):
                setattr(cls, f"{prefix}{suffix}", _refusing(cls.__name__, name, instead))
        cls._ALIASES = dict(aliases)  # type: ignore[attr-defined]
        return cls

    return decorate


def renamed_keywords(
    owner: str, kwargs: dict[str, Any], name: Callable[[str], str]
) -> dict[str, Any]:
    """`kwargs` under the names `name` gives them; a TypeError naming `owner` when two of them
    are one argument under two names."""
    out = {name(k): v for k, v in kwargs.items()}
    if len(out) < len(kwargs):
        raise TypeError(f"{owner}: one argument given under two names in {sorted(kwargs)}")
    return out


def _delegate(method: str, alias: str) -> Callable[..., Any]:
    def call(self: Any, *args: Any) -> Any:
        return getattr(self, method)(*args)

    call.__name__ = method.replace(method[3:], alias[0].upper() + alias[1:], 1)
    call.__doc__ = f"SynapseML's name for :meth:`{method}`."
    return call


def _refuse(owner: str, name: str, instead: str) -> NoReturn:
    raise TypeError(f"{owner}: SynapseML's {name!r} has no counterpart here: {instead}")


def _refusing(owner: str, name: str, instead: str) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse(owner, name, instead)

    call.__doc__ = f"SynapseML's {name!r}: refused, saying what to use instead."
    return call
