"""The claims: the course's configuration, the claim file format, loading and validating claim files, the ledger
of statements, the verifier registry, the sources, and what a claim expects.

May import: ``claims_harness.stats`` and this package; nothing that runs a check or writes a report.
"""
