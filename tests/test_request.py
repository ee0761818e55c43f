"""The solve request: the Budget (the one type of time), the typed Options every solver declares, and the
contract ``solve(self, request)`` that ``check-solver`` and the registry enforce."""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import mallocgame
from mallocgame.engine.protocol import Solver, contract_error
from mallocgame.engine.registry import load_solver, solver_entries
from mallocgame.engine.request import Options, SolveRequest, check_options_class, option
from mallocgame.engine.session import session_for
from mallocgame.inputs.load import load_problem
from mallocgame.problem.model import InputError
from mallocgame.runtime.budget import SAFETY, Budget
from tests.conftest import DATA, run_cli
from tests.test_plugins import make_distribution

# ---------------------------------------------------------------------------- Budget


def old_solver_deadline(t0, time_limit, n, *, extra=0.0, per_buffer=2e-5):
    """The rule every solver kept before the Budget (protocol.solver_deadline), written out as it was."""
    return t0 + max(time_limit - 0.05 - extra - per_buffer * n, time_limit * 0.5)


@pytest.mark.parametrize("seconds", [0.01, 0.2, 1.0, 10.0, 600.0])
@pytest.mark.parametrize("n", [0, 150, 5000, 100_000, 400_000])
@pytest.mark.parametrize("extra,per_buffer", [(0.0, 2e-5), (0.02, 2e-5), (0.0, 1e-6), (0.0, 2e-6), (0.1, 2e-5)])
def test_search_part_gives_the_numbers_of_the_old_solver_deadline(seconds, n, extra, per_buffer):
    budget = Budget(seconds, started=1234.5)
    assert budget.search_part(n=n, extra=extra, per_buffer=per_buffer).deadline == \
        old_solver_deadline(1234.5, seconds, n, extra=extra, per_buffer=per_buffer)
    # never less than half
    assert budget.search_part(n=n, extra=extra, per_buffer=per_buffer).deadline >= budget.part(0.5).deadline


@pytest.mark.parametrize("fraction", [0.9, 0.95])
def test_a_part_less_safety_gives_the_numbers_of_the_old_hand_rules(fraction):
    for seconds in (0.2, 1.0, 30.0):
        t0 = 987.25
        search = Budget(seconds, t0).part(fraction, keep=SAFETY)  # uct 0.95, muzero 0.9
        assert search.started == t0 and search.deadline == pytest.approx(t0 + fraction * seconds - SAFETY, abs=1e-12)
    assert Budget(0.01, t0).part(0.9, keep=SAFETY).seconds == 0.0  # never a negative length


def test_budget_names_follow_one_rule():
    # one instant (the deadline); every other public method cuts a budget and returns one, or reads the clock
    budget = Budget(10.0, 100.0)
    public = {name for name in dir(Budget) if not name.startswith("_")}
    assert public == {"deadline", "left", "expired", "part", "share", "search_part",
                      "start", "until"}
    assert all(isinstance(cut, Budget) for cut in (budget.part(0.5), budget.share(0.5), budget.search_part(n=10)))


def test_budget_left_expired_and_deadline():
    spent = Budget(1.0, time.monotonic() - 5.0)
    assert spent.expired() and spent.left() == 0.0
    fresh = Budget.start(60.0)
    assert not fresh.expired() and 59.0 < fresh.left() <= 60.0
    assert fresh.deadline == fresh.started + 60.0


@pytest.mark.parametrize("fraction", [-1.0, 0.0, 0.25, 1.0, 3.0])
def test_a_share_never_ends_past_its_parent(fraction):
    for parent in (Budget.start(2.0), Budget(1.0, time.monotonic() - 5.0), Budget(0.0, time.monotonic())):
        child = parent.share(fraction)
        assert child.deadline <= parent.deadline
        assert 0.0 <= child.seconds <= max(parent.seconds, 0.0)
    parent = Budget.start(4.0)
    child = parent.share(0.25)
    assert child.seconds <= 0.25 * 4.0 and child.started >= parent.started


