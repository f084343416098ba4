"""Container images: a real Apptainer (apptainer.py), the site's signing key
(keys.py), the cached Debian base (base.py), each flavor's image (flavor.py),
pushes of the images and of the site's binaries to its registry (push.py,
onestack/spack/oci_buildcache.py). The registry the tests start on loopback
is the tests' own (tests/images/registry.py)."""

from pathlib import Path

from onestack import render as rendering
from onestack.errors import OnestackError

TEMPLATES = Path(__file__).resolve().parent / "templates"


class ImageError(OnestackError):
    """An image step that failed; the message names the command and the fix."""


def render(template: str, **values) -> str:
    """A file of templates/, through onestack.render's escaping filters."""
    return rendering.text(TEMPLATES, template, **values)
