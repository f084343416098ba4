"""A cluster description (cluster/cluster.yaml) with a mistake is refused
with the file and the key, before anything is made: the schema's checks,
then what a schema cannot say (a private subnet that holds the nodes)."""

import pytest

from onestack import cluster


@pytest.mark.parametrize(
    "text,error",
    [
        (
            "prefix: Bad-Name\nsubnet: 10.213.9.0/24\nnodes: 2\n",
            r"1 problem\(s\):\n  prefix: 'Bad-Name' does not match",
        ),
        ("prefix: ok\nsubnet: 8.8.8.0/24\nnodes: 2\n", r"subnet: 8.8.8.0/24 is not a private network"),
        ("prefix: ok\nsubnet: 10.213.9.0/29\nnodes: 9\n", r"nodes: 9 must be a whole number from 1 to 5"),
    ],
)
def test_a_bad_description_is_refused_with_the_key(text, error, tmp_path):
    file = tmp_path / "cluster.yaml"
    file.write_text(text)
    with pytest.raises(cluster.ClusterError, match=rf"^{file}: .*{error}"):
        cluster.config.load(file)
