"""How a run is configured (:class:`RunOptions`), immutable and built once: by a command from its arguments and the
environment (:func:`resolve_options`), by the pytest plugin from its options, or by a program."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claims_harness._claims.course import find_root, load_course
from claims_harness._claims.formats import DEFAULT_PROFILE
from claims_harness._claims.scope import Dimension
from claims_harness._running.implementation import reference_implementation


def course_scope() -> tuple[Dimension, ...]:
    """The scope dimensions of the course the working directory is in (none outside a course)."""
    root = find_root(Path.cwd())
    return load_course(root).scope if root is not None else ()


@dataclass(frozen=True)
class RunOptions:
    """How a run is configured: the implementation under test, the profile, the global seed.

    ``scheduler`` and ``workers`` say where experiments' seeds run (a Dask scheduler's address; processes of the
    local pool, 1 for none); neither changes a result, so neither is part of the cache key. Nor does
    ``allow_reference`` (``--claims-allow-reference``: the implementation may take functions it does not define from
    the reference), which only lets the run start and goes into every reproduce command. ``isolation`` off runs
    verifiers in the checking process (for ``--pdb``); ``staging_dir`` is where this run's report and figures are
    written before they replace the report directory's. ``unimportable`` is why the implementation could not be
    imported at the start of the run: the checks that call it are then skipped (the run reports that error once),
    and those that need no implementation still run.
    ``shrink`` shrinks a failing property's input in the smoke profile too (``--claims-shrink``). ``scope`` is
    the course's scope dimensions (``[tool.claims.scope]``; by default the course of the working directory's),
    which what a check's examples reach is recorded along (``claims_harness.reach``); without them nothing is recorded.
    ``in_process`` calls the implementation in the verifier's process (through the same messages of data), for the
    course's own mutants only (``claims mutants``: mutmut records what a check reaches in the process that calls it);
    any other implementation runs in a process of its own. ``directory`` is where the implementation is looked for
    first (where the run was started), in the implementation's process only: never on this process's import path.
    ``from_reference`` names functions served as the reference defines them: only the runs that tell which function
    of a failing check is wrong on its own (``claims_harness._running.runner.blamed_functions``) set it; ``blame``
    asks for those runs (the commands and the pytest plugin do, :func:`resolve_options`; a program that only wants
    verdicts need not pay for them).
    """

    impl: str = field(default_factory=reference_implementation)
    profile: str = DEFAULT_PROFILE
    seed: int = 0
    report_dir: str | None = None
    cache_dir: str | None = None
    alpha: float | None = None
    shift_in_deviations: float = 0.0
    check_seed: int | None = None
    scheduler: str | None = None
    workers: int = 1
    allow_reference: bool = False
    isolation: bool = True
    staging_dir: str | None = None
    run_id: str | None = None
    unimportable: str | None = None
    shrink: bool = False
    scope: tuple[Dimension, ...] = field(default_factory=course_scope)
    in_process: bool = False
    directory: str = field(default_factory=os.getcwd)
    from_reference: tuple[str, ...] = ()
    blame: bool = False

    @property
    def figures_dir(self) -> Path:
        # Figures go where the run stages its report, and reach the report directory only with the whole report.
        base = Path(self.staging_dir) if self.staging_dir else Path(tempfile.gettempdir()) / "claims-figures"
        return base / "figures"


def resolve_options(impl: str | None, profile: str | None, seed: int | None, **settings: Any) -> RunOptions:
    """The options of a run, with what the command line left out taken from $CLAIMS_IMPL, $CLAIMS_PROFILE and
    $CLAIMS_SEED, else the defaults: the reference implementation, the smoke profile, seed 0; a failed check's
    functions are blamed one by one (``blame``)."""
    return RunOptions(impl=impl or os.environ.get("CLAIMS_IMPL") or reference_implementation(),
                      profile=profile or os.environ.get("CLAIMS_PROFILE") or DEFAULT_PROFILE,
                      seed=seed if seed is not None else int(os.environ.get("CLAIMS_SEED", "0")),
                      **{"blame": True, **settings})
