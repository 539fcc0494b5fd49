"""Running a check: the parts of a run, one check from its claim to its result (``engine.evaluate``), the
observation cache, the supervised worker each verifier runs in, the implementation under test, the verifier's
context, properties and their draws, time limits and experiments' seeds, and sharpness (the neighbours of each
expected number, compared as the check runs).

May import: ``claims_harness._claims``, ``claims_harness.stats`` and this package; nothing that writes a report.
"""
