#!/usr/bin/env bash
# Make a Qpid C++ broker (qpidd, AMQP 1.0 + QMF) and Python's proton client available for the
# Qpid adapter and the differential tests (tests/qpid/).
#
# 1. qpidd: FLOW_QPIDD when set, else a `qpidd` on PATH (or /usr/sbin), is used as it is.
#    Otherwise it is built from the Apache Qpid C++ source tarball found at FLOW_QPID_SOURCE,
#    ../shared/qpid/qpid-cpp-src.tar.gz beside the repository, or
#    /work/shared/qpid/qpid-cpp-src.tar.gz, into a cache keyed by the tarball's SHA-256
#    (FLOW_QPID_CACHE, default ~/.cache/flow-sidecar/qpid, outside the checkout so that a
#    fresh clone reuses it): the first build takes about 10 minutes on 2 cores, a second
#    run finds `<cache>/<sha>/.complete` and costs seconds.
#    .cache/qpid/current always points at the prefix in use; the tests look there.
#    Neither an installed qpidd nor a tarball: a notice, exit 0, and the Qpid tests skip.
# 2. Python: Debian's python3-qpid-proton (the AMQP 1.0 client that speaks QMF), made
#    visible to the project's .venv through a .pth file naming only a folder of links to
#    the proton modules, so the rest of Debian's dist-packages cannot shadow the venv's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${FLOW_QPID_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flow-sidecar/qpid}
link="$repo/.cache/qpid/current"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Install the Debian packages named that are not installed yet (apt-get update only then).
apt_ensure() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "qpidd: installing ${missing[*]} from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

ensure_proton() {
  apt_ensure python3-qpid-proton
  local venv="$repo/.venv"
  [ -x "$venv/bin/python" ] || return 0
  local site links
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  links="$venv/debian-proton"
  mkdir -p "$links"
  # The proton package and its C binding (cproton.py, _cproton*.so), nothing else.
  dpkg-query -L python3-qpid-proton | grep -E '/dist-packages/(proton|_?cproton[^/]*)$' |
    while read -r path; do ln -sfn "$path" "$links/$(basename "$path")"; done
  echo "$links" > "$site/debian-qpid-proton.pth"
  if ! "$venv/bin/python" -c 'import proton' 2>/dev/null; then
    # Debian's binding is built for Debian's python3; a venv on another Python minor cannot
    # load it. PyPI's python-qpid-proton is a source package: build it (needs a C compiler).
    rm -f "$site/debian-qpid-proton.pth"
    apt_ensure gcc libssl-dev python3-dev
    "$venv/bin/python" -m pip install -q --disable-pip-version-check python-qpid-proton
  fi
  "$venv/bin/python" -c 'import proton; print("qpidd: proton", proton.VERSION, "in .venv")'
}

installed_qpidd() {
  if [ -n "${FLOW_QPIDD:-}" ]; then echo "$FLOW_QPIDD"; return 0; fi
  PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v qpidd 2>/dev/null
}

find_source() {
  local candidate
  for candidate in "${FLOW_QPID_SOURCE:-}" "$repo/../shared/qpid/qpid-cpp-src.tar.gz" \
                   /work/shared/qpid/qpid-cpp-src.tar.gz; do
    if [ -n "$candidate" ] && [ -f "$candidate" ]; then readlink -f "$candidate"; return 0; fi
  done
  return 1
}

# Build SOURCE_TARBALL into PREFIX. Debian ships no libqpid-proton-core.pc, which qpid-cpp's
# FindProton.cmake looks for: a pkg-config shim points it at libqpid-proton. BUILD_SSL stays
# ON (posix/AsynchIO.cpp includes the SSL header unconditionally); warnings are not errors.
build() {
  local tarball=$1 prefix=$2 work=$3
  apt_ensure cmake make g++ pkg-config ruby python3 libboost-dev \
    libboost-program-options-dev libboost-system-dev uuid-dev libnss3-dev libqpid-proton11-dev
  rm -rf "$work" "$prefix"
  mkdir -p "$work/src" "$work/bld" "$work/pkgconfig"
  tar -xzf "$tarball" -C "$work/src"
  local src libdir log="$work/build.log"
  src=$(find "$work/src" -mindepth 2 -maxdepth 2 -name CMakeLists.txt -printf '%h\n' | head -n 1)
  libdir=$(dpkg-query -L libqpid-proton11-dev | grep -m1 '/libqpid-proton.so$' | xargs dirname)
  cat > "$work/pkgconfig/libqpid-proton-core.pc" <<EOF
libdir=$libdir
includedir=/usr/include
Name: Proton-Core
Description: shim to libqpid-proton (Debian ships only libqpid-proton.pc)
Version: $(dpkg-query -W -f='${Version}' libqpid-proton11-dev | cut -d- -f1)
Libs: -L\${libdir} -lqpid-proton
Cflags: -I\${includedir}
EOF
  (cd "$work/bld" && PKG_CONFIG_PATH="$work/pkgconfig" nice -n 19 cmake "$src" \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DPYTHON_EXECUTABLE=/usr/bin/python3 \
    -DBUILD_TESTING=OFF -DBUILD_DOCS=OFF -DBUILD_PROBES=OFF -DENABLE_VALGRIND=OFF \
    -DENABLE_WARNING_ERROR=OFF -DBUILD_AMQP=ON -DBUILD_SSL=ON -DBUILD_SASL=OFF \
    -DBUILD_XML=OFF -DBUILD_RDMA=OFF -DBUILD_HA=OFF -DBUILD_LEGACYSTORE=OFF \
    -DBUILD_LINEARSTORE=OFF -DBUILD_BINDING_DOTNET=OFF -DINSTALL_QMFGEN=OFF \
    && nice -n 19 make -j"${JOBS:-$(nproc)}" all && nice -n 19 make install) >"$log" 2>&1 || {
    tail -n 40 "$log" >&2
    echo "qpidd: the build failed; the whole log is $log" >&2
    return 1
  }
  rm -rf "$work"
}

ensure_proton
mkdir -p "$(dirname "$link")"

if qpidd_bin=$(installed_qpidd) && [ -n "$qpidd_bin" ]; then
  echo "qpidd: using the installed $qpidd_bin ($("$qpidd_bin" --version 2>&1 | head -n 1))"
  rm -f "$link"
  exit 0
fi

if ! tarball=$(find_source); then
  echo "qpidd: no qpidd installed and no Qpid C++ source tarball (set FLOW_QPID_SOURCE);" \
       "the Qpid tests (tests/qpid/) will be skipped"
  rm -f "$link"
  exit 0
fi

sha=$(sha256sum "$tarball" | cut -c1-16)
prefix="$cache/$sha"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9   # one build at a time; a second caller waits for it and then finds it complete
if [ ! -f "$prefix/.complete" ]; then
  echo "qpidd: building $(basename "$tarball") (sha256 $sha...) into $prefix; about 10 minutes"
  start=$SECONDS
  build "$tarball" "$prefix" "$cache/work-$sha"
  "$prefix/sbin/qpidd" --version >/dev/null
  touch "$prefix/.complete"
  echo "qpidd: built in $((SECONDS - start)) s"
fi
ln -sfn "$prefix" "$link"
echo "qpidd: $("$prefix/sbin/qpidd" --version 2>&1 | head -n 1) at $prefix"
