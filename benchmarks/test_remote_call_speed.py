"""What a call across processes costs (issue 43): a verifier's call of a contract function reaches the
implementation's server as a message of data and comes back as one.

Contenders, on the same arguments:
- ``direct``: the reference's function called in this process (the reference of each case);
- ``messages``: the same call through the same messages of data, with no process between (``in_process``,
  as ``claims mutants`` calls the course's own code): what encoding and decoding cost;
- ``server``: through a server of the implementation's host, as every check of a run calls it.

Two cases: a call on a few numbers (where the crossing is everything), and one on a PPO buffer of 2048 steps
by 64 environments (where the arrays' bytes are). The ratios are printed by ``benchmarks/conftest.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

import impl
from claims_harness._running.remote import close_hosts, connect, implementation_host, in_process

CASES = {"T=8": (8, 1), "T=2048, n_envs=64": (2048, 64)}


def _arguments(length: int, n_envs: int) -> tuple:
    rng = np.random.default_rng(0)
    shape = (length, n_envs)
    return (*(rng.normal(size=shape) for _ in range(3)), (rng.random(shape) < 0.01).astype(float), 0.99)


@pytest.fixture(scope="module")
def reached():
    """The reference as a check reaches it: in this process through messages, and through a server of its host."""
    connection, _ = implementation_host("impl", ".").serve(2)
    try:
        yield {"direct": impl, "messages": in_process(impl), "server": connect(connection, "impl")}
    finally:
        connection.close()
        close_hosts()


@pytest.mark.parametrize("contender", ["direct", "messages", "server"])
@pytest.mark.parametrize("case", list(CASES))
def test_td_errors_call(benchmark, record_median, reached, case, contender):
    arguments = _arguments(*CASES[case])
    function = reached[contender].td_errors
    benchmark.group = f"a call of td_errors, {case}"
    returned = benchmark(function, *arguments)
    np.testing.assert_array_equal(returned, impl.td_errors(*arguments))
    record_median(f"a call of td_errors, {case}", contender, benchmark, reference="direct")
