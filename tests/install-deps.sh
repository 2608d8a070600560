#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine: the apt packages listed in
# tests/apt-packages.txt, plus rustfmt/clippy. Go and Rust toolchains are expected on PATH
# (the machine image has them). Safe to run again: does nothing when all is present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t pkgs < <(grep -vE '^\s*(#|$)' "$here/apt-packages.txt" | sort -u)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's nginx package starts a system nginx on port 80; tests start their own.
if systemctl is-active --quiet nginx 2>/dev/null; then systemctl stop nginx || true; fi
for c in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
done
