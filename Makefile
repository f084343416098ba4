# onestack: the two commands of the README are `make stack` and `make test`.
# Each sets up what it needs first (`make setup`), idempotently.
SHELL := /bin/bash
ONESTACK := bin/onestack
# Which flavors to build, e.g. FLAVORS="qe/openblas-mpich";
# empty = the `build` list of each environments/<app>.yaml.
FLAVORS ?=
PYTEST_ARGS ?=

.PHONY: setup mirror stack stack-for-tests test flavors where rollback bench-modules report report-path images where-images check audit ci-generate

setup:
	@bash setup/apt.sh
	@bash setup/spack.sh
	@bash setup/node.sh
	@$(ONESTACK) site

mirror: setup
	@$(ONESTACK) mirror $(FLAVORS)

# The live tree offers every built flavor of the build lists, so FLAVORS
# selects what to build, not what to publish.
stack: setup
	@$(ONESTACK) build $(FLAVORS)
	@$(ONESTACK) publish

# What the tests need: each app's ci_build list (a fresh machine builds only
# that, within CI's budget); every built flavor of the build lists is published
# and tested.
stack-for-tests: setup
	@$(ONESTACK) build --ci
	@$(ONESTACK) publish

# The flavor table follows the tests (it shows their outcomes); the exit code is pytest's.
test: stack-for-tests
	@. setup/env.sh && "$$ONESTACK_VENV/bin/python" -m pytest $(PYTEST_ARGS); rc=$$?; \
	  echo; $(ONESTACK) flavors; exit $$rc

flavors: setup
	@$(ONESTACK) flavors

where:
	@$(ONESTACK) where

rollback:
	@$(ONESTACK) rollback

bench-modules:
	@$(ONESTACK) bench-modules

# The flavor benchmark report (HTML + PNG): every published flavor side by side.
report: stack
	@$(ONESTACK) report

report-path:
	@$(ONESTACK) report-path

# SIF images of the published flavors (FLAVORS selects; see containers/).
images: stack
	@$(ONESTACK) images $(FLAVORS)

where-images:
	@$(ONESTACK) where-images

# The test problems of FLAVORS (default: the build lists) through their modules.
check: setup
	@$(ONESTACK) check $(FLAVORS)

# The pipeline's first stage: data, recipes and .gitlab-ci.yml validated.
audit: setup
	@$(ONESTACK) audit

# The build and test child pipelines (the concretize job runs this).
ci-generate: setup
	@$(ONESTACK) ci-generate $(if $(FULL_REBUILD),--full-rebuild)
