"""A prefetch portfolio runs map-only members in map mode and lifts their answers (hybrid.portfolio)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import mallocgame
from mallocgame.engine.report import score
from mallocgame.engine.session import MSA_VARIANTS, session_for
from mallocgame.formats.lift import lift_map_answer
from mallocgame.hardware.prefetch_cost import PrefetchEvaluator
from mallocgame.hybrid.portfolio import GAME_GREEDY, REFILL_SHARE, REFILL_SOLVER, _Race, lifted_members, member_names
from mallocgame.runtime.budget import Budget


def test_map_members_are_lifted_in_prefetch_mode_only():
    names = member_names("prefetch", "msa,select-pack,greedy-xla")
    assert names == ["msa", "select-pack", "greedy-xla"]
    assert lifted_members(names) == {"select-pack", "greedy-xla"}
    assert member_names("pack", "msa,best-fit") == ["best-fit"]


def test_a_lifted_member_wins_when_it_is_best_and_its_answer_is_valid():
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    result = mallocgame.solve(problem, "portfolio", time_limit=6, solvers="msa,select-pack", seed=0)
    assert result.valid
    members = result.solution.stats["members"]
    assert set(members) >= {"msa", "select-pack"} and members["select-pack"]["valid"]
    map_answer = mallocgame.solve(problem.replace(mode="map"), "select-pack", time_limit=3, seed=0)
    lifted = PrefetchEvaluator.of(problem, problem.hardware).value(lift_map_answer(problem, map_answer.solution.offsets))
    assert members["select-pack"]["status"] == "FEASIBLE"  # a map optimum is never reported as a prefetch one
    assert result.objective >= max(members["msa"]["objective"], 0.99 * lifted)
    assert mallocgame.validate(problem, result.solution)


def test_the_map_member_starts_at_once_and_reports_before_the_deadline():
    # Its child used to import scipy.optimize outside its own clock, ran past the race's deadline and was
    # killed unheard; now the portfolio imports every member's preload before the forks. In a fresh
    # interpreter: this process has imported scipy already, and forked members would inherit it.
    # gpt2-tiny-train-adam: select-pack uses all its time there (on small examples it finishes early).
    script = ("import json, mallocgame\n"
              "from mallocgame.inputs.load import prepare\n"
              "from mallocgame.inputs.suites import suite_entries\n"
              "e = [e for e in suite_entries('xla') if e.name == 'gpt2-tiny-train-adam'][0]\n"
              "p = prepare(e.build(), mode='prefetch')[0]\n"
              "r = mallocgame.solve(p, 'portfolio', time_limit=8, solvers='msa,select-pack,cpsat', seed=0)\n"
              "print(json.dumps([r.solution.stats['errors'], sorted(r.solution.stats['members'])]))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    errors, members = json.loads(done.stdout.strip().splitlines()[-1])
    # a window search may be replaced by one from a better start (a baseline built while the members run), never
    # killed unheard at the deadline
    assert "select-pack" not in errors, errors
    assert all("took its place" in why for key, why in errors.items() if key.startswith("cpsat")), errors
    assert set(members) >= {"msa", "select-pack"} and any(m.startswith("cpsat") for m in members), members


def test_a_free_slot_reruns_the_window_search_from_a_new_best_answer_once():
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    hw = problem.hardware
    best = session_for(problem, hw).best_baseline()
    report = score(problem, hw, best.solution(problem), seconds=0.0, bound=None, solver_name="select-pack")
    t0 = time.monotonic()
    race = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted={"select-pack"}, session=session_for(problem, hw))
    started: set = set()
    assert race.refill(0, started, True, []) is None  # no answer yet
    race.consider("select-pack", report)
    key, name, hint, seed, stop = race.refill(0, started, True, [])
    assert (name, key, stop) == (REFILL_SOLVER, f"{REFILL_SOLVER}-from-select-pack", None) and seed == 1
    assert mallocgame.validate(problem, hint) and list(hint.intervals) == list(report.intervals)
    assert race.refill(0, started, True, []) is None  # once per answer's source
    spent = Budget(10.0, time.monotonic() - 10.0 + 0.5 * REFILL_SHARE * 10.0)  # too little of it left
    late = _Race(problem, hw, spent, minimize_peak=False, lifted=set(), session=session_for(problem, hw))
    late.consider("select-pack", report)
    assert late.refill(0, set(), True, []) is None  # too little of the time left


def test_a_better_start_takes_the_place_of_the_window_search_from_a_worse_one_when_no_slot_is_free():
    """No free slot: a new best answer replaces the running window search whose start is worth less by more than
    ``REPLACE_MARGIN`` (the worst of them), never one from an answer about as good, nor a run no longer running."""
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    hw = problem.hardware
    best = session_for(problem, hw).best_baseline()
    report = score(problem, hw, best.solution(problem), seconds=0.0, bound=None, solver_name="msa+overlap-100")
    t0 = time.monotonic()
    race = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted=set(), session=session_for(problem, hw))
    race.consider("msa+overlap-100", report)
    value = float(report.objective)
    race.window_runs.update({"cpsat": 0.5 * value, "cpsat-from-x": 0.9 * value, "cpsat-from-y": value,
                             "cpsat-from-z": 0.995 * value})
    assert race.refill(0, set(), False, ["cpsat-from-y"]) is None  # its start is as good
    assert race.refill(0, set(), False, ["cpsat-from-z"]) is None  # within REPLACE_MARGIN: keeps its search
    key, name, _, _, stop = race.refill(0, set(), False, ["cpsat", "cpsat-from-x", "cpsat-from-y"])
    assert (key, name, stop) == (f"{REFILL_SOLVER}-from-msa+overlap-100", REFILL_SOLVER, "cpsat")
    assert race.window_runs[key] == value
    assert race.refill(0, set(), False, ["cpsat-from-x"])[4] == "cpsat-from-x"  # only those running


def test_the_baselines_wait_for_the_early_members_then_are_built_once():
    """Prefetch mode's ``later`` hook builds the session's baselines once: when the members started early have
    reported (or failed), or at ``latest`` if they still run; it never settles the race."""
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    hw = problem.hardware
    t0 = time.monotonic()
    race = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted={"select-pack"}, session=session_for(problem, hw))
    hook = race.baselines_once(t0 + 5.0, after=["select-pack"], latest=t0 + 60.0)
    assert hook() is False and race.reports == {}  # select-pack still runs: nothing built yet
    race.errors["select-pack"] = "failed"
    assert hook() is False and race.best is not None and race.best.valid
    built = dict(race.reports)
    race.reports.clear()
    assert hook() is False and race.reports == {}  # once
    assert built
    late = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted={"select-pack"}, session=session_for(problem, hw))
    assert late.baselines_once(t0 + 5.0, after=["select-pack"], latest=t0)() is False and late.reports


def test_the_baselines_built_beside_the_members_include_msas_xla_variants():
    """The msa member builds msa's XLA variants only in its tenth of the limit; the race's baselines build them too
    (the portfolio never ends below the msa solver, which may have had the time for them)."""
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")  # a session of its own
    hw = problem.hardware
    session = session_for(problem, hw)
    race = _Race(problem, hw, Budget(10.0, time.monotonic()), minimize_peak=False, lifted=set(), session=session)
    assert race.baselines_once(time.monotonic() + 30.0, after=[], latest=0.0)() is False
    assert set(MSA_VARIANTS) <= {b.name for b in session.built()}
    variants = [b for b in session.built() if b.name in MSA_VARIANTS]
    assert race.best is not None and all(race.best.objective >= b.objective for b in variants)
    assert "all-slow" not in race.reports and any(name in race.reports for name in MSA_VARIANTS)
    late = _Race(problem, hw, Budget(10.0, time.monotonic()), minimize_peak=False, lifted=set(), session=session)
    late.run_variants(time.monotonic() - 1.0)  # no time left for them: no report (not the empty answer)
    assert late.reports == {}


def test_msas_variants_are_built_before_the_seeded_msa_run(monkeypatch):
    """msa+greedy-xla can take several msa runs' time on a large program: the variants come first."""
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")  # a session of its own
    hw = problem.hardware
    session = session_for(problem, hw)
    built, baseline = [], session.baseline

    def recorded(name, deadline=None):
        built.append(name)
        return baseline(name, deadline)

    monkeypatch.setattr(session, "baseline", recorded)
    race = _Race(problem, hw, Budget(10.0, time.monotonic()), minimize_peak=False, lifted=set(), session=session)
    race.baselines_once(time.monotonic() + 30.0, after=[], latest=0.0)()
    assert set(MSA_VARIANTS) | {"msa+greedy-xla"} <= set(built)
    assert max(built.index(v) for v in MSA_VARIANTS) < built.index("msa+greedy-xla")