def test_until_runs_from_now_to_the_deadline_and_is_spent_past_it():
    before = time.monotonic()
    budget = Budget.until(before + 30.0)
    assert before <= budget.started <= time.monotonic()
    assert budget.deadline == pytest.approx(before + 30.0, abs=1e-9) and 29.0 < budget.left() <= 30.0
    past = Budget.until(before - 5.0)
    assert past.seconds == 0.0 and past.expired() and past.share(0.5).seconds == 0.0


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.2, 0.3, 1.0])
def test_part_is_the_first_fraction_of_the_limit_however_much_is_left(fraction):
    for seconds, t0 in ((0.2, 987.25), (10.0, 1234.5), (600.0, 3.0)):
        part = Budget(seconds, t0).part(fraction)
        assert part.started == t0 and part.seconds == fraction * seconds  # VARIANTS_SHARE * time_limit, as was
        assert part.deadline == Budget(seconds, t0).part(fraction).deadline == t0 + fraction * seconds
    spent = Budget(1.0, time.monotonic() - 5.0)
    assert spent.part(0.5).seconds == 0.5  # a length, not the time left (share is that)


@pytest.mark.parametrize("seconds", [0.2, 1.0, 10.0])
@pytest.mark.parametrize("n", [0, 150, 100_000])
def test_the_budget_operations_give_the_numbers_of_the_solvers_old_hand_rules(seconds, n):
    t0 = 1234.5
    budget = Budget(seconds, t0)
    deadline = budget.search_part(n=n).deadline
    # cpsat prefetch: no time left to search (the same instant to a rounding of the last bit)
    assert budget.search_part(n=n).part(0.7).deadline == pytest.approx(t0 + 0.7 * (deadline - t0), abs=1e-9)
    assert budget.part(0.2).deadline == t0 + 0.2 * seconds  # cpsat's push-down of the hint, pack-search's best-fit start
    live = Budget.start(seconds)  # a share of the time left: now + f * (deadline - now), never past the deadline
    before = time.monotonic()
    half = live.share(0.5)
    after = time.monotonic()
    assert before + 0.5 * (live.deadline - before) - 1e-9 <= half.deadline <= after + 0.5 * (live.deadline - after) + 1e-9


# the solvers whose deadlines come from their request's budget; the core functions they call may take a deadline
BUDGETED_SOLVERS = ("solvers/cpsat/solver.py", "solvers/cpsat/prefetch_windows.py", "solvers/msa.py",
                    "solvers/muzero.py", "solvers/pack_search/solver.py", "hybrid/portfolio.py",
                    "solvers/pack_search/search.py", "solvers/pack_search/_pack.pxi", "search/uct.py")
# a deadline written by hand: t0 + f * limit, now + f * (deadline - now), a clock of its own (perf_counter)
HAND_RULES = re.compile(r"\bt0 \+|\btime_limit \*|\* time_limit\b|monotonic\(\) \+ [^\n]*\*|\bnow \+ [^\n]*[*/]"
                        r"|\bdeadline - now\b|perf_counter")


@pytest.mark.parametrize("path", BUDGETED_SOLVERS)
def test_the_solvers_read_their_deadlines_from_their_budget(path):
    source = (Path(mallocgame.__file__).parent / path).read_text()
    assert not [line.strip() for line in source.splitlines() if HAND_RULES.search(line)]


# ---------------------------------------------------------------------------- Options


@dataclass(frozen=True)
class Sample(Options):
    count: int = option(1, "a count", low=1)
    depth: int | None = option(None, "a depth", low=0)
    ratio: float = option(0.5, "a share", low=0.0, high=1.0)
    flag: bool = option(False, "a switch")
    order: str = option("start", "an order", choices=("start", "size"))
    path: str | None = option(None, "a file")
    members: str | tuple[str, ...] | None = option(None, "solver names", kind="names")


def test_options_take_good_values_and_their_defaults():
    assert Sample.parse({}) == Sample()
    got = Sample.parse({"count": 3, "depth": 0, "ratio": 1, "flag": True, "order": "size", "path": "x.pt",
                        "members": ["a", "b"]})
    assert (got.count, got.depth, got.ratio, got.flag, got.order, got.path, got.members) == \
        (3, 0, 1, True, "size", "x.pt", ["a", "b"])
    assert Sample.parse({"depth": None, "path": None, "members": "a,b"}).members == "a,b"  # None: its default


