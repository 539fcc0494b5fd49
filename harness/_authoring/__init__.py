"""What an author or a student runs to change claims and code: ``claims new``, ``claims exercises`` and
``claims text`` (status, show, anchor, review, mark, html).

May import: any package of the harness below the command line (claims, running, text, reporting).
"""
