"""Correct implementations written in another library's idiom: each must pass every claim it reaches.

The other half of the bug zoo (``zoo/``): a check that fails correct code written another way is a
false failure. Each module replaces a few of ``impl``'s functions and takes the rest from it:

- ``sb3_gae``: GAE as Stable-Baselines3 writes it (``tests/test_gae_alternatives.py``);
- ``trl_group_baselines``: group means, RLOO from the group sum, GRPO's mean/std (TRL, OpenRLHF);
- ``trl_sequence``: gathered log-probabilities, the argmax completion mask, k3, the token loss (TRL);
- ``cleanrl_ppo``: the clipped loss as a max of negated branches, clipfrac, k1/k3, entropy (CleanRL);
- ``spinningup_returns``: returns and GAE by ``scipy.signal.lfilter`` (rllab, Spinning Up), float
  only, so it fails exactly the checks that need the contract's exact arithmetic, and no other;
- ``mdptoolbox_bellman``: vectorised Bellman backups and value iteration (pymdptoolbox);
- ``scipy_softmax``: softmax, log-softmax and entropy from ``scipy.special``.

``tests/test_correct_alternatives.py`` runs each on every check whose verifier calls what it replaces.
"""
