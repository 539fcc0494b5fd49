"""The claim file format, as pydantic models; ``claims/schema.json`` is generated from them."""

from __future__ import annotations

import json
import re
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from claims_harness._claims.expect import OPERATORS, Expectation, parse_expectation
from claims_harness._claims.formats import PROFILES

Kind = Literal["symbolic", "exact", "montecarlo", "property", "counterexample", "experiment"]
KINDS: tuple[str, ...] = Kind.__args__

KIND_DESCRIPTIONS = {
    "symbolic": "a sympy proof, general where the text is general",
    "exact": "enumeration of a finite outcome space with exact arithmetic",
    "montecarlo": "a calibrated statistical test with a stated false-failure rate and detectable deviation",
    "property": "Hypothesis over random inputs, against the implementation",
    "counterexample": "a witness that a statement does not hold in general",
    "experiment": "multi-seed training runs with median and IQR",
}

ClaimId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
StatementId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
# A Python identifier, as test names are: pytest -k takes it as one word.
TestName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Shape = Literal["general", "instance", "negative", "empirical"]
SHAPE_DESCRIPTIONS = {
    "general": "holds for every input of a class (an identity, a theorem, a property of a function): "
               "strongly covered by a passed symbolic or property check",
    "instance": "a worked example or printed number: strongly covered by a passed symbolic, exact, montecarlo or "
                "counterexample check that computes it",
    "negative": "'not in general', 'can', 'is not': strongly covered by a passed counterexample "
                "(or an exact or symbolic witness)",
    "empirical": "a statement about training runs: strongly covered by a passed experiment or montecarlo check",
}
STRONG_KINDS: dict[str, frozenset[str]] = {
    "general": frozenset({"symbolic", "property"}),
    "instance": frozenset({"symbolic", "exact", "montecarlo", "counterexample"}),
    "negative": frozenset({"counterexample", "exact", "symbolic"}),
    "empirical": frozenset({"experiment", "montecarlo"}),
}
# A scope dimension or value of the course's [tool.claims.scope] (checked against it when claims load).
ScopeName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")]
# Which steps exist is the course's (its step_pattern and steps, checked when claims load).
Where = Annotated[str, StringConstraints(pattern=r"^[^\s]+$")]
VerifierName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")]

_NUMBER_OR_TEXT = {"anyOf": [{"type": "number"}, {"type": "string"}]}
_EXPECT_VALUE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "description": "agrees within half a unit of its last printed digit"},
        {"type": "boolean"},
        {"type": "string"},
        {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/ExpectValue"}},
        {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {op: _NUMBER_OR_TEXT if op == "exact" else {"type": "number"} for op in OPERATORS},
        },
    ]
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class Check(_Strict):
    """One way of testing a claim; it must be able to fail."""

    kind: Kind = Field(description="; ".join(f"{k}: {v}" for k, v in KIND_DESCRIPTIONS.items()))
    verifier: VerifierName = Field(description="the registered name of the verifier, e.g. 'baselines.loo_identity'")
    params: dict[str, Any] = Field(default_factory=dict, description="arguments for the verifier")
    expect: dict[str, Any] = Field(
        min_length=1,
        description="observed name -> what the text states; a number agrees within half a unit of its last digit",
    )
    alpha: float = Field(1e-6, gt=0, lt=1, allow_inf_nan=False,
                         description="montecarlo: false-failure rate of the whole check")
    beta: float = Field(1e-3, gt=0, lt=1, allow_inf_nan=False,
                        description="montecarlo: false-pass rate at the stated deviation")
    deviation: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="montecarlo: the smallest deviation of a mean the check must detect",
    )
    timeout: float | None = Field(
        None, gt=0, le=86400,
        description="seconds the check may run before it becomes an error (default: "
                    + ", ".join(f"{profile.timeout:g} {name}" for name, profile in PROFILES.items()) + ")"
    )
    profiles: list[Literal[tuple(PROFILES)]] = Field(
        default_factory=lambda: list(PROFILES),
        min_length=1,
        description="the profiles this check runs in; in any other it is reported as skipped, with the reason",
    )
    note: str | None = Field(None, description="why this check exists, when its name does not say")
    rejects: str | dict[str, str] | None = Field(
        None, min_length=1,
        description="one concrete wrong implementation (or wrong formula) this check turns red, e.g. "
                    "'a GAE that bootstraps from V(s_T) on a terminated step'; for a check of several functions, "
                    "a mapping from each function to the mistake of it the check catches, so that a failure shows "
                    "only the mistakes of the functions it blames",
    )
    harness_chosen: list[str] = Field(
        default_factory=list,
        description="keys of 'expect' whose value the harness chose (a witness, a threshold, a corrected value), "
                    "not the text; every other expected value is the text's",
    )

    insensitive: dict[str, str] = Field(
        default_factory=dict,
        description="keys of 'expect' (or an element, 'key[2]') whose stated number the check cannot tell from its "
                    "printed neighbour, each with the reason (e.g. a Monte Carlo interval wider than the last digit): "
                    "harness/_claims/expect.py perturbs every number, and the release gate fails on a survivor "
                    "without one",
    )

    @field_validator("alpha", "beta")
    @classmethod
    def _rate_is_a_normal_float(cls, rate: float) -> float:
        # Below the smallest normal float a rate loses its digits, and split over comparisons it becomes 0.
        if rate < sys.float_info.min:
            raise ValueError(f"{rate!r} is below {sys.float_info.min:.3g}, the smallest rate float arithmetic keeps "
                             "exactly; state the rate the check is designed for (the default alpha is 1e-6)")
        return rate

    @field_validator("expect", mode="after")
    @classmethod
    def _parse_expect(cls, raw: dict[str, Any]) -> dict[str, Expectation]:
        return {key: parse_expectation(value, (key,)) for key, value in raw.items()}

    @model_validator(mode="after")
    def _statistics_are_stated(self) -> Check:
        if self.kind == "montecarlo" and self.deviation is None:
            raise ValueError("a montecarlo check must state 'deviation', the smallest error of a mean it must detect")
        unknown = [key for key in self.harness_chosen if key not in self.expect]
        if unknown:
            raise ValueError(f"harness_chosen names {', '.join(map(repr, unknown))}, which 'expect' does not have; "
                             f"name keys of expect ({', '.join(self.expect)})")
        unknown = [key for key in self.insensitive if key.split("[")[0] not in self.expect]
        if unknown:
            raise ValueError(f"insensitive names {', '.join(map(repr, unknown))}, which 'expect' does not have; "
                             f"name keys of expect ({', '.join(self.expect)}), or an element as key[i]")
        return self


