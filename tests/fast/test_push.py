"""What `make push-images` pushes: the images of the live release's flavors,
never another image left in the folder (a flavor no longer offered, or no
longer published), which the release's tag would pass off as one of its."""

import json

import pytest

from onestack import commands, stack
from onestack.errors import OnestackError
from onestack.images import flavor, push
from onestack.modules import publish


@pytest.fixture
def live(tmp_path, monkeypatch):
    """A live release of three flavors: one with no image yet, and one the
    stack's data no longer has (the live tree still offers it)."""
    monkeypatch.setenv("ONESTACK_PREFIX", str(tmp_path))
    release = publish.releases_dir() / "20261129-000000"
    release.mkdir(parents=True)
    (release / publish.COMPLETE_MARK).write_text(
        json.dumps({"flavors": ["hpl/openblas-mpich", "hpl/mkl-mpich", "qe/retired"]})
    )
    publish.current_link().symlink_to(release)
    flavor.images_dir().mkdir(parents=True)
    return release


def test_only_the_live_releases_images_are_pushed(live, capsys):
    matrix = stack.load()
    ours = flavor.sif_path(matrix.flavor("hpl/openblas-mpich"))
    gone = flavor.sif_path(matrix.flavor("hpl/openblas-impi"))
    stray = flavor.images_dir() / "qe-7.4-mkl-mpich.sif"
    retired = flavor.module_image("qe/retired")
    for image in (ours, gone, stray, retired):
        image.write_text("an image")
    assert push.live_images() == [ours, retired]
    said = capsys.readouterr().out
    assert all(f"left out {image}: not the image of a flavor of the live release" in said for image in (gone, stray))


def test_no_image_of_the_live_release_is_an_error_naming_the_fix(live, monkeypatch):
    for name in push.VARIABLES:
        monkeypatch.setenv(name, "registry.test/hpc" if name == "ONESTACK_REGISTRY" else "x")
    (flavor.images_dir() / "qe-7.4-mkl-mpich.sif").write_text("an image")
    with pytest.raises(push.ImageError, match="no image of a flavor of the live release .* run `make images` first"):
        push.push_all()


def test_an_image_not_built_from_the_live_release_is_not_pushed(live, monkeypatch):
    """An image kept after its rebuild failed, or built before a rollback:
    its label names other builds than the live release's, and nothing is
    pushed. (Apptainer's calls answer as for such an image: what is judged
    here is push's decision.)"""
    for name in push.VARIABLES:
        monkeypatch.setenv(name, "registry.test/hpc" if name == "ONESTACK_REGISTRY" else "x")
    manifest = json.loads((live / publish.COMPLETE_MARK).read_text())
    manifest["builds"] = {"hpl/openblas-mpich": ["live0hash", "live1hash"]}
    (live / publish.COMPLETE_MARK).write_text(json.dumps(manifest))
    image = flavor.sif_path(stack.load().flavor("hpl/openblas-mpich"))
    image.write_text("an image")
    monkeypatch.setattr(push.keys, "signing_env", lambda: {})
    monkeypatch.setattr(push.apptainer, "find", lambda env: None)
    monkeypatch.setattr(push.keys, "site_key", lambda runner: "F" * 40)
    monkeypatch.setattr(push.apptainer, "verify", lambda runner, image, signer: None)
    labels = {"org.onestack.spack-hashes": "live0hash older1hash dispatcherhash"}
    monkeypatch.setattr(push.apptainer, "inspect", lambda runner, image: labels)
    monkeypatch.setattr(push.apptainer, "login", lambda *args: pytest.fail("logged in to push a stale image"))
    with pytest.raises(push.ImageError, match=f"{image.name} not built from the live release's"):
        push.push_all()


def test_a_publish_into_another_sites_prefix_is_refused_and_changes_nothing(live):
    """Two sites given one prefix (a site file copied with its prefix kept):
    the second's publish would replace the first's live tree; refused,
    before anything is generated, naming the site file's key."""
    manifest = json.loads((live / publish.COMPLETE_MARK).read_text())
    (live / publish.COMPLETE_MARK).write_text(json.dumps({**manifest, "site": "other-center"}))
    with pytest.raises(publish.PublishError, match=r"(?s)site 'other-center'.*`prefix` in sites/default/site.yaml"):
        publish.publish(stack.load().select(["hpl/openblas-mpich"]))
    assert publish.current_release() == live and sorted(publish.releases_dir().iterdir()) == [live]


