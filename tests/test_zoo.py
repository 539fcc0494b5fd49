"""The bug zoo: every variant is the reference with one function replaced, and the claims catch each one."""

from __future__ import annotations

import importlib

import pytest
from conftest import course_catalogue

import impl
from zoo import VARIANTS
from zoo._run import CONTROLS, REFERENCE, ROOT, claims_to_run, failing_claims, replaced_functions


def test_every_module_of_the_zoo_is_listed():
    modules = {path.stem for path in (ROOT / "zoo").glob("*.py") if not path.stem.startswith("_")}
    assert modules == set(VARIANTS)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_replaces_one_function_and_names_its_pitfall_and_step(name):
    module = importlib.import_module(f"zoo.{name}")
    assert module.__all__ == impl.__all__
    assert len(replaced_functions(name)) == 1, replaced_functions(name)
    assert module.__doc__.startswith("Pitfall: ")
    assert "(module step" in module.__doc__ and VARIANTS[name].step in module.__doc__.split("\n")[0]


def test_caught_by_and_controls_name_real_claims_the_replaced_function_reaches():
    catalogue = course_catalogue()
    ids = {entry.id for entry in catalogue.entries}
    assert set(CONTROLS) <= ids
    for name, variant in VARIANTS.items():
        assert variant.caught_by, name
        assert set(variant.caught_by) <= ids, name
        # Only a claim whose verifiers call the replaced function can see the bug.
        assert set(variant.caught_by) <= set(claims_to_run(name)) - set(CONTROLS), name


@pytest.mark.slow
def test_each_variant_fails_its_claims_which_pass_for_the_reference():
    """Each variant on its caught_by and the controls; impl on every caught_by."""
    every_caught = sorted({claim for variant in VARIANTS.values() for claim in variant.caught_by})
    runs = {REFERENCE: every_caught} | {f"zoo.{name}": [*variant.caught_by, *CONTROLS]
                                        for name, variant in VARIANTS.items()}
    failed = {impl: failing_claims(impl, claims) for impl, claims in runs.items()}
    problems = []
    if failed[REFERENCE]:
        problems.append(f"the reference fails {failed[REFERENCE]}")
    for name, variant in VARIANTS.items():
        missed = sorted(set(variant.caught_by) - set(failed[f"zoo.{name}"]))
        broken_controls = sorted(set(CONTROLS) & set(failed[f"zoo.{name}"]))
        if missed:
            problems.append(f"zoo.{name} ({variant.pitfall}) passes {missed}, which should catch it")
        if broken_controls:
            problems.append(f"zoo.{name} fails the control claims {broken_controls}")
    assert not problems, "\n".join(problems)
