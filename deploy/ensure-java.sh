#!/usr/bin/env bash
# Spark (flow-pipeline and its tests) runs on a Java runtime, 17 or newer for Spark 4.
# Use the one on PATH when it is recent enough, else install Debian's headless JRE.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

major() {
  # "openjdk version "17.0.15" ..." -> 17; "1.8.0_392" -> 8
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

if command -v java >/dev/null 2>&1 && [ "$(major)" -ge 17 ]; then
  echo "java: $(java -version 2>&1 | head -n 1)"
  exit 0
fi

echo "java: no Java 17+ on PATH; installing a headless JRE from Debian's packages"
as_root apt-get update -qq
if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null \
   || [ "$(major)" -lt 17 ]; then
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi
echo "java: $(java -version 2>&1 | head -n 1)"
