"""Tests of the image primitives (onestack/images). A package, so that its
conftest is images.conftest and never shadows tests/conftest.py, which
the other test modules import as `conftest`."""
