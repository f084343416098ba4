# The Apptainer onestack builds and signs images with: Debian's source
# package (suite sid; bookworm has none), pinned by the orig tarball's size
# and sha256 so that a changed upload is refused, not built. Sourced by
# setup/apptainer.sh; onestack/images/apptainer.py reads APPTAINER_VERSION.
APPTAINER_VERSION=1.4.5
APPTAINER_DEBIAN_SUITE=sid
APPTAINER_ORIG_SIZE=5196983
APPTAINER_ORIG_SHA256=9eb496fe0e3d98e68e66e8796290fe9f7185315fdf8a3f77b7964ef1f4abbb57
