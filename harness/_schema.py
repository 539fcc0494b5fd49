"""The claim file format, as pydantic models; ``claims/schema.json`` is generated from them."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from harness._expect import OPERATORS, Expectation, parse_expectation

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
Where = Annotated[str, StringConstraints(pattern=r"^(\d+\.\d+\.\d+|week\d+/step-\d+)$")]
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
    alpha: float = Field(1e-6, gt=0, lt=1, description="montecarlo: false-failure rate of the whole check")
    beta: float = Field(1e-3, gt=0, lt=1, description="montecarlo: false-pass rate at the stated deviation")
    deviation: float | None = Field(
        None, gt=0, description="montecarlo: the smallest deviation of a mean the check must detect"
    )
    timeout: float | None = Field(
        None, gt=0, le=86400,
        description="seconds the check may run before it becomes an error (default: 120 smoke, 1800 full)"
    )
    profiles: list[Literal["smoke", "full"]] = Field(
        default_factory=lambda: ["smoke", "full"],
        min_length=1,
        description="the profiles this check runs in; in any other it is reported as skipped, with the reason",
    )
    note: str | None = Field(None, description="why this check exists, when its name does not say")
    rejects: str | None = Field(
        None, min_length=1,
        description="one concrete wrong implementation (or wrong formula) this check turns red, e.g. "
                    "'a GAE that bootstraps from V(s_T) on a terminated step'",
    )
    harness_chosen: list[str] = Field(
        default_factory=list,
        description="keys of 'expect' whose value the harness chose (a witness, a threshold, a corrected value), "
                    "not the text; every other expected value is the text's",
    )

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
        return self


class Claim(_Strict):
    """A checkable statement of the course text, where it is said, what backs it, and how it is checked."""

    id: ClaimId = Field(description="kebab-case, unique across all claim files")
    where: Where = Field(description="the step that says it: '4.2.4', or 'week16/step-2' for the syllabus")
    statement: str = Field(min_length=1, description="the claim, paraphrased in English")
    formula: str | None = Field(None, description="LaTeX")
    sources: list[str] = Field(min_length=1, description="keys of Module_4_Sources.md")
    limitations: str | None = Field(None, description="what the claim does not say")
    erratum: str | None = Field(
        None, description="where the text's own wording or number is wrong or imprecise, and what is true instead"
    )
    origin: Literal["text", "harness"] = Field(
        "text", description="'text' when the course text makes the claim; 'harness' for a claim the harness adds "
                            "(a consequence or a caveat the text does not state), said so in the report",
    )
    covers: list[StatementId] = Field(
        default_factory=list, description="ids of the ledger statements (any file's 'statements') this claim checks"
    )
    checks: list[Check] = Field(min_length=1)

    @field_validator("formula")
    @classmethod
    def _formula_renders(cls, formula: str | None) -> str | None:
        if formula is None:
            return None
        from harness._html import formula_to_mathml

        depth = 0
        for character in re.sub(r"\\[{}]", "", formula):
            depth += {"{": 1, "}": -1}.get(character, 0)
            if depth < 0:
                break
        if depth != 0:
            raise ValueError("the formula's braces { } do not balance; fix the LaTeX")
        if formula_to_mathml(formula) is None:
            raise ValueError("the formula does not convert to MathML (or contains markup that is not MathML); "
                             "write plain LaTeX math")
        return formula


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


class ClaimFile(_Strict):
    """One YAML file of claims: one lesson of the module, or the syllabus."""

    title: str = Field(min_length=1, description="the lesson's title")
    steps: list[Where] = Field(min_length=1, description="every step of the lesson, claimed or not: the coverage map")
    statements: list[Statement] = Field(
        default_factory=list, description="the ledger: every checkable statement of the lesson's steps"
    )
    # Claims are validated one by one, so that one broken claim never hides the others.
    claims: list[dict[str, Any]] = Field(description="the claims of this lesson")


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
    schema["title"] = "Module 4 claim file"
    return schema


def json_schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
