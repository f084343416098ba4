"""`make push-images`: every built image into the site's registry as an ORAS
artifact (`apptainer push oras://...`), which desktop users `apptainer
pull`; `make push-binaries`: the published flavors' Spack binaries into the
same registry (oci://<registry>/buildcache), which site staff install from
on other machines (onestack/spack/oci_buildcache.py). The registry and its
credentials are the site's, given by variables (a CI job maps its own to them):

  ONESTACK_REGISTRY           host[:port]/path under which images go, e.g. registry.example.org/hpc/onestack
  ONESTACK_REGISTRY_USER      the account that may push
  ONESTACK_REGISTRY_PASSWORD  its password or token (never on a command line: stdin)
  ONESTACK_IMAGE_TAG          the tag (default: latest)
"""

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

from onestack import paths, spack, stack
from onestack.images import ImageError, apptainer, keys
from onestack.images.flavor import exclusive, images_dir, module_image
from onestack.modules import publish
from onestack.spack import oci_buildcache
from onestack.stack.flavors import Flavor

# What the docs and the errors tell desktop users to import.
PUBLIC_KEY_FILE = "site-signing.asc"

VARIABLES = ("ONESTACK_REGISTRY", "ONESTACK_REGISTRY_USER", "ONESTACK_REGISTRY_PASSWORD")
# What may stand in an oras:// reference: no spaces, no shell, no scheme of its own.
REFERENCE = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)*")
# An OCI tag of 128 characters at most, the staging suffix included.
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,119}")


def _settings(command: str) -> dict:
    missing = [v for v in VARIABLES if not os.environ.get(v)]
    if missing:
        raise ImageError(f"{command}: set {', '.join(missing)} (the site's registry, see onestack/images/push.py)")
    registry, tag = os.environ["ONESTACK_REGISTRY"], os.environ.get("ONESTACK_IMAGE_TAG", "latest")
    if not REFERENCE.fullmatch(registry) or not TAG.fullmatch(tag):
        raise ImageError(
            f"{command}: ONESTACK_REGISTRY={registry!r} / ONESTACK_IMAGE_TAG={tag!r}: expected "
            "host[:port]/path and a tag of letters, digits, . _ -"
        )
    return {"registry": registry, "tag": tag}


def live_images() -> List[Path]:
    """The images of `make -s where-images` that belong to the live
    release's flavors. Any other image there (a flavor no longer offered, or
    no longer published, or one whose build runs on the site's fabric alone,
    made before such flavors got none) is named and left out: pushed under
    the release's tag, it would pass for one of its flavors."""
    release = publish.current_release()
    unfit = {f.module_name for f in stack.load().flavors if f.desktop_unfit}
    names = [name for name in publish.release_manifest(release)["flavors"] if name not in unfit]
    images = sorted(module_image(name) for name in names if module_image(name).is_file())
    for name in (n for n in names if not module_image(n).is_file()):
        print(
            f"==> push-images: no image of {name} (`make images FLAVORS={name}` makes it): not pushed, "
            "the registry keeps what it had under this tag"
        )
    for other in sorted(set(images_dir().glob("*.sif")) - set(images)):
        print(
            f"==> push-images: left out {other}: not the image of a flavor of the live release ({release.name}) "
            "that runs on a desktop"
        )
    return images


def _holds(runner, image: Path) -> set:
    """The Spack builds an image carries, by its label."""
    return set(apptainer.inspect(runner, image).get("org.onestack.spack-hashes", "").split())


def _check_built_from_live_release(runner, images: List[Path]) -> None:
    """Each image holds the very builds of its flavor in the live release:
    an image kept after its rebuild failed, or built before a rollback,
    would pass for the release's under its tag. (A release published before
    its manifest named its builds is not checked.)"""
    release = publish.current_release()
    builds = publish.release_manifest(release).get("builds", {})
    by_image = {module_image(name): hashes for name, hashes in builds.items()}
    stale = [image.name for image in images if image in by_image and not set(by_image[image]) <= _holds(runner, image)]
    if stale:
        raise ImageError(
            f"push-images: {', '.join(stale)} not built from the live release's ({release.name}) builds of "
            "its flavor; nothing pushed: run `make images`, then `make push-images` again. After `make "
            "rollback`, the live release's builds are older than this checkout's: make its images from a "
            "checkout of the commit that published it (docs/site-staff/releases.md)"
        )


def push_all() -> List[str]:
    """Each image of the live release's flavors (live_images), all verified
    before any is pushed (never an unsigned or altered one), then pushed,
    with the site's public key written beside them for desktop users;
    returns the references pushed."""
    settings = _settings("push-images")
    with publish.exclusive(), exclusive():
        return _push_live(settings)


