"""Container images: a real Apptainer (apptainer.py), the site's signing key
(keys.py), the cached Debian base (base.py), each flavor's image (flavor.py),
a registry to push to and pull from (registry.py, push.py) and the site's
binaries through it (push.py, onestack/spack/oci_buildcache.py)."""

from pathlib import Path

from onestack import render as rendering

TEMPLATES = Path(__file__).resolve().parent / "templates"


class ImageError(RuntimeError):
    """An image step that failed; the message names the command and the fix."""


def render(template: str, **values) -> str:
    """A file of templates/, through onestack.render's escaping filters."""
    return rendering.text(TEMPLATES, template, **values)
