"""The engine's API for tools and tests: load a course's claims, run its checks, judge and report them.

Verifier authors need only :mod:`claims_harness` (``verifier``, ``Context``, ``check_property``, ...) and
:mod:`claims_harness.errors`. A program that drives the engine (a release script, a notebook, the project's own
tests) uses the names here, grouped as a run flows:

* the vocabulary: the profiles (:data:`PROFILES`, :data:`DEFAULT_PROFILE`), the statuses a check has besides
  passed, failed, error and skipped (:data:`NOT_JUDGED`, and :data:`USED_BY_FAILING` for a function), the attribute
  by which a student's module says it starts from the reference (:data:`FALLBACK_ATTRIBUTE`);
* the course and its claims: :func:`find_course`, :func:`load_course`, :func:`load_catalogue`, :func:`registered`,
  :func:`json_schema_text`, a course's sources table (:func:`sources_table_of`, :func:`with_sources_table`) and the
  largest claim file read (:data:`MAX_FILE_BYTES`); what a claim expects, :func:`parse_expectation` and
  :func:`compare`, and how sharply (:func:`perturbations`, :func:`summarize`); a statement's scope
  (:func:`parse_dimensions`, :func:`resolve_scope`, :func:`describe_scope`, :func:`unreached`), its shapes
  (:data:`SHAPE_DESCRIPTIONS`) and its status in a run (:func:`statement_status`, one of :data:`STATEMENT_STATUSES`);
  the states of a statement's anchor in the text (:data:`ANCHOR_STATUSES`);
* the run: the parts of a catalogue (:func:`every_part`), one part evaluated (:func:`evaluate`), many on lanes
  (:func:`drive`, :func:`on_lanes`), one check (:func:`run_check`, :func:`reuse_check`) under :class:`RunOptions`;
  the Monte Carlo audit (:func:`audit`) and what the last mutation run found (:func:`mutation_summary`, current
  while :func:`mutation_inputs_digest` is what it measured);
* the implementation under test, in a process of its own: :func:`check_implementation`, its host and servers
  (:func:`implementation_host`, :func:`server_starter`, :func:`connect`, :func:`close_hosts`), a call in a
  supervised worker (:func:`run_isolated`), and what crosses between them (:func:`encode`, :func:`decode`);
* the cache: :class:`ObservationCache`, :func:`code_digest`, :func:`forget_sources`;
* the results and reports: :func:`read_results`, :func:`build_results`, :func:`write_reports`,
  :func:`report_directory_problem`,
  :func:`render_markdown`, :func:`render_html`, :func:`normalized`, :func:`function_scoreboard`, how a result's
  parts read (:func:`is_interval`, :func:`rejects_text`, :func:`library_versions`, :func:`library_of`), and the release
  gate's :func:`snapshot`, :func:`compare_snapshots`, :func:`gate_findings`;
* authoring: :func:`write_exercises`, and ``claims new``'s :class:`NewClaim`, :func:`validate`,
  :func:`claim_skeleton`.

Everything else under ``claims_harness._*`` may change without notice.
"""

