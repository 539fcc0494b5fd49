"""Which modules pytest rewrites the asserts of: the verifiers and the tests, not the libraries the plugin imports.

pytest marks for assert rewriting every top-level module of every installed distribution that
declares a pytest plugin (``pytest11``), before any plugin loads: this project's ``harness``,
``impl`` and ``zoo``, and all of Hypothesis. A rewritten module is compiled from its source, and
its bytecode is cached only where Python may write bytecode; with ``PYTHONDONTWRITEBYTECODE``
(CI machines, these ones) every pytest start rewrote and compiled Hypothesis' hundred-odd modules
again, a third of the time of ``pytest claims -k one-claim``. Rewriting them buys nothing: their
asserts are not where a check fails. What should fail with pytest's explained asserts are the
verifiers', which the plugin registers on its own (:func:`harness._property.rewrite_asserts_in`).

pytest has no public way to take a mark back, so this reaches into its import hook's set of marked
names; if a pytest version has no such set, nothing is changed and rewriting costs what it did.
"""

from __future__ import annotations

import sys

# Imported when the plugin loads, before anything under them: the engine, the reference
# implementation, the bug zoo, and Hypothesis (with its helper modules).
NOT_REWRITTEN = ("harness", "impl", "zoo", "hypothesis", "_hypothesis_globals", "_hypothesis_ftz_detector")


def leave_libraries_unrewritten() -> None:
    """Remove :data:`NOT_REWRITTEN` from every pytest assert-rewriting hook's marks (a no-op outside pytest)."""
    for hook in sys.meta_path:
        marked = getattr(hook, "_must_rewrite", None)
        if type(hook).__name__ == "AssertionRewritingHook" and isinstance(marked, set):
            marked.difference_update(NOT_REWRITTEN)
