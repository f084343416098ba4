"""Not collected by the test suite (no test_ prefix): test_cleanup.py runs it
in a pytest of its own and SIGKILLs that pytest while this test holds the
cluster and a job runs, so the fixture never gets to take the cluster down."""

import time

HOLD_SECONDS = 120  # test_cleanup.py kills it long before


def test_holds_a_cluster_with_a_running_job(virtual_cluster, tmp_path):
    script = tmp_path / "sleeps.sh"
    script.write_text("#!/bin/bash\nsrun --nodes=2 --ntasks=2 sleep 600\n")
    virtual_cluster.submit(script, "--nodes=2", "--ntasks=2", f"--output={tmp_path / 'sleeps.out'}")
    time.sleep(HOLD_SECONDS)