@pytest.mark.parametrize("raw,message", [
    ({"count": 0}, "count: must be a positive integer, got 0"),
    ({"count": True}, "count: must be a positive integer, got True"),
    ({"count": 2.5}, "count: must be a positive integer, got 2.5"),
    ({"count": None}, "count: must be a positive integer, got None"),  # its default is not None
    ({"depth": -1}, "depth: must be an integer >= 0, got -1"),
    ({"ratio": 1.5}, "ratio: must be a finite number from 0.0 to 1.0, got 1.5"),
    ({"ratio": float("nan")}, "ratio: must be a finite number from 0.0 to 1.0, got nan"),
    ({"ratio": "abc"}, "ratio: must be a finite number from 0.0 to 1.0, got 'abc'"),
    ({"flag": 1}, "flag: must be true or false, got 1"),
    ({"order": "random"}, "order: must be one of start, size, got 'random'"),
    ({"path": 5}, "path: must be text, got 5"),
    ({"members": 123}, "members: must be solver names separated by commas, got 123"),
])
def test_a_bad_value_is_one_line_naming_the_option_and_the_reason(raw, message):
    with pytest.raises(InputError) as err:
        Sample.parse(raw)
    assert str(err.value) == message
    with pytest.raises(InputError):  # the constructor checks too: no instance with a bad value is built
        Sample(**raw)


def test_an_unknown_option_names_the_options_and_the_closest():
    with pytest.raises(InputError) as err:
        Sample.parse({"cuont": 2}, owner="sample")
    assert str(err.value) == ("solver 'sample' takes no option 'cuont' (its options: count, depth, flag, members, "
                              "order, path, ratio); did you mean 'count'?")
    assert Sample.taken({"count": 2, "workers": 4}) == Sample(count=2)  # options of other solvers are left out


def test_options_are_frozen_and_described():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Sample().count = 2
    described = {i.name: i for i in Sample.described()}
    assert described["ratio"].kind == "float" and described["ratio"].allowed == "from 0.0 to 1.0"
    assert described["depth"].allowed == ">= 0 (or none: its default)" and described["depth"].doc == "a depth"
    assert described["members"].kind == "names"


# What each built-in solver's solve took before its Options (names and defaults): the option names stay (muzero's
# leaf_batch, mcts's leaf and start, and muzero's value_checkpoint, focus and start were added after).
OLD_OPTIONS = {
    "greedy-xla": {}, "best-fit": {},
    "mcts": {"simulations": None, "variant": None, "k": None, "order": None, "rollout": "greedy", "epsilon": 0.0,
             "rollout_depth": None, "exploration": 1.0, "commit": None, "windows": 2, "leaf": None, "start": None},
    "muzero": {"simulations": None, "checkpoint": None, "prior": "network", "exploration": None, "method": "uct",
               "model": None, "search_model": None, "c_scale": None, "rollout_depth": None, "selection": None,
               "prior_power": None, "prior_decay": None, "leaf": None, "leaf_steps": None, "leaf_value": "network",
               "commit": None, "auto_simulations": None, "leaf_batch": None, "value_checkpoint": None,
               "focus": None, "start": None},
    "cpsat": {"workers": 1, "minimize_peak": False, "deterministic": True, "build_baselines": True},
    "lns": {"workers": 1, "minimize_peak": False}, "select-pack": {"workers": 1, "minimize_peak": False},
    "portfolio": {"workers": 2, "minimize_peak": False, "solvers": None},
    "pack-search": {"minimize_peak": False},
    "msa": {"max_retries": 3, "max_overlap": "buffer", "variants": True, "overlap_ratio": 10.0,
            "variants_seconds": None},
}


@pytest.mark.parametrize("name", sorted(OLD_OPTIONS))
def test_every_built_in_declares_its_options_with_the_old_names_and_defaults(name):
    solver = load_solver(name)
    assert isinstance(solver, Solver) and contract_error(solver) is None
    assert check_options_class(solver.Options) is None
    assert {i.name: i.default for i in solver.Options.described()} == OLD_OPTIONS[name]
    assert all(i.doc for i in solver.Options.described())


def test_the_request_parses_with_the_solvers_options_and_carries_the_facts():
    from mallocgame.solvers.mcts import MCTSSolver

    p = load_problem("example:layered150")
    request = MCTSSolver.request(p, time_limit=2.0, seed=5, simulations=4)
    assert request.options == MCTSSolver.Options(simulations=4) and request.seed == 5
    assert request.hardware is p.hardware and request.budget.seconds == 2.0
    assert request.facts is session_for(p, p.hardware)
    with pytest.raises(InputError, match="did you mean 'simulations'"):
        MCTSSolver.request(p, time_limit=1.0, simulatons=4)
    assert isinstance(SolveRequest.of(p, time_limit=1.0).options, Options)
    assert {"SolveRequest", "Budget", "Options", "option", "Solver"} <= set(mallocgame.__all__)
    assert mallocgame.SolveRequest is SolveRequest and mallocgame.option is option


