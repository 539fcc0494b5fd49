"""Check functions, registered by name; claim files refer to them only by that name.

A verifier receives a :class:`harness.Context` (the implementation under test, parameters,
a seeded generator, the profile) and returns a mapping of observed values. It computes; the
harness compares with what the claim states. Verifiers never import ``impl``.
"""

from verifiers import baselines, bernoulli, gae, kl

__all__ = ["baselines", "bernoulli", "gae", "kl"]
