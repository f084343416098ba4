# onestack: the two commands of the README are `make stack` and `make test`.
# Each sets up what it needs first, idempotently.
SHELL := /bin/bash
ONESTACK := bin/onestack
# Which flavors to build, e.g. FLAVORS="qe/openblas-mpich";
# empty = the `build` list of each environments/<app>.yaml.
# These reach the commands as data, never as make or shell code: a pipeline
# variable (.gitlab-ci.yml) may hold anything, and make expands `$(...)` in a
# variable from the environment or the command line. So each is taken
# unexpanded and read by the recipes' shell from the environment, where
# bin/onestack refuses a name it does not know.
override FLAVORS := $(value FLAVORS)
override FULL_REBUILD := $(value FULL_REBUILD)
override PYTEST_ARGS := $(value PYTEST_ARGS)
# CLUSTER_CONFIG names another cluster file (the tests' own: tests/cluster/);
# `sudo make cluster` runs it as root.
override CLUSTER_CONFIG := $(or $(value CLUSTER_CONFIG),cluster/cluster.yaml)
export FLAVORS FULL_REBUILD PYTEST_ARGS CLUSTER_CONFIG

.PHONY: setup setup-spack venv mirror stack test test-fast flavors where rollback bench-modules report report-path images \
	where-images push-images push-binaries check check-built audit ci-generate cluster cluster-env cluster-down cluster-bench \
	community

# The virtualenv: with gcc and git, all the fast tier needs (no Spack, no Lmod, no apt).
venv:
	@bash setup/venv.sh

setup: setup-spack
	@bash setup/apptainer.sh
	@$(ONESTACK) signing-key

# Set-up less Apptainer and the signing key, which only the images use:
# what Spack's commands and the modules need (builds, publish, the mirror,
# the pipeline's audit, concretize, build and test jobs, the checks through
# the live tree), without minutes of Apptainer's build. gitlab-ci-local (npm)
# is for the pipeline test alone: `make test` sets it up (tests/run.sh).
setup-spack: venv
	@$(ONESTACK) host
	@bash setup/apt.sh
	@bash setup/spack.sh
	@$(ONESTACK) site

mirror: setup-spack
	@$(ONESTACK) mirror $$FLAVORS

# The live tree offers every built flavor of the build lists, so FLAVORS
# selects what to build, not what to publish.
stack: setup-spack
	@$(ONESTACK) build $$FLAVORS
	@$(ONESTACK) publish

# The fast tier: every data file, bad input, rendering, report arithmetic,
# problem checks on recorded outputs, the dispatcher (compiled with gcc) and
# the docs' paths and make targets, in under a minute.
test-fast: venv
	@. setup/env.sh && "$$ONESTACK_VENV/bin/python" -m pytest -q tests/fast

# Everything, stage by stage with each stage's time (tests/run.sh): the fast
# tier, set-up, each app's ci_build list, publish, the tests of every built flavor.
test:
	@bash tests/run.sh

flavors: setup-spack
	@$(ONESTACK) flavors

where:
	@$(ONESTACK) where

rollback:
	@$(ONESTACK) rollback

bench-modules:
	@$(ONESTACK) bench-modules $$FLAVORS

# The flavor benchmark report (HTML + PNG): every published flavor side by side.
report: stack
	@$(ONESTACK) report

report-path:
	@$(ONESTACK) report-path

# SIF images of the published flavors (FLAVORS selects; see containers/).
images: setup
	@$(ONESTACK) images $$FLAVORS

where-images:
	@$(ONESTACK) where-images

# Every built image into the site's registry (ONESTACK_REGISTRY, _USER,
# _PASSWORD, ONESTACK_IMAGE_TAG: onestack/images/push.py), signed.
push-images: setup
	@$(ONESTACK) push-images

# The published flavors' Spack binaries into the same registry (oci://), for
# `spack install --cache-only` on other machines (onestack/images/push.py).
push-binaries: setup
	@$(ONESTACK) push-binaries $$FLAVORS

# The community checks (tests/community/checks.yaml) with ReFrame against the live tree.
community: setup-spack
	@$(ONESTACK) community

# The test problems of FLAVORS (default: the build lists) through their modules.
check: setup-spack
	@$(ONESTACK) check $$FLAVORS

# The pipeline's test jobs: this machine's builds of the flavors, published
# into a module tree of their own (the live tree is the publish stage's), checked.
check-built: setup-spack
	@$(ONESTACK) check --built $$FLAVORS

# The pipeline's first stage: data, recipes and .gitlab-ci.yml validated.
audit: setup-spack
	@$(ONESTACK) audit

# The build and test child pipelines (the concretize job runs this); FLAVORS
# (a pipeline variable) limits them to those flavors, e.g. for a merge request.
ci-generate: setup-spack
	@$(ONESTACK) ci-generate $$FLAVORS $${FULL_REBUILD:+--full-rebuild}

# A virtual Slurm cluster made from this machine (root): a controller on the
# host and compute nodes (cluster/cluster.yaml), each its own network namespace with its own
# hostname and slurmd, on a bridge of its own (cluster/cluster.yaml,
# cluster/README.md). `source "$$(make -s cluster-env)"` points sinfo, sbatch
# and srun at it; `make cluster-down` leaves no process, namespace or
# interface (the cluster's folder stays, with its logs, for the next `make cluster`).
# CLUSTER_CONFIG (above) names another cluster file.
CLUSTER = . setup/env.sh && "$$ONESTACK_VENV/bin/python" -m onestack.cluster --config "$$CLUSTER_CONFIG"
cluster: venv
	@$(CLUSTER) up

cluster-env: venv
	@$(CLUSTER) env

# Its venv as it is, if any: a removal must not wait on PyPI (a changed
# setup/requirements.txt would be installed first, and fail offline).
cluster-down:
	@. setup/env.sh && [ -x "$$ONESTACK_VENV/bin/python" ] || bash setup/venv.sh
	@$(CLUSTER) down

# The Intel MPI Benchmarks within a node and between nodes, per MPI and per
# crossing of MPIs (after `make cluster`; onestack/cluster/imb.py); its source
# comes from the mirror, which `make stack` and `make test` fill.
cluster-bench: venv
	@$(CLUSTER) bench