def test_the_api_checks_options_with_the_solvers_options():
    p = load_problem("example:layered150")
    with pytest.raises(InputError) as err:
        mallocgame.solve(p, "mcts", time_limit=1, simulatons=4)
    assert "takes no option 'simulatons'" in str(err.value) and "did you mean 'simulations'" in str(err.value)
    with pytest.raises(InputError, match="^windows: must be an integer from 1 to 3, got 5$"):
        mallocgame.solve(p, "mcts", time_limit=1, windows=5)
    with pytest.raises(InputError, match="^order: must be one of start, xla, size, got 'random'$"):
        mallocgame.solve(p, "mcts", time_limit=1, order="random")


# ---------------------------------------------------------------------------- the doors


def test_solvers_name_lists_each_option():
    r = run_cli("solvers", "mcts")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("mcts  map,pack,prefetch  ")
    rows = {line.split()[0]: line for line in lines[3:]}
    assert set(rows) == set(OLD_OPTIONS["mcts"])
    assert rows["windows"].split()[:5] == ["windows", "int", "2", "from", "1"] and "copy windows" in rows["windows"]
    assert "one of greedy, random" in rows["rollout"]
    none = run_cli("solvers", "greedy-xla")
    assert none.returncode == 0 and none.stdout.splitlines()[-1] == "options: none"
    bad = run_cli("solvers", "mctz")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "did you mean 'mcts'" in bad.stderr


def test_a_bad_solver_option_value_is_one_line_exit_2():
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "mcts", "--solver-option", "windows=5")
    assert r.returncode == 2 and r.stderr.strip() == "error: --solver-option windows=5: must be an integer from 1 to 3, got 5"
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "msa", "--mode", "prefetch",
                "--solver-option", "max_overlap=both")
    assert r.returncode == 2 and "must be one of buffer, memory, got 'both'" in r.stderr
    # a text option's value stays text (the kind comes from the Options): '1', not the integer 1
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "msa", "--mode", "prefetch",
                "--solver-option", "max_overlap=1")
    assert r.returncode == 2 and r.stderr.strip().endswith("must be one of buffer, memory, got '1'"), r.stderr
    r = run_cli("compare", str(DATA / "layered150.json"), "--solvers", "mcts", "--solver-option", "order=1")
    assert r.returncode == 2 and r.stderr.strip().endswith("must be one of start, xla, size, got '1'"), r.stderr


OLD_STYLE = '''
"""A solver on the contract before the request (refused)."""
from mallocgame.problem.model import Solution, Status
from mallocgame.engine.protocol import Solver


class OldStyle(Solver):
    name = "old-style"
    modes = frozenset({"map"})

    def solve(self, problem, hardware, *, time_limit, seed, hint=None):
        return Solution((None,) * problem.n, Status.FEASIBLE, problem.mode)
'''

UNDOCUMENTED = '''
"""A solver whose Options has a field without a doc (refused)."""
from dataclasses import dataclass

from mallocgame.problem.model import Solution, Status
from mallocgame.engine.protocol import Solver
from mallocgame.engine.request import Options


@dataclass(frozen=True)
class Bare(Options):
    rounds: int = 3


class Undocumented(Solver):
    name = "undocumented"
    modes = frozenset({"map"})
    Options = Bare

    def solve(self, request):
        return Solution((None,) * request.problem.n, Status.FEASIBLE, request.problem.mode)
'''


