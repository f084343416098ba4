"""The fast tier checks this checkout's code and data, not the shell it runs
in: a site a pipeline selects (ONESTACK_SITE, a variable of the GitLab
pipeline, docs/site-staff/ci.md), a loaded module's state, the dispatcher's
overrides, a job's Slurm, OpenMP and glibc settings, or a git hook's
repository and the user's git configuration (commit signing) would change
what the tests read and what the programs they start do. The locations
setup/env.sh sets (the venv, Spack, the caches) stay."""

import os
import re

SHELLS_OWN = re.compile(
    r"ONESTACK_(SITE|DATA_ROOT|MODULES|CLUSTER_DIR|CPUID_FILE|CPU_\w+|FLAVOR_\w+|LOADED_\w+|MPI_\w+|THREADS"
    r"|PUBLISH_KILL_AFTER)|SLURM_\w+|OMP_\w+|OPENBLAS_NUM_THREADS|GLIBC_TUNABLES|GIT_\w+"
)

for name in [name for name in os.environ if SHELLS_OWN.fullmatch(name)]:
    del os.environ[name]
os.environ.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
