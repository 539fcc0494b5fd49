"""``claims new``: a claim skeleton in the right lesson file and a verifier stub that fails until filled in."""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass
from pathlib import Path

from claims_harness._claims.expect import Condition, Expectation
from claims_harness._claims.loading import Catalogue
from claims_harness._claims.schema import KINDS

# Matched whole (fullmatch: ``$`` alone would let a trailing newline through). An id becomes a Python function
# name (dashes to underscores), so it starts with a letter; neither it nor the module may be a keyword.
_ID = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
_MODULE = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class NewClaim:
    step: str
    kind: str
    id: str
    module: str

    @property
    def verifier(self) -> str:
        return f"{self.module}.{self.id.replace('-', '_')}"

    @property
    def function(self) -> str:
        return self.id.replace("-", "_")


def validate(new: NewClaim, catalogue: Catalogue, verifiers_dir: Path) -> list[str]:
    """What is wrong with the request, one sentence each; empty when it can be written."""
    errors = []
    if not _ID.fullmatch(new.id):
        errors.append(f"id {new.id!r} is not kebab-case beginning with a letter (e.g. 'loo-identity')")
    elif keyword.iskeyword(new.function) or keyword.issoftkeyword(new.function):
        errors.append(f"id {new.id!r} would name its verifier function {new.function!r}, a Python keyword; "
                      "choose a longer id")
    if any(entry.id == new.id for entry in catalogue.entries):
        errors.append(f"id '{new.id}' exists already")
    if new.kind not in KINDS:
        errors.append(f"kind '{new.kind}' is not one of {', '.join(KINDS)}")
    bound, unreadable = set(), ""
    if not _MODULE.fullmatch(new.module) or keyword.iskeyword(new.module):
        errors.append(f"verifier module {new.module!r} is not a Python module name (lower case, a letter first, "
                      "not a keyword)")
    else:
        bound, unreadable = _read_module(verifiers_dir / f"{new.module}.py")
    if new.verifier in catalogue.verifiers:
        errors.append(f"verifier '{new.verifier}' exists already")
    elif unreadable:
        errors.append(f"{new.module}.py does not parse ({unreadable}): mend it first, or choose another module")
    elif new.function in bound:
        errors.append(f"{new.module}.py defines {new.function!r} already (a helper, say): the stub would replace "
                      "it; choose another id")
    if not lesson_file(new.step, catalogue):
        steps = ", ".join(step for steps in catalogue.steps.values() for step in steps)
        errors.append(f"no claim file has step '{new.step}'; steps: {steps}")
    return errors


def _read_module(module: Path) -> tuple[set[str], str]:
    """The names an existing verifier module binds at its top level, and why it cannot be read as Python (empty
    when it can); no names and no reason when it does not exist yet."""
    try:
        return _names_bound(module.read_bytes()), ""
    except FileNotFoundError:
        return set(), ""
    except (OSError, SyntaxError, ValueError) as error:
        return set(), str(error)


def _names_bound(source: str | bytes) -> set[str]:
    tree = ast.parse(source)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).partition(".")[0] for alias in node.names)
        else:
            names.update(target.id for target in ast.walk(node) if isinstance(target, ast.Name)
                         and isinstance(target.ctx, ast.Store))
    return names


def lint_warnings(catalogue: Catalogue, impl_module: str) -> list[str]:
    """Things that load but are likely not what the author meant."""
    import importlib

    warnings = []
    impl_names = set(getattr(importlib.import_module(impl_module), "__all__", ()))
    for entry in catalogue.entries:
        if entry.claim is None:
            continue
        where = f"{entry.file}:{entry.line}: claim '{entry.id}'"
        for index, check in enumerate(entry.claim.checks):
            for key, expectation in check.expect.items():
                for condition in _conditions(expectation):
                    if condition.operator in ("approx", "differs_from") and re.fullmatch(r"-?\d+", condition.text):
                        warnings.append(f"{where}, check {index + 1}: expect '{key}' states the bare integer "
                                        f"{condition.text} under '{condition.operator}', which the harness reads "
                                        f"as {condition.text} ± 0.5; write {{exact: {condition.text}}} or a decimal "
                                        "with the digits the text prints")
        text = f"{entry.claim.statement} {entry.claim.formula or ''}"
        named = sorted(name for name in impl_names if re.search(rf"\b{name}\b", text))
        calls = [catalogue.verifiers[check.verifier].uses for check in entry.claim.checks
                 if check.verifier in catalogue.verifiers]
        if named and all(check.kind == "symbolic" for check in entry.claim.checks) and not any(calls):
            warnings.append(f"{where}: names implementation functions ({', '.join(named)}) but every check is "
                            "symbolic and none calls the implementation; add a check against it")
    return warnings


def _conditions(expectation: Expectation) -> list[Condition]:
    if expectation.elements is not None:
        return [condition for element in expectation.elements for condition in _conditions(element)]
    return list(expectation.conditions)