def _push_live(settings: dict) -> List[str]:
    images = live_images()
    if not images:
        raise ImageError(
            f"push-images: no image of a flavor of the live release in {images_dir()}: run `make images` first"
        )
    runner = apptainer.find(keys.signing_env())
    signer = keys.site_key(runner)
    for image in images:
        apptainer.verify(runner, image, signer)
    _check_built_from_live_release(runner, images)
    print(f"==> push-images: the site's public key for desktop users: {public_key()} (fingerprint {signer})")
    # The registry's credentials only for this run: `registry login` keeps
    # them in APPTAINER_CONFIGDIR (else ~/.apptainer), where they would
    # outlive the job on the runner.
    with tempfile.TemporaryDirectory(prefix="push-images-") as config:
        runner = runner.with_env(APPTAINER_CONFIGDIR=config)
        apptainer.login(
            runner,
            settings["registry"].split("/")[0],
            os.environ["ONESTACK_REGISTRY_USER"],
            os.environ["ONESTACK_REGISTRY_PASSWORD"],
        )
        return _push_each(runner, images, settings, signer)


# The tag every image goes under first. A registry cannot move several
# repositories' tags at once: the uploads, long and what fails (a network, a
# quota), go under this tag, and the users' tag changes only once every image
# is in the registry, each by a push of what it already holds.
STAGING_SUFFIX = "-staging"


def _push_each(runner, images: List[Path], settings: dict, signer: str) -> List[str]:
    """Every image under the staging tag, then under the tag; a failure names
    what it left as it was."""
    tag = settings["tag"]

    def staging_failed(reference: str, pushed: List[str]) -> str:
        return (
            f"{reference} failed: tag {tag} is as it was, no image of it changed; `make push-images` pushes all again"
        )

    def tagging_failed(reference: str, pushed: List[str]) -> str:
        return (
            f"{reference} failed after {len(pushed)} of {len(images)} images were tagged {tag}: "
            f"{', '.join(pushed) or 'none'}. Until `make push-images` runs again (safe: each push replaces its "
            f"image whole), tag {tag} mixes this run's images with earlier ones"
        )

    _push_under(runner, images, f"oras://{settings['registry']}", tag + STAGING_SUFFIX, signer, staging_failed)
    return _push_under(runner, images, f"oras://{settings['registry']}", tag, signer, tagging_failed)


def _push_under(runner, images: List[Path], where: str, tag: str, signer: str, failed) -> List[str]:
    """Each image under the tag in turn; failed(reference, pushed so far) says
    what a failure leaves."""
    pushed = []
    for image in images:
        reference = f"{where}/{image.stem}:{tag}"
        try:
            apptainer.push(runner, image, reference, signer)
        except ImageError as err:
            raise ImageError(f"push-images: {failed(reference, pushed)}.\n{err}") from err
        except KeyboardInterrupt:  # Ctrl-C, or a stop signal (commands.Stopped)
            print(f"push-images: stopped: {failed(reference, pushed)}", file=sys.stderr, flush=True)
            raise
        print(f"==> push-images: {reference}")
        pushed.append(reference)
    return pushed


def buildcache_url(registry: str) -> str:
    return f"oci://{registry}/buildcache"


def push_binaries(selected: List[Flavor]) -> str:
    """The selected published flavors' builds, with their link and run
    dependencies, into the registry's buildcache; returns its URL."""
    url = buildcache_url(_settings("push-binaries")["registry"])
    built, roots = spack.installed([f for f in selected if f.published])
    hashes = [h for flavor in built for h in spack.build_hashes(flavor, roots)]
    with tempfile.TemporaryDirectory() as tmp:
        oci_buildcache.push(hashes, oci_buildcache.write_scope(Path(tmp), url), dict(os.environ))
    print(f"==> push-binaries: {', '.join(f.module_name for f in built)} -> {url}")
    for flavor in built:
        print(f"    install elsewhere: bin/onestack install-binaries /{roots[flavor.spack_spec]['hash']} <prefix>")
    return url


def install_binaries(spec_hash: str, into: Path) -> Path:
    """One pushed build and its dependencies from the registry's buildcache
    into an install tree, with the pinned Spack and the site recipes, every
    blob checked against its digest first (oci_buildcache.install: Spack
    does not sign OCI buildcaches)."""
    url = buildcache_url(_settings("install-binaries")["registry"])
    scope = oci_buildcache.write_scope(paths.cache() / "install-binaries" / into.name, url, install_root=into)
    installed = oci_buildcache.install(spec_hash.removeprefix("/"), scope, dict(os.environ))
    print(f"==> install-binaries: /{spec_hash.removeprefix('/')} from {url} into {installed.root}")
    return installed.root


def public_key(dest: Optional[Path] = None) -> Path:
    """The site's public key, for desktop users to verify what they pull
    (`apptainer key import site-signing.asc`); beside the images by default."""
    dest = dest or images_dir() / PUBLIC_KEY_FILE
    dest.parent.mkdir(parents=True, exist_ok=True)
    return keys.export_public_key(apptainer.find(keys.signing_env()), dest)
