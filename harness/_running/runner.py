"""Running one check: build the context, call the verifier, compare with what the text states."""

from __future__ import annotations

import dataclasses
import hashlib
import time
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.expect import Comparison, compare, perturbations
from claims_harness._claims.formats import PROFILES, PYTEST_FLAG, SHRINK_FLAG
from claims_harness._claims.plain import Declined, as_plain_observation, to_jsonable
from claims_harness._claims.registry import Verifier
from claims_harness._claims.schema import Check
from claims_harness._running.cache import ObservationCache, cache_key
from claims_harness._running.context import Context, ImplementationView
from claims_harness._running.executor import SeedRunner, time_limit
from claims_harness._running.implementation import (
    import_implementation,
    reference_directory,
    reference_implementation,
)
from claims_harness._running.isolation import run_isolated
from claims_harness._running.options import RunOptions
from claims_harness._running.processes import supported as isolation_supported
from claims_harness._running.protocol import stubs_as_not_implemented_yet
from claims_harness._running.reaching import REACHED_KEY
from claims_harness._running.reaching import recording as reaching
from claims_harness._running.remote import connect, in_process, server_starter
from claims_harness._running.replay import (
    CALLS_KEY,
    REPLAY_KEY,
    float_answers,
    needs_bound,
    recording,
    replay_comparisons,
    replayable,
    verdicts,
    with_bounds,
)
from claims_harness.errors import (
    CheckCrashed,
    CheckTimeout,
    ClaimsError,
    Inexpressible,
    NotImplementedYet,
    Unsupported,
    VerifierError,
)

# The observation under which a check judged by its verifier's float twin says so (``verifier(in_floats=...)``).
IN_FLOATS_KEY = "__judged_in_floats__"
# The observation of a check that met functions not written yet: cached like any other, so that a run with no edit
# does not run again every check waiting for a stub (the key covers the code of the functions it reaches).
NOT_IMPLEMENTED_KEY = "__not_implemented_yet__"


@dataclass
class CheckResult:
    """What one check did: the verdict and every piece of evidence behind it."""

    kind: str
    verifier: str
    verifier_location: str
    uses: list[str]
    status: str
    seed: int
    seconds: float
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    skip_reason: str | None = None
    not_judged: str | None = None  # why the implementation kept this check from being judged (NOT_JUDGED_REASONS)
    not_implemented: list[str] = field(default_factory=list)
    not_checked: dict[str, str] = field(default_factory=dict)  # expected key -> why it was not compared
    error_in: list[str] = field(default_factory=list)  # the one function an error is about, when it names one
    blamed: list[str] = field(default_factory=list)  # of a failed check's functions, those wrong on their own
    in_floats: str = ""  # "twin" or "replay": judged in float64, the implementation declining exact arithmetic
    sharpness: list[dict[str, Any]] = field(default_factory=list)
    reached: dict[str, dict[str, int]] = field(default_factory=dict)  # dimension -> value -> examples that reached it
    reused: bool = False
    reproduce: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_names(entry: ClaimEntry) -> list[str]:
    """Item names of a claim's checks: the kind, with ``-2``, ``-3`` for a repeated kind."""
    assert entry.claim is not None
    names, counts = [], {}
    for check in entry.claim.checks:
        counts[check.kind] = counts.get(check.kind, 0) + 1
        names.append(check.kind if counts[check.kind] == 1 else f"{check.kind}-{counts[check.kind]}")
    return names


