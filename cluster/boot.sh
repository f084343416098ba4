#!/bin/sh
# The first process of a virtual node or of the controller (onestack/cluster
# starts it in fresh UTS and mount namespaces, a node's inside its network
# namespace too): sets the hostname, bind-mounts the given files over the
# shared ones (only this namespace sees them), then becomes the daemon.
#   boot.sh HOSTNAME [SOURCE TARGET]... -- COMMAND [ARGUMENT]...
set -eu
hostname "$1"
shift
while [ "$1" != -- ]; do
  mount --bind "$1" "$2"
  shift 2
done
shift
exec "$@"
