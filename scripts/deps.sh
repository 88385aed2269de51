#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and running Troupe needs.
# Idempotent: packages already present are left alone; apt-get runs only when one is missing.
set -euo pipefail
packages=(
  build-essential cmake g++ clang-format
  libcaf-dev libpq-dev libcereal-dev rapidjson-dev libspdlog-dev libfmt-dev
  libhowardhinnant-date-dev tzdata libcpp-httplib-dev
  prometheus chromium
  postgresql-15 postgresql-client-15 pkg-config
  iproute2
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "troupe: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
