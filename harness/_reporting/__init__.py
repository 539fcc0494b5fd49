"""Reporting: the results document from the evidence of a run, the Markdown and HTML reports and the annotated
text, the reports' atomic replacement, and the release gate.

May import: ``claims_harness._claims``, ``claims_harness._running``, ``claims_harness._text``, ``claims_harness._power``
(what the last mutation run found) and this package.
"""
