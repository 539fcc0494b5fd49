"""The pytest plugin's entry point (``pytest11``): the ``--claims-*`` options everywhere the package is installed, and
the hooks (``claims_harness._pytest_hooks``) only where they belong.

pytest loads this module in every run of an environment the package is installed in, a student's own course code
included. So it imports next to nothing, and it stays inert unless the run is a course's: pytest started inside a
project whose ``pyproject.toml`` has a ``[tool.claims]`` table. Elsewhere pytest behaves exactly as without the
package, and a ``--claims-*`` option given there is refused in one line that says why.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from claims_harness._claims.course import find_root
from claims_harness._claims.formats import (
    DEFAULT_PROFILE,
    FALLBACK_ATTRIBUTE,
    IMPLEMENTATION_PATH_FLAG,
    PARTIAL_FLAG,
    PROFILES,
    PYTEST_FLAG,
    SHRINK_FLAG,
)

OPTION_PREFIX = "--claims-"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "claim verification (harness)")
    group.addoption("--claims-impl", default=None, metavar="MODULE",
                    help="the implementation under test (default: $CLAIMS_IMPL or the course's reference "
                         "implementation)")
    group.addoption(IMPLEMENTATION_PATH_FLAG, default=None, metavar="DIR",
                    help="where the implementation is looked for first, in its own process only (default: the "
                         "directory pytest was started in)")
    group.addoption(PYTEST_FLAG, action="store_true", default=False,
                    help="let the implementation take the functions it does not define from the reference (or another "
                         f"package) as they are; a module can say so itself with {FALLBACK_ATTRIBUTE} = True")
    group.addoption("--claims-profile", default=None, choices=PROFILES,
                    help="smoke: fast checks for every run; full: the release profile (default: $CLAIMS_PROFILE "
                         f"or {DEFAULT_PROFILE})")
    group.addoption("--claims-seed", type=int, default=None, metavar="N",
                    help="global seed every check's generator is derived from (default: $CLAIMS_SEED or 0)")
    group.addoption("--claims-report", default=None, metavar="DIR",
                    help="write claims.json, claims_report.md and claims_report.html to DIR after the run")
    group.addoption("--claims-cache", default=None, metavar="DIR",
                    help="reuse observations of checks whose inputs and code did not change, kept in DIR")
    group.addoption("--claims-scheduler", default=None, metavar="ADDRESS",
                    help="run experiments' seeds on a Dask scheduler, e.g. tcp://host:8786 (default: "
                         "$CLAIMS_SCHEDULER, else a local process pool)")
    group.addoption("--claims-workers", type=int, default=None, metavar="N",
                    help="processes of the local pool for experiments' seeds; 1 runs them in the checking process "
                         "(default: $CLAIMS_WORKERS, else the cores divided by the xdist workers)")
    group.addoption(SHRINK_FLAG, action="store_true", default=False,
                    help="shrink a failing property check's input to the smallest one in the smoke profile too (the "
                         "full profile always does; it takes seconds per failing check)")
    group.addoption(PARTIAL_FLAG, action="store_true", default=False,
                    help="a partial verdict, for a student's exercises: checks not judged (they wait for functions "
                         "not written yet, or the implementation declines them) do not fail the run, and its last "
                         "line says how much was judged")
    group.addoption("--claims-text", action="append", default=[], metavar="NAME=PATH",
                    help="read the course text's document NAME from PATH for the report (a revised copy; repeatable)")
    group.addoption("--claims-run-id", default=None, metavar="ID", help=argparse.SUPPRESS)


def pytest_configure(config: pytest.Config) -> None:
    """Register the hooks in a course's run (they are configured at once: pytest_configure is replayed)."""
    started_in = Path(config.invocation_params.dir)
    given = sorted({str(argument).partition("=")[0] for argument in config.invocation_params.args
                    if str(argument).startswith(OPTION_PREFIX)})
    if find_root(started_in) is None:
        if given:
            raise pytest.UsageError(
                f"{', '.join(given)}: {started_in.resolve()} is not inside a course (no pyproject.toml with a "
                "[tool.claims] table in it or above it); run pytest from the course's project, or leave out the "
                f"{OPTION_PREFIX}* options")
        return
    from claims_harness import _pytest_hooks

    config.pluginmanager.register(_pytest_hooks, "claims-hooks")
