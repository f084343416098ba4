# The Apptainer onestack builds and signs images with: Debian's source
# package (suite sid; bookworm has none), pinned by the orig tarball's size
# and sha256 so that a changed upload is refused, not built. Sourced by
# setup/apptainer.sh; onestack/images/apptainer.py reads APPTAINER_VERSION.
APPTAINER_VERSION=1.4.5
APPTAINER_DEBIAN_SUITE=sid
APPTAINER_ORIG_SIZE=5196983
APPTAINER_ORIG_SHA256=9eb496fe0e3d98e68e66e8796290fe9f7185315fdf8a3f77b7964ef1f4abbb57
# The Go that builds it where the machine has none new enough (Debian
# bookworm's golang-go is 1.19): Go's own toolchain module, pinned by the sum
# Go's checksum database gives it (setup/apptainer.sh, pinned_toolchain).
GO_TOOLCHAIN_MODULE_VERSION=v0.0.1-go1.26.8.linux-amd64
GO_TOOLCHAIN_MODULE_SUM=h1:ZOmGe1OnfREDMIdb1Qi4G9JSuDPBLGExZMQ4nis1RXM=
