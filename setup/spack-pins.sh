# The Spack this stack is pinned to: commits, not branches or tags, so a moved
# tag or a fork cannot change what we build with. Sourced by setup/spack.sh.
SPACK_COMMIT=2e907202bcc8209a6a62243aab50c179b524cc3b            # spack v1.1.0
SPACK_PACKAGES_COMMIT=119680aeee8ea802c6111b7167583bddef97e82f   # spack-packages v2025.11.0
# Where a missing clone comes from; override for an internal mirror of the repos.
: "${ONESTACK_SPACK_URL:=https://github.com/spack/spack.git}"
: "${ONESTACK_SPACK_PACKAGES_URL:=https://github.com/spack/spack-packages.git}"