def test_check_solver_refuses_a_plugin_off_the_contract_in_one_line(tmp_path):
    make_distribution(tmp_path, "old-plugin", "old-style = old_style:OldStyle\nundocumented = undocumented:Undocumented",
                      {"old_style.py": OLD_STYLE, "undocumented.py": UNDOCUMENTED})
    env = {"PYTHONPATH": str(tmp_path)}
    r = run_cli("check-solver", "old-style", env=env)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    assert "solve(problem, hardware, time_limit, seed, hint) does not take one request" in r.stderr
    assert "solve(self, request: mallocgame.SolveRequest) -> mallocgame.Solution" in r.stderr
    r = run_cli("solve", str(DATA / "layered150.json"), "--solver", "old-style", env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not take one request" in r.stderr
    r = run_cli("check-solver", "undocumented", env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "field 'rounds' has no doc" in r.stderr


def test_the_contract_refuses_what_is_not_a_solver():
    class Duck:
        name = "duck"

        def solve(self, request):
            return None

    assert "not a subclass of mallocgame.Solver" in contract_error(Duck())

    @dataclass
    class Thawed:  # a dataclass, but not frozen and not a mallocgame.Options
        rounds: int = 1

    class Warm(Solver):
        Options = Thawed

        def solve(self, request):
            return None

    assert "not a frozen dataclass subclassing mallocgame.Options" in contract_error(Warm())
    assert all(contract_error(load_solver(name)) is None for name in solver_entries() if name in OLD_OPTIONS)


def test_a_share_keeps_back_and_caps_and_search_part_keeps_back_the_answer_time():
    parent = Budget(10.0, time.monotonic())
    child = parent.share(0.5, keep=1.0, at_most=3.0)
    assert child.seconds == 3.0 and child.deadline <= parent.deadline
    assert parent.share(0.5, keep=4.5).seconds <= 0.5
    assert parent.share(0.5, keep=100.0).seconds == 0.0  # spent, never negative
    kept = parent.search_part(n=1000, extra=0.1)
    assert kept.started == parent.started and kept.deadline == pytest.approx(parent.deadline - 0.05 - 0.1 - 1000 * 2e-5)


# ---------------------------------------------------------------------------- handed down: budget and facts

class _Recorder(Solver):
    """A solver that records the request it is asked and answers nothing."""

    name = "recorder"
    modes = frozenset({"map", "pack", "prefetch"})
    seen: list = []

    def solve(self, request: SolveRequest):
        _Recorder.seen.append(request)
        return mallocgame.Solution((None,) * request.problem.n, mallocgame.Status.UNKNOWN, request.problem.mode,
                                   solver=self.name)


def test_run_solver_hands_the_callers_budget_and_facts_to_the_solver(monkeypatch):
    from mallocgame.engine import runner
    from mallocgame.engine.session import Session

    monkeypatch.setattr(runner, "load_solver", lambda name: _Recorder())
    _Recorder.seen.clear()
    p = load_problem("example:layered150")
    parent = Budget.start(10.0)
    member = parent.share(0.25)
    own = Session(p, p.hardware)  # not this process's facts of the problem: a caller's own
    runner.run_solver("recorder", p, p.hardware, budget=member, seed=1, facts=own)
    runner.run_solver("recorder", p, p.hardware, time_limit=2.0, seed=1)
    handed, door = _Recorder.seen
    assert handed.budget is member and handed.facts is own
    assert door.budget.seconds == 2.0 and door.facts is session_for(p, p.hardware)
    with pytest.raises(TypeError, match="budget or a time_limit"):
        runner.run_solver("recorder", p, p.hardware, seed=1)


def test_a_request_refuses_the_facts_of_another_problem():
    from mallocgame.engine.session import Session

    p = load_problem("example:layered150")
    q = p.replace(name="other")
    with pytest.raises(ValueError, match="facts are those of its problem"):
        SolveRequest.of(p, time_limit=1.0, facts=Session(q, q.hardware))
    assert SolveRequest.of(p, time_limit=1.0, facts=(mine := Session(p, p.hardware))).facts is mine


def test_the_solve_path_hands_one_budget_and_the_facts_down_to_the_solver_and_warm_start(monkeypatch):
    """solve_with_warm_start: the warm start gets WARM_START_SHARE of the budget, the solver the rest, both within
    it, both with the caller's facts (a pool's run and the CLI's child hand theirs)."""
    from mallocgame.engine import runner, solving
    from mallocgame.engine.session import Session

    monkeypatch.setattr(runner, "load_solver", lambda name: _Recorder())
    monkeypatch.setattr(solving, "solver_modes", lambda entry: frozenset({"map", "pack", "prefetch"}))
    monkeypatch.setattr(solving, "solver_entry", lambda name: None)
    _Recorder.seen.clear()
    p = load_problem("example:layered150")
    own = Session(p, p.hardware)
    budget = Budget.start(10.0)
    solving.solve_with_warm_start("recorder", p, p.hardware, budget=budget, seed=0, warm_start="recorder",
                                  compute_bound=False, facts=own)
    first, main = _Recorder.seen
    assert first.budget.seconds <= solving.WARM_START_SHARE * 10.0 and first.budget.deadline <= budget.deadline
    assert main.budget.deadline == pytest.approx(budget.deadline) and main.budget.seconds <= 10.0
    assert first.facts is own and main.facts is own
