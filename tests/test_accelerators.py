"""An application's accelerated styles for CPUs (environments/<app>.yaml
`accelerators`, e.g. LAMMPS's `-sf opt` and `-sf intel`): every published
flavor built with one runs each problem once more with it, through `module
load` as users do, checked against the same published reference as its
plain runs (tests/test_problems.py). One test per flavor, style and case."""

import pytest
from conftest import flavor_how, require_published, run_flavors

from onestack import problems, stack

CASES = [
    (f.module_name, style, case)
    for f in run_flavors()
    for style in sorted(f.accelerators)
    for case in sorted(problems.load(f.app.module))
]


@pytest.mark.parametrize("module, style, case", CASES, ids=[f"{m}:{s}:{c}" for m, s, c in CASES])
def test_accelerated_styles_match_the_reference(
    module, style, case, init_script, live_release, published_flavors, tmp_path
):
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    problem = problems.of_flavor(flavor, case, style)
    checks = problems.run(problem, flavor_how(module, live_release), tmp_path, init_script)
    report = "; ".join(map(str, checks))
    print(f"{module} {flavor.accelerators[style]} {case}: {report}")
    assert all(c.passed for c in checks), f"{module} {flavor.accelerators[style]} {case}: {report}"
