#!/usr/bin/env bash
# Pushes the SIF images `make images` built to the project's container
# registry as ORAS artifacts, which `apptainer pull oras://...` fetches.
# Needs Apptainer on the runner; without it, says so (not attempted).
set -euo pipefail
images=$(make -s where-images)
if ! command -v apptainer >/dev/null; then
  echo "push-images: not attempted: apptainer is not on PATH (the images stay in $images)"
  exit 0
fi
: "${CI_REGISTRY_IMAGE:?push-images: CI_REGISTRY_IMAGE is not set (a GitLab CI variable)}"
tag=${CI_COMMIT_TAG:-$CI_COMMIT_SHORT_SHA}
echo "$CI_REGISTRY_PASSWORD" | apptainer registry login -u "$CI_REGISTRY_USER" --password-stdin "oras://$CI_REGISTRY"
for sif in "$images"/*.sif; do
  name=$(basename "$sif" .sif)
  apptainer push "$sif" "oras://$CI_REGISTRY_IMAGE/$name:$tag"
  echo "push-images: $name:$tag"
done