class Claim(_Strict):
    """A checkable statement of the course text, where it is said, what backs it, and how it is checked."""

    id: ClaimId = Field(description="kebab-case, unique across all claim files")
    where: Where = Field(description="the step that says it, one of the course's steps")
    statement: str = Field(min_length=1, description="the claim, paraphrased in English")
    formula: str | None = Field(None, description="LaTeX")
    sources: list[str] = Field(min_length=1, description="keys of the course's sources file")
    limitations: str | None = Field(None, description="what the claim does not say")
    erratum: str | None = Field(
        None, description="where the text's own wording or number is wrong, and what is true instead"
    )
    clarification: str | None = Field(
        None, description="where the text's sentence is true as written but says less (or less precisely) than a "
                          "reader takes from it, and what holds exactly; a sentence that is false is an 'erratum'",
    )
    origin: Literal["text", "harness"] = Field(
        "text", description="'text' when the course text makes the claim; 'harness' for a claim the harness adds "
                            "(a consequence or a caveat the text does not state), said so in the report",
    )
    covers: list[StatementId] = Field(
        default_factory=list, description="ids of the ledger statements (any file's 'statements') this claim checks"
    )
    aliases: list[TestName] = Field(
        default_factory=list,
        description="names the course's other materials give this claim, such as a syllabus's test "
                    "('test_surrogate_reduces_to_reinforce_at_theta_old'); pytest -k selects the claim by any of them",
    )
    checks: list[Check] = Field(min_length=1)

    @field_validator("formula")
    @classmethod
    def _formula_is_well_formed(cls, formula: str | None) -> str | None:
        if formula is not None:
            check_formula(formula)
        return formula


