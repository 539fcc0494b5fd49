"""Check functions, registered by name; claim files refer to them only by that name.

A verifier receives a :class:`claims_harness.Context` (the implementation under test, parameters,
a seeded generator, the profile) and returns a mapping of observed values. It computes; the
harness compares with what the claim states. Verifiers never import ``impl``.

The modules are arranged on one axis: the subject a check is about. Either a quantity or estimator of
the theory (``score_function``, ``trajectory_law``, ``policy_gradient``, ``returns``; the baselines in
``baselines``, ``baseline_state``, ``baseline_optimal``, ``baseline_groups``, ``loo_conditions``; ``tabular``,
``gae``, ``actor_critic``, ``ratios``, ``surrogate``, ``ppo``, ``kl``, ``log_probabilities``, ``sequence``,
``sequence_groups``), or a worked example the texts compute with (``bandit`` and ``baseline_bandit``,
``bernoulli``, ``cartpole``, ``gru``, and ``losses``, the week-16 exercise's loss module). Not by lesson:
the claim files (``claims/<lesson>.yaml``) are the lesson axis, and a module serves every lesson that speaks
of its subject. A check's registered name is ``<module>.<function>``. Modules whose names begin with ``_``
hold what verifiers share (exact arithmetic, numeric bounds, parameter bases, sampling, reach) and register
nothing.

Importing this package imports every public module in it, which registers its verifiers.
"""

import importlib
import pkgutil

__all__ = sorted(module.name for module in pkgutil.iter_modules(__path__) if not module.name.startswith("_"))

for _module in __all__:
    importlib.import_module(f"{__name__}.{_module}")
