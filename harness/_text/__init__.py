"""The course text in the loop: the author's documents read by path, split into steps and blocks.

Every statement of the ledger is anchored to the block of the text that says it (its step, its
position there, a versioned fingerprint of the block's normalised text and the numbers and
formulas of the block it holds); ``claims text status`` compares the anchors with the text it is
given and says, for each statement, whether its block is unchanged, moved, reworded, changed or
gone, and which blocks and numbers of the text no statement holds. The text itself is never
copied into the project: what is stored is fingerprints, sketches (b-bit MinHash values) and the
numbers and formulas a statement holds, which are facts.

May import: ``claims_harness._claims`` and this package (never the runner, the reports, the plugin or the
implementation). Its modules, each importing only those above it:

- ``fingerprints``: a block's text as an anchor records it: the normalisation, fingerprints and sketches;
- ``document``: reading a configured text (bounded, UTF-8, no control characters), steps and
  blocks, and the numbers and formulas of a block;
- ``drift``: the status of every anchored statement and mark against a text, uncovered blocks and
  unheld numbers;
- ``stamps``: review stamps and the edits ``claims text anchor``, ``review`` and ``mark`` make to
  the claim files, line by line, so that each shows in the diff;
- ``summary``: the text's state as a run reports it.

The annotated page (``claims_text.html``) is a report: ``claims_harness._reporting.text_page``; the
``claims text`` subcommands are ``claims_harness._authoring.text``.

The format of anchors and the rules of review are in ``docs/text.md``.
"""
