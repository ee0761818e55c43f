"""What a solver is asked: a `SolveRequest` carries the problem, the hardware, a `Budget` of time,
the seed, the hint, the solver's typed `Options` and the facts (docs/architecture.md, "Solvers").

``Budget`` (`mallocgame.runtime.budget`) is the one type of time: a number of seconds from a monotonic start, with the time left,
a child
budget (`Budget.share`) and the deadline a search stops at so that its answer is back in time
(`Budget.search_part`). ``Options`` is the base of a solver's options: a frozen dataclass whose fields are
declared with `option` (type, default, range or choices and a one-line doc); its constructor checks every
value, and `Options.parse` reads a ``{name: value}`` mapping, refusing an unknown name in one line.

Examples:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Mine(Options):
    ...     rounds: int = option(3, "rounds of the search", low=1)
    ...     order: str = option("size", "the buffer order", choices=("size", "start"))
    >>> Mine.parse({"rounds": 5})
    Mine(rounds=5, order='size')
    >>> Mine.parse({"rounds": 0})
    Traceback (most recent call last):
    ...
    mallocgame.problem.model.InputError: rounds: must be a positive integer, got 0
    >>> Mine.parse({"rouns": 5}, owner="me")
    Traceback (most recent call last):
    ...
    mallocgame.problem.model.InputError: solver 'me' takes no option 'rouns' (its options: order, rounds); did you mean 'rounds'?
    >>> budget = Budget(10.0, started=100.0)
    >>> budget.search_part(n=1000).deadline  # 100 + 10 - 0.05 - 1000 * 2e-5: the search stops there
    109.93
    >>> budget.share(0.5).deadline <= budget.deadline  # spent: its child is spent too
    True
    >>> Budget.start(10.0).share(0.25).seconds <= 2.5
    True
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from mallocgame.engine.session import Session, session_for
from mallocgame.problem.model import InputError, Problem, Solution
from mallocgame.problem.suggest import did_you_mean
from mallocgame.runtime.budget import Budget

# ---------------------------------------------------------------------------- options

KINDS = ("int", "float", "bool", "text", "names")  # what an option's value is (``names``: solver names)


def option(default: Any, doc: str, *, low: float | None = None, high: float | None = None,
           choices: tuple[str, ...] | None = None, kind: str | None = None) -> Any:
    """A field of an `Options` dataclass: its ``default``, one-line ``doc``, the range ``[low, high]`` of a
    number, the ``choices`` of a text, and its ``kind`` when the annotation does not say it (``"names"``: solver
    names, a comma-separated text or a list). ``None`` is taken where the default is ``None`` ("its default")."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"option kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return field(default=default, metadata={"doc": doc, "low": low, "high": high, "choices": choices, "kind": kind})


@dataclass(frozen=True)
class OptionInfo:
    """One option as ``mallocgame solvers NAME`` lists it."""

    name: str
    kind: str
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None

    @property
    def allowed(self) -> str:
        """The values taken, in words (``>= 1``, ``from 0 to 1``, ``one of a, b``, ``true or false``, ...)."""
        text = {"bool": "true or false", "text": "text", "names": "solver names separated by commas"}.get(self.kind, "")
        if self.choices:
            text = "one of " + ", ".join(self.choices)
        elif self.kind in ("int", "float") and (self.low is not None or self.high is not None):
            text = _range_text(self.low, self.high)
        elif self.kind in ("int", "float"):
            text = "any"
        return text + (" (or none: its default)" if self.default is None else "")


_SIMPLE = {int: "int", float: "float", bool: "bool", str: "text"}


def _kind_of(name: str, annotation: Any, declared: str | None) -> str:
    if declared is not None:
        return declared
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if len(args) == 1 and args[0] in _SIMPLE:
        return _SIMPLE[args[0]]
    raise TypeError(f"option {name!r}: annotation {annotation!r} is not int, float, bool or str (give kind=...)")


def _range_text(low, high) -> str:
    if low is None:
        return f"<= {high}"
    return f">= {low}" if high is None else f"from {low} to {high}"


def bad_value(info: OptionInfo, value: Any) -> str | None:
    """Why ``value`` is not a value of the option ``info`` (one clause), else ``None``."""
    if value is None and info.default is None:
        return None
    low, high = info.low, info.high
    outside = (low is not None and value < low) if isinstance(value, (int, float)) else False
    if isinstance(value, (int, float)) and high is not None and value > high:
        outside = True
    if info.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or outside:
            if low == 1 and high is None:
                return f"must be a positive integer, got {value!r}"
            return f"must be an integer {_range_text(low, high)}, got {value!r}" if low is not None or high is not None \
                else f"must be an integer, got {value!r}"
    elif info.kind == "float":
        number = not isinstance(value, bool) and isinstance(value, (int, float))
        if not number or not math.isfinite(value) or outside:
            bounds = f" {_range_text(low, high)}" if low is not None or high is not None else ""
            return f"must be a finite number{bounds}, got {value!r}"
    elif info.kind == "bool":
        if not isinstance(value, bool):
            return f"must be true or false, got {value!r}"
    elif info.kind == "text":
        if not isinstance(value, str):
            return f"must be text, got {value!r}"
        if info.choices and value not in info.choices:
            return f"must be one of {', '.join(info.choices)}, got {value!r}"
    elif info.kind == "names":
        ok = isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
        if not ok:
            return f"must be solver names separated by commas, got {value!r}"
    return None


