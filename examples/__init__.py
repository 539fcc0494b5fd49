"""Worked examples of checking an implementation against the claims (``--impl examples.<module>``)."""
