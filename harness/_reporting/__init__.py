"""Reporting: the results document from the evidence of a run, the Markdown and HTML reports and the annotated
text, the reports' atomic replacement, and the release gate.

May import: ``harness._claims``, ``harness._running``, ``harness._text`` and this package.
"""
