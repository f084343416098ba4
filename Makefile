# onestack: the two commands of the README are `make stack` and `make test`.
# Each sets up what it needs first (`make setup`), idempotently.
SHELL := /bin/bash
ONESTACK := bin/onestack
# Which flavors to build and publish, e.g. FLAVORS="qe/openblas-mpich";
# empty = the `build` list of each environments/<app>.yaml.
FLAVORS ?=
PYTEST_ARGS ?=

.PHONY: setup mirror stack test flavors where rollback bench-modules

setup:
	@bash setup/apt.sh
	@bash setup/spack.sh
	@$(ONESTACK) site

mirror: setup
	@$(ONESTACK) mirror $(FLAVORS)

stack: setup
	@$(ONESTACK) build $(FLAVORS)
	@$(ONESTACK) publish $(FLAVORS)

# The flavor table follows the tests (it shows their outcomes); the exit code is pytest's.
test: stack
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