def check_seed(global_seed: int, claim_id: str, index: int) -> int:
    """A seed that depends only on the global seed, the claim and the check's position."""
    digest = hashlib.sha256(f"{global_seed}:{claim_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def reproduce_command(entry: ClaimEntry, index: int, options: RunOptions) -> str:
    node = f"{entry.file}::{entry.id}::{check_names(entry)[index]}"
    return (f"pytest '{node}' --claims-impl {options.impl} --claims-profile {options.profile} "
            f"--claims-seed {options.seed}" + (f" {PYTEST_FLAG}" if options.allow_reference else "")
            + (f" {SHRINK_FLAG}" if options.shrink else ""))


class _MustRun(Exception):
    """The check's observations are not in the cache: only running its verifier can give them."""


def reuse_check(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions) -> CheckResult | None:
    """The result :func:`run_check` gives, when it needs no verifier to run: a skip, or cached observations
    compared anew; None otherwise."""
    try:
        return run_check(entry, index, verifier, options, reuse_only=True)
    except _MustRun:
        return None


def run_check(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, *, reuse_only: bool = False
              ) -> CheckResult:
    """Run check ``index`` of a loaded claim; never raises for a misbehaving verifier or impl."""
    assert entry.claim is not None
    check = entry.claim.checks[index]
    seed = options.check_seed if options.check_seed is not None else check_seed(options.seed, entry.id, index)
    result = CheckResult(check.kind, verifier.name, verifier.location, list(verifier.uses), "error", seed, 0.0,
                         reproduce=reproduce_command(entry, index, options))
    if options.profile not in check.profiles:
        result.status = "skipped"
        result.skip_reason = (f"runs only in the {' and '.join(check.profiles)} profile; "
                              f"this run's profile is {options.profile}")
        return result
    if options.unimportable and verifier.uses:
        result.status = "skipped"
        result.skip_reason = (f"not run: it calls the implementation '{options.impl}', which cannot be imported "
                              "(the run's one error says why)")
        result.not_judged = "not imported"
        return result
    started = time.perf_counter()
    try:
        cached = options.cache_dir and not _changes_observations(options)
        cache = ObservationCache(Path(options.cache_dir)) if cached else None
        key = cache_key(entry, index, verifier, impl=options.impl, profile=options.profile, seed=seed,
                        alpha=alpha_per_comparison(check), scope=options.scope, directory=options.directory,
                        from_reference=options.from_reference) if cache else ""
        observed = cache.load(key, options.figures_dir) if cache else None
        result.reused = observed is not None
        if observed is None and reuse_only:
            raise _MustRun
        if observed is None:
            limit = check.timeout or PROFILES[options.profile].timeout
            try:
                try:
                    observed = _observe_supervised(entry, index, verifier, options, seed, limit)
                except Inexpressible:
                    if verifier.in_floats is not None:
                        raise
                    observed = _replayed(entry, index, verifier, options, seed, limit)
            except NotImplementedYet as error:
                observed = {NOT_IMPLEMENTED_KEY: list(error.functions)}
            if cache:
                cache.store(key, observed, options.figures_dir)
        if NOT_IMPLEMENTED_KEY in observed:
            raise NotImplementedYet(observed[NOT_IMPLEMENTED_KEY])
        observed = dict(observed)
        result.reached = observed.pop(REACHED_KEY, None) or {}
        result.in_floats = "twin" if observed.pop(IN_FLOATS_KEY, False) else ""
        replayed = observed.pop(REPLAY_KEY, None)
        missing = [key for key in check.expect if key not in observed]
        if missing:
            raise ClaimsError(f"verifier '{verifier.name}' did not report {', '.join(map(repr, missing))}; "
                              f"it reported: {', '.join(map(repr, observed)) or 'nothing'}")
        result.not_checked = {key: observed[key].reason for key in check.expect if isinstance(observed[key], Declined)}
        compared = {key: expectation for key, expectation in check.expect.items() if key not in result.not_checked}
        comparisons: list[Comparison] = []
        for key, expectation in compared.items():
            comparisons.extend(compare(key, expectation, observed[key]))
        if replayed is not None:
            if not all(c.passed for c in comparisons):
                failed = ", ".join(dict.fromkeys(c.key for c in comparisons if not c.passed))
                raise ClaimsError(f"the reference implementation fails this check ({failed}), so "
                                  "its calls cannot judge an implementation in floats; run the check against the "
                                  "reference and mend it first")
            compared, comparisons, observed = {}, replay_comparisons(replayed), {}
            result.in_floats = "replay"
            result.blamed = [function for function, verdict in replayed.items() if verdict["wrong"]]
        result.comparisons = [asdict(c) for c in comparisons]
        result.sharpness = [record for key, expectation in compared.items()
                            for record in perturbations(key, expectation, observed[key], check.insensitive)]
        result.observed = {str(key): to_jsonable(value) for key, value in observed.items()}
        if not comparisons and replayed is None:
            result.status = "skipped"
            result.skip_reason = "; ".join(sorted(set(result.not_checked.values())))
            result.not_judged = "optional keyword"  # every observation declined: the implementation has no such call
        else:
            result.status = "passed" if all(c.passed for c in comparisons) else "failed"
        if result.status == "failed" and replayed is None:  # a replay blames the functions whose calls were off
            result.blamed = blamed_functions(entry, index, verifier, options, reuse_only=reuse_only)
    except (KeyboardInterrupt, _MustRun):
        raise
    except NotImplementedYet as error:
        result.status = "skipped"
        result.not_implemented = list(error.functions)
        them = "it" if len(error.functions) == 1 else "them"
        result.skip_reason = f"{error}: the check runs once the implementation has {them}"
    except (Inexpressible, Unsupported) as error:
        result.status = "skipped"
        result.skip_reason = str(error)
        result.not_judged = "exact arithmetic" if isinstance(error, Inexpressible) else "optional keyword"
    except BaseException as error:
        if reuse_only and not result.reused:  # e.g. no cache key: running the check will say what is wrong
            raise _MustRun from error
        # A verifier's own bug, even sys.exit(), becomes an error row, never a lost or passed check.
        result.error = str(error) if isinstance(error, ClaimsError) else traceback.format_exc(limit=-8)
        blamed = getattr(error, "function", None)
        result.error_in = [blamed] if isinstance(blamed, str) and blamed in verifier.uses else []
        if not result.error_in and not isinstance(error, CheckTimeout | CheckCrashed | VerifierError):
            # An error that names no function (a wrong shape the verifier trips on): those with which the check
            # still goes wrong when run alone, if fewer than all (a time limit, or a process killed at it, is not
            # waited out once per function).
            alone = blamed_functions(entry, index, verifier, options, reuse_only=reuse_only)
            result.error_in = alone if len(alone) < len(set(verifier.uses)) else []
    result.seconds = round(time.perf_counter() - started, 4)
    return result


def blamed_functions(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, *,
                     reuse_only: bool = False) -> list[str]:
    """Which functions of a failed check (or of one that erred without naming a function) are wrong on their own: each
    is run alone, the check's other functions served as the reference defines them, and is blamed when the check
    still does not pass. All of them when none fails alone (the failure is in how they meet), and when the check is
    not run again: it calls one function, the run did not ask (``options.blame``), is of the reference or its
    mutants, or it is an experiment, whose seeds cost too much to run once per function (the report then blames
    those of its functions that another check blamed, ``report.blame_experiments_as_the_run``).
    The runs alone are cached like any check's (their key names the functions served from the reference), so a
    warm run blames as the cold one did; ``reuse_only`` asks only the cache, as :func:`reuse_check` does.
    """
    assert entry.claim is not None
    uses = list(dict.fromkeys(verifier.uses))
    if (len(uses) < 2 or not options.blame or options.from_reference or options.in_process
            or entry.claim.checks[index].kind == "experiment" or options.impl == reference_implementation()):
        return uses
    alone = [function for function in uses if run_check(entry, index, verifier, dataclasses.replace(
        options, from_reference=tuple(other for other in uses if other != function)), reuse_only=reuse_only
    ).status != "passed"]
    return alone or uses


def error_result(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, why: str) -> CheckResult:
    """The row of a check that has no result of its own, e.g. one whose result never reached the report."""
    assert entry.claim is not None
    seed = options.check_seed if options.check_seed is not None else check_seed(options.seed, entry.id, index)
    return CheckResult(entry.claim.checks[index].kind, verifier.name, verifier.location, list(verifier.uses), "error",
                       seed, 0.0, error=why, reproduce=reproduce_command(entry, index, options))


def _observe_supervised(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, seed: int,
                        limit: float, record: bool = False) -> dict[str, Any]:
    """The verifier's observations, computed in a supervised worker forked from this process
    (``claims_harness._running.isolation``), which reaches the implementation, if the verifier calls it, through a
    server of its own in the implementation's process (``claims_harness._running.remote``). With ``record``, the
    calls it made ride along, each with its rounding bounds (``replay``)."""
    observe = partial(_observe_plain, entry, index, verifier, options, seed, limit, record=record)
    return _supervised(observe, entry, index, options, limit, bool(verifier.uses))


def _supervised(observe: Any, entry: ClaimEntry, index: int, options: RunOptions, limit: float,
                calls_implementation: bool) -> Any:
    """``observe()``, or ``observe(connection)`` with a server of the implementation, in a supervised worker."""
    server = server_starter(options.impl, options.directory, options.from_reference) \
        if calls_implementation and not options.in_process else None
    if not (options.isolation and isolation_supported()):
        if server is None:
            return observe()
        connection, end = server(2)
        try:
            return observe(connection)
        finally:
            connection.close()
            end(False)
    assert entry.claim is not None
    what = f"claim '{entry.id}' check {index + 1} ({entry.claim.checks[index].kind})"
    return run_isolated(observe, limit, what, server)


def _observe_plain(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, seed: int, limit: float,
                   connection: Any = None, record: bool = False) -> dict[str, Any]:
    with time_limit(limit):
        observed = dict(_observe(entry, index, verifier, options, seed, limit, connection, record))
    calls = {CALLS_KEY: observed.pop(CALLS_KEY)} if record else {}  # data already, named tuples kept whole
    return {**as_plain_observation(observed), **calls}


def _replayed(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, seed: int, limit: float
              ) -> dict[str, Any]:
    """A check the implementation declined for its fractions, judged by replay (``claims_harness._running.replay``):
    the reference's exact observations, its calls recorded (a process of the reference alone serves them: the
    implementation under test has no part in what it is judged against), and the implementation's float answers to
    those calls, judged against them (``REPLAY_KEY``)."""
    if options.impl == reference_implementation():
        raise VerifierError(f"the reference implementation '{options.impl}' answered this check's Fractions in floats; "
                            "replay would judge it against itself: a function the contract says is exact must answer "
                            "Fractions with Fractions")
    reference = dataclasses.replace(options, impl=reference_implementation(), directory=reference_directory(),
                                    from_reference=())
    exact = dict(_observe_supervised(entry, index, verifier, reference, seed, limit, record=True))
    calls = exact.pop(CALLS_KEY)
    replayed = [call for call in calls if "not_replayed" not in call]
    if not replayed:
        raise Inexpressible("needs exact arithmetic: this check passes Fractions, which the implementation declines, "
                            "and none of its calls can be made again in float64 ("
                            + ("; ".join(sorted({call["not_replayed"] for call in calls})) or "it makes none") + ")")
    answers = _supervised(partial(_in_worker, float_answers, options.impl, replayed, limit), entry, index, options,
                          limit, True)
    # Only an answer off by more than its own rounding needs its call's bound, which costs calls of the reference.
    needed = [position for position, answer in enumerate(answers) if needs_bound(replayed[position], answer)]
    if needed:
        bounding = partial(with_bounds, seconds=limit / 2)  # the rest of the limit for the calls under way
        bounded = _supervised(partial(_in_worker, bounding, reference.impl, [replayed[i] for i in needed], limit),
                              entry, index, reference, limit, True)
        for position, call in zip(needed, bounded, strict=True):
            replayed[position] = call
    left = [call for call in calls if "not_replayed" in call]
    found = verdicts([*replayed, *left], [*answers, *({} for _ in left)])
    unjudged = {why for verdict in found.values() for why in verdict["not_replayed"]}
    if unjudged and not any(verdict["wrong"] for verdict in found.values()):
        # A call not made again leaves its function unjudged on this check: not judged is not green.
        raise Inexpressible("needs exact arithmetic: this check passes Fractions, which the implementation declines, "
                            f"and some of its calls cannot be made again in float64 ({'; '.join(sorted(unjudged))})")
    return {**exact, REPLAY_KEY: found}


def _in_worker(function: Any, impl: str, calls: list[dict[str, Any]], limit: float, connection: Any) -> Any:
    """``function(module, calls)`` with the implementation ``impl`` reached through ``connection``."""
    # A function that raised NotImplementedError for these inputs is not written yet, as anywhere.
    with stubs_as_not_implemented_yet(), time_limit(limit):
        return function(connect(connection, impl), calls)


def _implementation(options: RunOptions, verifier: Verifier, connection: Any) -> Any:
    """The implementation as this check reaches it: through its server's connection; in this process, as data all the
    same, for the course's own mutants (``in_process``); a module of nothing for a verifier that calls none."""
    if not verifier.uses:
        return ModuleType(options.impl)
    if connection is None:
        return in_process(import_implementation(options.impl))
    return connect(connection, options.impl)


def _observe(entry: ClaimEntry, index: int, verifier: Verifier, options: RunOptions, seed: int, limit: float,
             connection: Any = None, record: bool = False) -> Mapping[str, Any]:
    assert entry.claim is not None
    check = entry.claim.checks[index]
    # A verifier that uses no function of the implementation (a sympy proof, say) runs without it.
    module = _implementation(options, verifier, connection)
    view = ImplementationView(module, verifier.uses, verifier.name, entry.id, inputs_guarded=check.kind != "experiment")
    missing = view.missing()
    if missing:
        raise ClaimsError(f"implementation '{options.impl}' has no function {', '.join(map(repr, missing))} "
                          f"(needed by claim '{entry.id}', verifier '{verifier.name}')")
    stubs = view.unimplemented()
    if stubs:
        raise NotImplementedYet(stubs)
    context = Context(
        impl=view,
        params=verifier.params.model_validate(check.params),
        rng=np.random.default_rng(seed),
        seed=seed,
        profile=options.profile,
        alpha=alpha_per_comparison(check, options.alpha),
        beta=check.beta,
        deviation=check.deviation,
        figures_dir=options.figures_dir,
        seed_runner=SeedRunner(options.impl, options.directory, tuple(verifier.uses), verifier.name, entry.id,
                               options.scheduler, options.workers, time.time() + limit, limit),
        shift=options.shift_in_deviations * (check.deviation or 0.0),
        shrink=options.shrink,
    )
    if record:  # the reference serves every function: the calls are kept, to be made again in floats (replay)
        with recording(module) as calls:
            observed, reached = _observed_by(verifier.function, verifier.name, context, options)
        observed = {**observed, CALLS_KEY: replayable(calls)}
    else:
        try:
            observed, reached = _observed_by(verifier.function, verifier.name, context, options)
        except Inexpressible:
            if verifier.in_floats is None:
                raise
            # The implementation declines fractions: the same statement is judged by the float twin, from the same
            # seed.
            observed, reached = _observed_by(verifier.in_floats, f"{verifier.name} (its float twin)",
                                             dataclasses.replace(context, rng=np.random.default_rng(seed)), options)
            observed = {**observed, IN_FLOATS_KEY: True}
    if REACHED_KEY in observed:
        raise VerifierError(f"verifier '{verifier.name}' reports '{REACHED_KEY}', the name under which the harness "
                            "carries what its examples reached (claims_harness.reach); report that value under another "
                            "name")
    return {**observed, REACHED_KEY: reached}


def _observed_by(function: Any, name: str, context: Context, options: RunOptions) -> tuple[Mapping[str, Any], Any]:
    """What ``function`` (a verifier, or its float twin) observes, and what its examples reached."""
    # A stub the verifier reached without declaring it (a function the declared ones call, say) is not written yet.
    with stubs_as_not_implemented_yet(), reaching(options.scope) as reached:
        observed = function(context)
    if not isinstance(observed, Mapping):
        raise ClaimsError(f"verifier '{name}' returned {type(observed).__name__}; "
                          "a verifier returns a mapping of observed names to values")
    return observed, reached.as_data()


def _changes_observations(options: RunOptions) -> bool:
    """Whether the run changes what a check observes beyond its inputs and code: then nothing is cached."""
    return (options.alpha is not None or bool(options.shift_in_deviations) or options.check_seed is not None
            or options.shrink)


def alpha_per_comparison(check: Check, alpha: float | None = None) -> float:
    """The check's false-failure rate (or ``alpha``) split evenly over the comparisons an interval decides."""
    statistical = sum(expectation.statistical_conditions() for expectation in check.expect.values())
    return (alpha or check.alpha) / max(statistical, 1)
