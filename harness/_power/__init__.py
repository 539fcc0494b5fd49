"""The power of the checks, measured: mutation testing of the implementation (``claims mutants``) and the Monte
Carlo audit (``claims audit``).

May import: ``claims_harness._claims``, ``claims_harness._running``, ``claims_harness._text`` and this package.
"""