def lesson_file(step: str, catalogue: Catalogue) -> str | None:
    return next((file for file, steps in catalogue.steps.items() if step in steps), None)


def claim_skeleton(new: NewClaim) -> str:
    return f"""
  - id: {new.id}
    where: "{new.step}"
    statement: >-
      TODO: the claim in your own English words.
    formula: 'TODO: LaTeX, or delete this line'
    sources: [TODO-source-key]
    covers: [todo-statement-id]  # ids of the statements it checks, from a lesson's `statements:` ledger
    limitations: >-
      TODO: what the claim does not say.
    checks:
      - kind: {new.kind}
        verifier: {new.verifier}
        rejects: >-
          TODO: one concrete wrong implementation or formula this check turns red (plant it and see it fail).
        expect:
          {_expected(new.kind)}
"""


def _expected(kind: str) -> str:
    # A property verifier returns whether its property held over the drawn examples (claims_harness.given).
    return "holds: true" if kind == "property" else "TODO_observed_name: 0.0"


def verifier_stub(new: NewClaim) -> str:
    if new.kind == "property":  # the property itself, its examples drawn by the harness
        return f'''

@verifier(kind="property")  # registered as {new.verifier}: the module and the function
@given(st.floats(-10.0, 10.0))  # TODO: one strategy per argument after ctx (claims_harness.strategies)
def {new.function}(ctx: Context, x: float) -> None:
    """TODO: the property, and why it checks claim '{new.id}' ({new.step}); it holds unless an assert fails."""
    # claims_harness.reach(discount=..., ...): what each example uses, along the course's [tool.claims.scope]
    raise NotImplementedError("fill in {new.module}.py:{new.function}: assert the property of x with ctx.impl")
'''
    return f'''

@verifier(kind="{new.kind}")  # registered as {new.verifier}: the module and the function
def {new.function}(ctx: Context) -> dict[str, object]:
    """TODO: what this computes, and why that checks claim '{new.id}' ({new.step})."""
    # claims_harness.reach(discount=..., ...): what each witness or example uses, along the course's [tool.claims.scope]
    raise NotImplementedError("fill in {new.module}.py:{new.function}: compute and return the observed values")
'''


def _with_imports(source: str, new: NewClaim) -> str:
    """``source`` (a verifier module's, or empty for a new one) importing what the stub uses, after its own imports."""
    wanted = ["Context", "given", "verifier"] if new.kind == "property" else ["Context", "verifier"]
    bound = _names_bound(source)
    missing = [name for name in wanted if name not in bound]
    imports = f"from claims_harness import {', '.join(missing)}\n" if missing else ""
    if new.kind == "property" and "st" not in bound:
        imports += "from claims_harness import strategies as st\n"
    if not source.strip():
        return f'"""Verifiers for {new.module} claims."""\n\nfrom __future__ import annotations\n\n' + imports
    body = ast.parse(source).body
    docstring = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
    at = max((node.end_lineno or 0 for node in body if isinstance(node, ast.Import | ast.ImportFrom) or
              node in docstring), default=0)
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:at], imports, *lines[at:]])


def write(new: NewClaim, catalogue: Catalogue, verifiers_dir: Path) -> list[str]:
    """Append the skeleton and the stub; return what the author fills in next."""
    file = lesson_file(new.step, catalogue)
    assert file is not None
    claim_path = catalogue.root / file
    text = claim_path.read_text(encoding="utf-8")
    text = text.replace("claims: []", "claims:") if "claims: []" in text else text
    claim_path.write_text(text.rstrip("\n") + "\n" + claim_skeleton(new), encoding="utf-8")
    module_path = verifiers_dir / f"{new.module}.py"
    source = module_path.read_text(encoding="utf-8") if module_path.is_file() else ""
    module_path.write_text(_with_imports(source, new).rstrip("\n") + "\n" + verifier_stub(new), encoding="utf-8")
    return [
        f"{file}: claim '{new.id}': write the statement, formula, sources (keys of "
        f"{catalogue.course.sources.name}), "
        "limitations, and in expect the numbers exactly as the text prints them",
        f"{module_path}: {new.function}(): " + (
            "choose in @given one strategy per argument, then assert the property of each drawn example with "
            "ctx.impl" if new.kind == "property" else
            "compute the observed values with ctx.impl and return them in a dict whose keys match expect") +
        " (declare the functions it calls in uses=); call claims_harness.reach(...) with the values each witness or "
        "example uses along the course's scope dimensions ([tool.claims.scope])",
        f"{file}: each statement the claim covers says its 'scope:' (what the sentence speaks for); 'claims scope' "
        "shows what the checks reached after a run",
        f"then: claims lint && pytest {file} -k {new.id}; perturb one expected number and see it fail",
    ]
