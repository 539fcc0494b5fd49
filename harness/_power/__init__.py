"""The power of the checks, measured: mutation testing of the implementation (``claims mutants``) and the Monte
Carlo audit (``claims audit``).

May import: any package of the harness below the command line (claims, running, text, reporting).
"""