class Anchor(_Strict):
    """Where in the text a statement (or a mark) stands, as ``claims text anchor`` and ``review`` write it.

    Nothing of the text itself: the block's position (a hint), a fingerprint and a sketch of its
    normalised text, and the numbers or formula of the block held, as printed (docs/text.md).
    """

    block: int = Field(ge=0, description="the block's position in its step, from 1 (0: the step's title): a hint, "
                                         "for duplicates and for readers")
    fingerprint: Annotated[str, StringConstraints(pattern=r"^n[0-9]+:[0-9a-f]{16}$")] = Field(
        description="the normalisation's version and the first 16 hex digits of the SHA-256 of the block's "
                    "normalised text")
    sketch: Annotated[str, StringConstraints(pattern=r"^m[0-9]+:[0-9a-f]{64}$")] = Field(
        description="32 one-byte MinHash values of the block's character 5-grams: how a reworded block is found")
    holds: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=list,
        description="the numbers and formulas of the block held, as printed; 'x ×N' when x is printed N times there")
    numbers: Annotated[str, StringConstraints(pattern=r"^q[0-9]+:[0-9a-f]{16}$")] | None = Field(
        None, description="the first 16 hex digits of the SHA-256 of where each held number stands among the block's "
                          "numbers in the order printed: two numbers that swap places make the statement changed, not "
                          "reworded")
    review: Annotated[str, StringConstraints(pattern=r"^r[0-9]+:[0-9a-f]{12}$")] | None = Field(
        None, description="the review stamp 'claims text review' writes; missing or stale means unreviewed")


class Mark(_Strict):
    """A block of the text, or some of its numbers, that holds nothing checkable, with the reason."""

    where: Where = Field(description="the step of the block")
    anchor: Anchor = Field(description="the block; with 'holds', only those numbers are marked, else the whole block")
    reason: str = Field(min_length=1, description="why nothing there can be checked (a caption, a cross-reference)")


class Statement(_Strict):
    """One checkable statement of the text, in the ledger of its step: covered by claims, or not checkable."""

    id: StatementId = Field(description="kebab-case, stable, unique across all claim files")
    where: Where = Field(description="the step that says it")
    says: str = Field(min_length=1, description="the statement in one line of your own English")
    shape: Shape = Field("general", description="; ".join(f"{k}: {v}" for k, v in SHAPE_DESCRIPTIONS.items()))
    not_checkable: str | None = Field(
        None, min_length=1,
        description="why no check can refute or confirm it (a historical attribution, a pointer to another module)",
    )
    weak: str | None = Field(
        None, min_length=1,
        description="why the checks of the claims covering it are weaker than what it says (they test one case of "
                    "a list, say): the report counts it weak, with this reason, however strong their kinds",
    )
    origin: Literal["text", "harness"] = Field(
        "text", description="'text' when the course text says it (then it has an anchor); 'harness' for a caveat or "
                            "a consequence the harness adds, which has no place in the text",
    )
    anchor: Anchor | None = Field(None, description="the block of the text that says it ('claims text anchor')")
    scope: dict[ScopeName, ScopeName | list[ScopeName]] | None = Field(
        None,
        description="what the sentence speaks for, along the course's scope dimensions ([tool.claims.scope]): "
                    "dimension -> 'all', a value, or a list of values; a dimension left out is one the sentence does "
                    "not range over, and {} says it ranges over none. The checks of the claims covering it must "
                    "reach every value named, or the report shows what they missed and counts it weak",
    )
    unreached: dict[ScopeName, Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=dict,
        description="dimension -> why no check reaches part of the scope named for it (the values the checks miss "
                    "are shown beside the reason); the release gate fails on an unreached value without one",
    )

    not_compared: dict[Annotated[str, StringConstraints(min_length=1)],
                       Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=dict,
        description="number held (as printed) -> why no check of the covering claims compares it (a count, a "
                    "cross-reference, the threshold of a definition); every other held number must be stated by a "
                    "covering check's expect or params at its printed precision (harness/_text/binding.py)",
    )

    @model_validator(mode="after")
    def _harness_statements_have_no_anchor(self) -> Statement:
        if self.origin == "harness" and self.anchor is not None:
            raise ValueError("a statement of origin 'harness' has no place in the text: drop its 'anchor', or its "
                             "'origin' if the text says it")
        if self.not_checkable is not None and (self.scope is not None or self.unreached):
            raise ValueError("a statement that is not checkable has no scope for checks to reach: drop 'scope' and "
                             "'unreached', or 'not_checkable'")
        unknown = [name for name in self.unreached if name not in (self.scope or {})]
        if unknown:
            raise ValueError(f"'unreached' names {', '.join(map(repr, unknown))}, which 'scope' does not; give the "
                             "reason under the dimension of the scope it is about")
        return self


class Note(_Strict):
    """A small fault of the text for its author (a wrong cross-reference, a missing symbol): nothing to check."""

    where: Where = Field(description="the step where the fault is")
    says: str = Field(min_length=1, description="what is wrong and how to fix it, in your own words")


