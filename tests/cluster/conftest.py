"""One loopback head for the cluster tests that only submit to it (job submit, runs sharing an
endpoint): started once per session, not once per module (a head costs 10-20 s on 2 busy cores)."""

from __future__ import annotations

import pytest

from tests.doubles.raycluster import started_cluster

GRACE_S = 2.0  # a limiter without leases ends this soon on the shared head (the drivers read it)


@pytest.fixture(scope="session")
def shared_head():
    # the drivers pass RAY_KNOWSIM_LEASE_GRACE_S to the limiter they create
    with started_cluster(multi_node=False, head_cpus=4, head_extra=("--object-store-memory", str(200 * 2**20)),
                         env={"RAY_KNOWSIM_LEASE_GRACE_S": str(GRACE_S)}) as cluster:
        yield cluster
