"""Bad input stops a publish with its error, and publishes nothing: the live
module tree stays what it was. (Every bad-input case is checked in-process,
in seconds, by tests/fast/test_bad_input.py; here one runs end to end.)"""

from conftest import REPO, onestack

from onestack import data
from onestack.modules import publish
from tests.fast.test_bad_input import edited_copy


def _releases():
    return sorted(p.name for p in publish.releases_dir().iterdir())


def test_bad_input_is_named_and_nothing_is_published(tmp_path, live_release):
    case = data.load(REPO / "tests" / "bad-input" / "unknown-mpi.yaml", "bad-input")
    before = _releases()
    proc = onestack("publish", env_extra={"ONESTACK_DATA_ROOT": str(edited_copy(case, tmp_path))})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for line in case["error"]:
        assert line in proc.stderr, f"missing from the error:\n  {line}\ngot:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    assert publish.current_release() == live_release
    assert _releases() == before


def test_unknown_flavor_lists_the_known_ones(live_release):
    proc = onestack("publish", "qe/mkl-nosuchmpi")
    assert proc.returncode == 1
    assert "unknown flavor(s) qe/mkl-nosuchmpi" in proc.stderr
    assert "qe/openblas-mpich" in proc.stderr
    assert publish.current_release() == live_release
