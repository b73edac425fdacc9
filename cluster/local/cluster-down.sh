#!/usr/bin/env bash
# Stops the control plane started by cluster-up.sh (only the processes recorded in its pid files)
# and removes its state under $CACHE_DIR/cluster/. Built tools are kept. Safe to run repeatedly.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [[ ! -e "$state" ]]; then
  echo "cluster-down: nothing to do" >&2
  exit 0
fi
stop_components
rm -rf "$state"
echo "cluster-down: stopped; removed $state" >&2
