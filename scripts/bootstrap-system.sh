#!/usr/bin/env bash
# System packages the package needs beyond Python: iproute2 (ip, tc) for the emulated
# cluster, chromium (headless) for the test that opens a notebook in JupyterLab. Installs
# only what is missing, and only when it can (root with apt-get).
set -euo pipefail
missing=()
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
else
  echo "note: ${missing[*]} missing and cannot be installed here; live cluster rules (iproute2) and the browser test (chromium) will be skipped" >&2
fi
