"""What a witness reaches, read off the witness itself: the course's scope dimensions for the shapes verifiers share.

``claims_harness.reach`` records the values one witness or drawn example used along the dimensions of
``[tool.claims.scope]`` (pyproject.toml); these helpers read them from the arrays a verifier
already holds, so that no verifier types a dimension's value beside the data it describes. Call one
per witness or example, after any ``assume()`` that may discard it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from claims_harness import reach


def transitions_of(P: Any) -> str:
    """``deterministic`` when every row P[s, a, :] puts all its mass on one state, else ``stochastic``."""
    kernel = np.asarray(P, dtype=object)
    rows = kernel.reshape(-1, kernel.shape[-1])
    return "deterministic" if all(sum(1 for p in row if p != 0) == 1 for row in rows) else "stochastic"


def reach_mdp(P: Any, *, gamma: Any, horizon: Any, **more: Any) -> None:
    """A tabular MDP witness ``P[s, a, s2]``: its states, actions and transitions, with the discount and horizon it is
    used at (``math.inf`` for a discounted infinite horizon) and any other dimension (``advantages="exact"``)."""
    kernel = np.asarray(P, dtype=object)
    reach(states=kernel.shape[0], actions=kernel.shape[1], transitions=transitions_of(kernel), discount=gamma,
          horizon=horizon, **more)


def reach_bandit(n_actions: Any, **more: Any) -> None:
    """A one-state, one-step decision (a bandit, one prompt's answer as one action) over ``n_actions`` actions."""
    reach(states=1, horizon=1, actions=n_actions, **more)