def test_the_prefetch_games_greedy_is_a_validated_start_of_the_race():
    """The game played greedily to its end is reported like a member (validated, scored by the evaluator, the
    best answer when it beats the rest); a game its share of the time cuts short is dropped with a reason."""
    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    hw = problem.hardware
    t0 = time.monotonic()
    race = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted=set(), session=session_for(problem, hw))
    race.run_game_greedy(Budget.start(10.0))
    report = race.reports[GAME_GREEDY]
    assert report.valid and report.objective > 0
    assert report.objective == PrefetchEvaluator.of(problem, hw).value(list(report.intervals))
    assert race.best is report
    cut = _Race(problem, hw, Budget(10.0, t0), minimize_peak=False, lifted=set(), session=session_for(problem, hw))
    cut.run_game_greedy(Budget(1.0, time.monotonic() - 2.0))
    assert GAME_GREEDY not in cut.reports and GAME_GREEDY in cut.errors


def test_each_member_gets_a_child_budget_of_the_race_and_the_pool_keeps_its_deadline():
    """The portfolio's members get their time as child budgets of the race's (the portfolio's budget kept back for
    collecting answers), handed down through the pool, which stops a run at its budget's deadline + the grace."""
    from mallocgame.engine.pools import ProcessPool
    from mallocgame.engine.protocol import LIMIT_GRACE
    from mallocgame.hybrid.portfolio import COLLECT, member_budget

    problem = mallocgame.load_problem("example:layered150", mode="prefetch")
    hw = problem.hardware
    budget = Budget.start(10.0)
    race = _Race(problem, hw, budget, minimize_peak=False, lifted=set(), session=session_for(problem, hw))
    assert race.race.started == budget.started
    assert race.race.deadline == budget.search_part(n=problem.n, extra=COLLECT).deadline
    one, half = member_budget(problem, race.race), member_budget(problem, race.race, slots_left=2)
    assert one.deadline <= race.race.deadline and half.deadline < one.deadline and half.seconds < one.seconds / 2
    with ProcessPool(1) as pool:
        pool.start("msa", "msa", problem, hw, budget=half, seed=0, facts=race.session)
        (run,) = pool._runs.values()
        assert run.call.sent.until == half.deadline + LIMIT_GRACE and run.judge.time_limit == half.seconds
        (finished,) = pool.wait(timeout=30)
    key, kind, report = finished
    assert (key, kind) == ("msa", "ok") and report.valid