class ClaimFile(_Strict):
    """One YAML file of claims: one lesson of the module, or the syllabus."""

    title: str = Field(min_length=1, description="the lesson's title")
    steps: list[Where] = Field(min_length=1, description="every step of the lesson, claimed or not: the coverage map")
    statements: list[Statement] = Field(
        default_factory=list, description="the ledger: every checkable statement of the lesson's steps"
    )
    notes: list[Note] = Field(
        default_factory=list, description="small faults of the lesson's text for its author, which no check needs "
                                          "(the reports list them under the notes to the author)")
    nothing_checkable: list[Mark] = Field(
        default_factory=list, description="blocks and numbers of the lesson's steps that hold nothing checkable, each "
                                          "with its reason ('claims text mark')")
    # Claims are validated one by one, so that one broken claim never hides the others.
    claims: list[dict[str, Any]] = Field(description="the claims of this lesson")


# A formula is one displayed equation (the course's longest is 285 characters); far longer text is
# data pasted by mistake, refused before anything walks it.
MAX_FORMULA_CHARACTERS = 4000
_FORMULA_TOKEN = re.compile(r"\\(begin|end)(?![A-Za-z])\s*(?:\{([^{}]*)\})?|\\(?:left|right)(?![A-Za-z])|\\.|[{}]",
                            re.DOTALL)
# What an HTML parser reads as a tag, a comment or a declaration; `y_{<t}` and `a < b` are math.
_MARKUP = re.compile(r"<(?:[A-Za-z][A-Za-z0-9-]*[\s/>]|/|!|\?)")


def check_formula(formula: str) -> None:
    """Refuse a formula whose structure is broken: one linear pass, without rendering anything.

    Checks that braces balance (``\\{`` and ``\\}`` are characters, not braces), that every
    ``\\left`` has its ``\\right`` and every ``\\begin{env}`` its ``\\end{env}``, each within the
    group it opens in, and that the text holds no HTML markup. Whether the formula then renders
    as MathML is the report's concern (it shows the LaTeX source when it does not).

    Raises:
      ValueError: naming the first defect and the character where it is.
    """
    if len(formula) > MAX_FORMULA_CHARACTERS:
        raise ValueError(f"the formula is {len(formula)} characters long; a formula is one equation of at most "
                         f"{MAX_FORMULA_CHARACTERS} characters: split it, or move the data into a verifier")
    markup = _MARKUP.search(formula)
    if markup:
        raise ValueError(f"the formula contains markup ({markup.group()!r} at character {markup.start() + 1}); "
                         "write plain LaTeX math (a < b, with spaces, for a comparison)")
    opened: list[tuple[str, int]] = []  # '{', '\\left' or '\\begin{env}', with the character that opened it
    for token in _FORMULA_TOKEN.finditer(formula):
        text, at = token.group(), token.start() + 1
        if token.group(1) and token.group(2) is None:
            raise ValueError(f"the formula's \\{token.group(1)} at character {at} names no environment; write "
                             f"\\{token.group(1)}{{name}}")
        if text in ("{", "\\left"):
            opened.append((text, at))
        elif token.group(1) == "begin":
            opened.append((f"\\begin{{{token.group(2)}}}", at))
        elif text in ("}", "\\right") or token.group(1) == "end":
            wanted = {"}": "{", "\\right": "\\left"}.get(text, f"\\begin{{{token.group(2)}}}")
            if not opened or opened[-1][0] != wanted:
                inside = f", inside the {opened[-1][0]} at character {opened[-1][1]}" if opened else ""
                raise ValueError(_unmatched(text, at, f"has no {wanted} to close{inside}"))
            opened.pop()
    if opened:
        text, at = opened[-1]
        raise ValueError(_unmatched(text, at, "is never closed"))


def _unmatched(text: str, at: int, what: str) -> str:
    kind = "braces { } do not balance" if text in ("{", "}") else "\\left and \\right do not pair" if text.startswith(
        ("\\left", "\\right")) else "\\begin and \\end do not pair"
    return f"the formula's {kind}: the {text} at character {at} {what}; fix the LaTeX"


def json_schema() -> dict[str, Any]:
    """The JSON Schema editors use to complete and validate claim files."""
    schema = ClaimFile.model_json_schema()
    definitions = schema.setdefault("$defs", {})
    definitions["Claim"] = Claim.model_json_schema(ref_template="#/$defs/{model}")
    definitions.update(definitions["Claim"].pop("$defs", {}))
    definitions["ExpectValue"] = _EXPECT_VALUE_SCHEMA
    schema["properties"]["claims"]["items"] = {"$ref": "#/$defs/Claim"}
    definitions["Check"]["properties"]["expect"]["additionalProperties"] = {"$ref": "#/$defs/ExpectValue"}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Claim file"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