from claims_harness._authoring.exercises import write_exercises
from claims_harness._authoring.new import NewClaim, claim_skeleton, validate
from claims_harness._claims.claim_file import ClaimEntry
from claims_harness._claims.course import find_course, load_course
from claims_harness._claims.expect import (
    EXPLAINED,
    KILLED,
    SURVIVED,
    Condition,
    Expectation,
    FloatLiteral,
    compare,
    compare_condition,
    parse_expectation,
    perturbations,
    summarize,
)
from claims_harness._claims.formats import (
    DEFAULT_PROFILE,
    FALLBACK_ATTRIBUTE,
    NOT_JUDGED,
    PROFILES,
    USED_BY_FAILING,
    Profile,
    is_interval,
    library_versions,
    rejects_text,
)
from claims_harness._claims.loading import Catalogue, load_catalogue
from claims_harness._claims.plain import plain
from claims_harness._claims.reading import MAX_FILE_BYTES
from claims_harness._claims.registry import registered
from claims_harness._claims.results_file import RESULTS_FILE, read_results
from claims_harness._claims.schema import KINDS, SHAPE_DESCRIPTIONS, Check, Statement, json_schema_text
from claims_harness._claims.scope import describe_scope, parse_dimensions, resolve_scope, unreached
from claims_harness._claims.sources import with_sources_table
from claims_harness._power.audit import audit
from claims_harness._power.mutation_results import mutation_inputs_digest, mutation_summary
from claims_harness._reporting.gate import (
    GateFindings,
    Snapshot,
    compare_snapshots,
    gate_findings,
    snapshot,
    stated_differences,
)
from claims_harness._reporting.html import render_html
from claims_harness._reporting.markdown import render_markdown
from claims_harness._reporting.report import MARKDOWN_FILE, report_directory_problem, write_reports
from claims_harness._reporting.results import (
    STATEMENT_STATUSES,
    build_results,
    normalized,
    scope_shortfalls,
    statement_status,
)
from claims_harness._reporting.rows import function_scoreboard
from claims_harness._running.cache import ObservationCache, code_digest, forget_sources
from claims_harness._running.driver import drive, on_lanes
from claims_harness._running.engine import Part, evaluate, every_part
from claims_harness._running.frameworks import library_of
from claims_harness._running.implementation import contract_functions, is_stub, provenance, reference_implementation
from claims_harness._running.isolation import run_isolated
from claims_harness._running.options import RunOptions
from claims_harness._running.processes import TIMED_OUT, Answer, judge_records
from claims_harness._running.remote import (
    check_implementation,
    close_hosts,
    connect,
    implementation_host,
    in_process,
    server_starter,
)
from claims_harness._running.runner import reuse_check, run_check
from claims_harness._running.wire import decode, encode
from claims_harness._text.drift import ANCHOR_STATUSES
from claims_harness._verify import sources_table_of

__all__ = [
    "ANCHOR_STATUSES",
    "DEFAULT_PROFILE",
    "EXPLAINED",
    "FALLBACK_ATTRIBUTE",
    "KILLED",
    "KINDS",
    "MARKDOWN_FILE",
    "MAX_FILE_BYTES",
    "NOT_JUDGED",
    "PROFILES",
    "RESULTS_FILE",
    "SHAPE_DESCRIPTIONS",
    "STATEMENT_STATUSES",
    "SURVIVED",
    "TIMED_OUT",
    "USED_BY_FAILING",
    "Answer",
    "Catalogue",
    "Check",
    "ClaimEntry",
    "Condition",
    "Expectation",
    "FloatLiteral",
    "GateFindings",
    "NewClaim",
    "ObservationCache",
    "Part",
    "Profile",
    "RunOptions",
    "Snapshot",
    "Statement",
    "audit",
    "build_results",
    "check_implementation",
    "claim_skeleton",
    "close_hosts",
    "code_digest",
    "compare",
    "compare_condition",
    "compare_snapshots",
    "connect",
    "contract_functions",
    "decode",
    "describe_scope",
    "drive",
    "encode",
    "evaluate",
    "every_part",
    "find_course",
    "forget_sources",
    "function_scoreboard",
    "gate_findings",
    "implementation_host",
    "in_process",
    "is_interval",
    "is_stub",
    "json_schema_text",
    "judge_records",
    "library_of",
    "library_versions",
    "load_catalogue",
    "load_course",
    "mutation_inputs_digest",
    "mutation_summary",
    "normalized",
    "on_lanes",
    "parse_dimensions",
    "parse_expectation",
    "perturbations",
    "plain",
    "provenance",
    "read_results",
    "reference_implementation",
    "registered",
    "rejects_text",
    "render_html",
    "render_markdown",
    "report_directory_problem",
    "resolve_scope",
    "reuse_check",
    "run_check",
    "run_isolated",
    "scope_shortfalls",
    "server_starter",
    "snapshot",
    "sources_table_of",
    "stated_differences",
    "statement_status",
    "summarize",
    "unreached",
    "validate",
    "with_sources_table",
    "write_exercises",
    "write_reports",
]
