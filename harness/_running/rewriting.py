"""Which modules pytest rewrites the asserts of: the verifiers and the tests, not the libraries the plugin imports.

pytest marks for assert rewriting every top-level module of every installed distribution that
declares a pytest plugin (``pytest11``), before any plugin loads: the distribution that installed
this harness (with a course's implementation, verifiers and whatever else it packages), and all of
Hypothesis. A rewritten module is compiled from its source, and its bytecode is cached only where
Python may write bytecode; with ``PYTHONDONTWRITEBYTECODE`` (CI machines, these ones) every pytest
start rewrote and compiled Hypothesis' hundred-odd modules again, a third of the time of
``pytest claims -k one-claim``. Rewriting them buys nothing: their asserts are not where a check
fails. What should fail with pytest's explained asserts are the verifiers', which the plugin
marks again on its own (:func:`harness._running.property.rewrite_asserts_in`) before they are imported.

pytest has no public way to take a mark back, so this reaches into its import hook's set of marked
names; if a pytest version has no such set, nothing is changed and rewriting costs what it did.
"""

from __future__ import annotations

import sys
from importlib import metadata

_HARNESS = __name__.partition(".")[0]
# Hypothesis, with its helper modules: a library every course's properties run on.
_LIBRARIES = ("hypothesis", "_hypothesis_globals", "_hypothesis_ftz_detector")


def leave_libraries_unrewritten() -> None:
    """Take back pytest's marks on the harness's own distribution and on Hypothesis (a no-op outside pytest)."""
    hooks = [hook for hook in sys.meta_path if type(hook).__name__ == "AssertionRewritingHook"
             and isinstance(getattr(hook, "_must_rewrite", None), set)]
    if not hooks:
        return
    names = {_HARNESS, *_LIBRARIES, *_installed_with_harness()}
    for hook in hooks:
        hook._must_rewrite.difference_update(names)


def _installed_with_harness() -> set[str]:
    """The top-level packages of the distribution whose pytest plugin is this harness's (names from its metadata)."""
    names: set[str] = set()
    for entry in metadata.entry_points(group="pytest11"):
        if entry.value.partition(".")[0] == _HARNESS and entry.dist is not None:
            names.update((entry.dist.read_text("top_level.txt") or "").split())
    return names