@pytest.mark.parametrize("failing", [None, "b:latest-staging", "b:latest"])
def test_every_image_is_staged_before_the_users_tag_changes(failing, tmp_path):
    """The uploads go under the staging tag; the users' tag changes only once
    all are in the registry: a failed upload leaves it as it was."""
    images = [tmp_path / "a.sif", tmp_path / "b.sif"]
    sent = []

    def pushing(runner, image, reference, signer):
        if reference.endswith(f"/{failing}"):
            raise push.ImageError("the registry's quota")
        sent.append(reference.rsplit("/", 1)[1])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(push.apptainer, "push", pushing)
        settings = {"registry": "registry.test/hpc", "tag": "latest"}
        if failing is None:
            push._push_each(None, images, settings, "F" * 40)
        else:
            with pytest.raises(push.ImageError) as raised:
                push._push_each(None, images, settings, "F" * 40)
    staged = ["a:latest-staging", "b:latest-staging"]
    if failing is None:
        assert sent == [*staged, "a:latest", "b:latest"], sent
    elif failing.endswith("staging"):
        assert sent == staged[:1] and "tag latest is as it was" in str(raised.value), (sent, raised.value)
    else:
        assert sent == [*staged, "a:latest"] and "mixes this run's images" in str(raised.value), sent


def test_make_images_makes_images_of_the_live_releases_builds_only(live, monkeypatch, capsys):
    """Its images folder is what users see: an image of a build that is not
    live (one built after a publish that failed, or before a rollback; a
    flavor not published) would pass for the build `module load` gives."""
    (live / publish.COMPLETE_MARK).write_text(
        json.dumps(
            {
                "flavors": ["hpl/openblas-mpich", "hpl/mkl-mpich"],
                "builds": {"hpl/openblas-mpich": ["aaa"], "hpl/mkl-mpich": ["bbb"]},
            }
        )
    )
    matrix = stack.load()
    asked = [matrix.flavor(n) for n in ("hpl/openblas-mpich", "hpl/mkl-mpich", "hpl/openblas-openmpi")]
    here = {"hpl/openblas-mpich": ["aaa"], "hpl/mkl-mpich": ["ccc"], "hpl/openblas-openmpi": ["ddd"]}
    monkeypatch.setattr(flavor.spack, "installed", lambda flavors: (flavors, {}))
    monkeypatch.setattr(flavor.spack, "build_hashes", lambda f, roots: here[f.module_name])
    monkeypatch.setattr(flavor, "build", lambda f, roots: flavor.sif_path(f))
    with pytest.raises(flavor.ImageError) as refused:
        flavor.build_all(asked)
    assert str(refused.value).startswith("2 of 3 images could not be built:\n"), refused.value
    assert f"hpl/mkl-mpich: its builds here are not the live release's ({live.name})" in str(refused.value)
    assert f"hpl/openblas-openmpi: not in the live release ({live.name}): publish it first" in str(refused.value)
    assert "no image of hpl/openblas-mpich" not in capsys.readouterr().out


def test_a_stop_while_the_users_tag_moves_says_what_it_left(monkeypatch, capsys, tmp_path):
    """A SIGTERM after one of two images was tagged left the tag mixing
    this run's images with older ones, and said nothing of it."""
    pushed = []

    def push_or_stopped(runner, image, reference, signer):
        if pushed:
            raise commands.Stopped(15)
        pushed.append(reference)

    monkeypatch.setattr(push.apptainer, "push", push_or_stopped)
    images = [tmp_path / "hpl-a.sif", tmp_path / "hpl-b.sif"]

    def tagging_failed(reference, done):
        return f"{reference} failed after {len(done)} of 2 images were tagged"

    with pytest.raises(commands.Stopped):
        push._push_under(None, images, "oras://registry/site", "v1", "fp", tagging_failed)
    assert (
        "push-images: stopped: oras://registry/site/hpl-b:v1 failed after 1 of 2 images were tagged"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("held", ["publish", "images"])
def test_images_are_not_pushed_while_a_publish_or_an_image_build_runs(live, monkeypatch, held):
    """Between an image's check and its push, a rollback could change which
    release is live, or `make images` rename another image over it."""
    for name in push.VARIABLES:
        monkeypatch.setenv(name, "registry.test/hpc" if name == "ONESTACK_REGISTRY" else "x")
    lock = publish.exclusive() if held == "publish" else flavor.exclusive()
    with lock, pytest.raises(OnestackError, match=r"another .* is running \(pid \d+\)"):
        push.push_all()