@dataclass(frozen=True)
class Options:
    """The base of a solver's options: a frozen dataclass of `option` fields, each value checked when built.

    A subclass is declared ``@dataclass(frozen=True)``; an instance with a bad value is never built
    (`InputError`, one line: ``"workers: must be a positive integer, got 0"``).
    """

    owner: ClassVar[str] = ""  # the solver's name, for messages (set by Solver subclasses)

    def __post_init__(self) -> None:
        for info in self.described():
            reason = bad_value(info, getattr(self, info.name))
            if reason:
                raise InputError(f"{info.name}: {reason}")

    @classmethod
    def described(cls) -> tuple[OptionInfo, ...]:
        """Every option of this class: name, kind, default, one-line doc, range and choices."""
        cached = cls.__dict__.get("_described")
        if cached is not None:
            return cached
        hints = typing.get_type_hints(cls)
        infos = []
        for f in dataclasses.fields(cls):
            meta = f.metadata
            infos.append(OptionInfo(f.name, _kind_of(f.name, hints.get(f.name), meta.get("kind")), f.default,
                                    meta.get("doc", ""), meta.get("low"), meta.get("high"), meta.get("choices")))
        infos = tuple(infos)
        cls._described = infos  # one reading of the annotations per class
        return infos

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, sorted."""
        return tuple(sorted(f.name for f in dataclasses.fields(cls)))

    @classmethod
    def unknown(cls, raw: Mapping[str, Any], *, owner: str = "") -> str | None:
        """One line naming the options of ``raw`` this class does not have (with a did-you-mean), else ``None``."""
        known = cls.names()
        bad = sorted(k for k in raw if k not in known)
        if not bad:
            return None
        name = owner or cls.owner or cls.__name__
        takes = ", ".join(known) if known else "none"
        return f"solver {name!r} takes no option {', '.join(map(repr, bad))} (its options: {takes})" \
               f"{did_you_mean(bad[0], known)}"

    @classmethod
    def parse(cls, raw: Mapping[str, Any], *, owner: str = "") -> Options:
        """An instance from ``{name: value}`` (the defaults for the rest); `InputError` for an unknown name
        or a bad value, one line naming the option and the reason."""
        error = cls.unknown(raw, owner=owner)
        if error:
            raise InputError(error)
        return cls(**raw)

    @classmethod
    def taken(cls, raw: Mapping[str, Any]) -> Options:
        """An instance from the entries of ``raw`` this class has (the others left out: options given to every
        solver of a run, such as ``workers``, reach only the solvers that take them)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


def check_options_class(cls: Any) -> str | None:
    """Why ``cls`` is not a solver's ``Options`` (a frozen dataclass subclassing `Options` whose fields are
    `option` fields with a doc and a known kind), else ``None``."""
    if not (isinstance(cls, type) and issubclass(cls, Options) and dataclasses.is_dataclass(cls)):
        return f"Options is {cls!r}, not a frozen dataclass subclassing mallocgame.Options"
    if not cls.__dataclass_params__.frozen:
        return f"Options {cls.__name__} is not frozen (declare it @dataclass(frozen=True))"
    try:
        infos = cls.described()
    except (TypeError, NameError) as exc:
        return f"Options {cls.__name__}: {exc}"
    undocumented = [i.name for i in infos if not i.doc]
    if undocumented:
        return (f"Options {cls.__name__}: field {undocumented[0]!r} has no doc "
                f"(declare it with mallocgame.option(default, 'one-line doc'))")
    return None


# ---------------------------------------------------------------------------- the request

@dataclass(frozen=True)
class SolveRequest:
    """What a solver's ``solve(request)`` is asked.

    Attributes:
        problem: The problem (``problem.mode``: ``"map"``, ``"pack"`` or ``"prefetch"``).
        hardware: The hardware spec the answer is scored on.
        budget: The time the solver has (`Budget`).
        seed: The one seed of all its randomness.
        hint: An answer already checked to belong to the problem, or ``None``.
        options: The solver's typed options (an instance of its ``Options``).
        facts: The problem's derived facts on ``hardware`` (`mallocgame.engine.session.Session`: evaluators, overlap index,
            max live, bound, the mode's baselines, the interference graph), each built once, on first use; handed
            down by whoever runs the solver (a portfolio hands its own to its members), by default this
            process's of the problem.

    Examples:
        >>> from mallocgame.inputs.load import load_problem
        >>> p = load_problem("example:layered150")
        >>> r = SolveRequest.of(p, p.hardware, time_limit=2.0, seed=7)
        >>> r.seed, r.budget.seconds, r.facts is r.facts
        (7, 2.0, True)
    """

    problem: Problem
    hardware: Any
    budget: Budget
    seed: int = 0
    hint: Solution | None = None
    options: Options = field(default_factory=Options)
    facts: Session | None = None

    def __post_init__(self) -> None:
        if self.facts is None:
            object.__setattr__(self, "facts", session_for(self.problem, self.hardware))
        elif self.facts.problem is not self.problem or self.facts.hardware != self.hardware:
            raise ValueError("a request's facts are those of its problem on its hardware")

    @classmethod
    def of(cls, problem: Problem, hardware: Any = None, *, time_limit: float, seed: int = 0,
           hint: Solution | None = None, options: Options | None = None, facts: Session | None = None) -> SolveRequest:
        """A request whose budget of ``time_limit`` seconds starts now (``hardware``: the problem's own by default)."""
        return cls(problem, problem.hardware if hardware is None else hardware, Budget.start(time_limit), seed, hint,
                   Options() if options is None else options, facts)

    @property
    def time_limit(self) -> float:
        """The budget's seconds."""
        return self.budget.seconds


__all__ = ["OptionInfo", "Options", "SolveRequest", "check_options_class", "option"]
