#!/bin/bash
# A real RabbitMQ 4.x node for the test suite, next to (never touching) the main 3.10 broker
# of deploy/ensure-rabbitmq.sh: Debian is debootstrapped into a chroot from the mirror the
# host's apt already uses, rabbitmq-server is installed there with apt (a policy-rc.d keeps
# the package from starting anything) and the node runs from the chroot, as the chroot's
# rabbitmq user, on loopback ports of its own. Needs root, debootstrap (installed when
# missing) and network access to the Debian mirror. Self-contained on purpose: CI runs it
# on a fresh clone.
#
#   deploy/ensure-rabbitmq4.sh [VERSION] [start]   build if absent, start if not answering,
#                                                  wait, print version + PID
#   deploy/ensure-rabbitmq4.sh [VERSION] stop      stop the node and its epmd, unmount
#   deploy/ensure-rabbitmq4.sh [VERSION] status    exit 1 if not answering
#   deploy/ensure-rabbitmq4.sh [VERSION] env       FLOW_TEST_* exports for the test suite
#   deploy/ensure-rabbitmq4.sh [VERSION] ctl ARGS  rabbitmqctl ARGS against that node
#
# VERSION (default 4.3):
#   4.3  Debian forky, RabbitMQ 4.3.x: AMQP 5843, management 15843, prometheus 15853
#   4.0  Debian trixie, RabbitMQ 4.0.x: AMQP 5840, management 15840, prometheus 15850
# Each version has its own chroot (/opt/flow-rabbitmq4-<suite>, about 340 MB; first build
# 30-60 s, then about 5 s to start), its own Erlang distribution port (25840/25843) and
# epmd (4840/4843). Admin user flowtest/flowtest; guest/guest works from loopback.
#
# Environment: RMQ4_DENY_STATS=1 denies the deprecated feature
# management_metrics_collection (the management API then serves no queue depths or
# alarms, as on a 4.x broker whose operator followed RabbitMQ's advice). The config is
# rewritten on every call; a node whose config changed is restarted.
# RMQ4_EXTRA_CONF adds rabbitmq.conf lines (newline-separated).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

VERSION=4.3
case "${1:-}" in 4.0|4.3) VERSION=$1; shift ;; esac
case "$VERSION" in
    4.0) SUITE=trixie; N=40 ;;
    4.3) SUITE=forky; N=43 ;;
esac
R=/opt/flow-rabbitmq4-$SUITE
AMQP_PORT=$((5800 + N))
MGMT_PORT=$((15800 + N))
PROM_PORT=$((15810 + N))
DIST_PORT=$((25800 + N))
EPMD_PORT=$((4800 + N))
CTL_MIN=$((DIST_PORT + 10000))
CTL_MAX=$((CTL_MIN + 2))
ADMIN_USER=flowtest
ADMIN_PASS=flowtest
STATS_MS=1000
NODENAME=rabbit4@localhost
MGMT_URL="http://127.0.0.1:${MGMT_PORT}"
LOCK=/tmp/flow-rabbitmq4-$SUITE.lock

log() { echo "rabbitmq $VERSION: $*" >&2; }

# The mirror apt already uses on the host (deb822 or one-line format).
host_mirror() {
    local m=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
        m=$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
    fi
    [ -n "$m" ] || { log "no Debian mirror found in the host apt sources"; exit 1; }
    echo "$m"
}

apt_opts() {
    if [ "$SUITE" != trixie ]; then echo "-o Acquire::Check-Valid-Until=false"; fi
}

in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

# rabbitmqctl inside the chroot, as the rabbitmq user (cookie in /var/lib/rabbitmq).
rmq_ids() { awk -F: '$1=="rabbitmq" {print $3":"$4}' "$R/etc/passwd"; }   # chroot's uid:gid

ctl() {
    chroot --userspec="$(rmq_ids)" "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/var/lib/rabbitmq LANG=C.UTF-8 LC_ALL=C.UTF-8 \
        /usr/lib/rabbitmq/bin/rabbitmqctl "$@" 9>&-   # an epmd it may spawn must not hold our lock
}

mount_all() {
    mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
    mountpoint -q "$R/sys"  || mount -t sysfs sysfs "$R/sys"
    mountpoint -q "$R/dev"  || mount --bind /dev "$R/dev"
}

umount_all() {
    local m
    for m in dev sys proc; do
        if mountpoint -q "$R/$m"; then umount "$R/$m" || log "could not unmount $R/$m"; fi
    done
}

host_apt_install() {   # install a host package, waiting politely on the apt lock
    export DEBIAN_FRONTEND=noninteractive
    local i
    for i in $(seq 1 30); do
        if apt-get install -y "$@" >/tmp/flow-rabbitmq4-host-apt.log 2>&1; then return 0; fi
        if grep -q 'Could not get lock\|dpkg was interrupted\|Unable to acquire' /tmp/flow-rabbitmq4-host-apt.log; then
            log "host apt busy, retrying in 20 s"; sleep 20
        elif [ "$i" = 1 ] && grep -q 'Unable to locate package' /tmp/flow-rabbitmq4-host-apt.log; then
            apt-get update -qq >/dev/null 2>&1 || true   # a fresh machine has no package lists
        else
            cat /tmp/flow-rabbitmq4-host-apt.log >&2; return 1
        fi
    done
    return 1
}

build() {
    if [ -f "$R/.rmq4-built" ]; then return 0; fi
    local t0 mirror
    t0=$(date +%s)
    mirror=$(host_mirror)
    command -v debootstrap >/dev/null || host_apt_install debootstrap
    if [ ! -f "$R/.rmq4-debootstrapped" ]; then
        log "debootstrap $SUITE from $mirror into $R (about 1 min)"
        rm -rf "$R"; mkdir -p "$R"
        local script=$SUITE
        [ -f "/usr/share/debootstrap/scripts/$SUITE" ] || script=/usr/share/debootstrap/scripts/sid
        debootstrap --variant=minbase "$SUITE" "$R" "$mirror" "$script" >/tmp/flow-rabbitmq4-$SUITE-debootstrap.log 2>&1 \
            || { tail -20 /tmp/flow-rabbitmq4-$SUITE-debootstrap.log >&2; exit 1; }
        touch "$R/.rmq4-debootstrapped"
    fi
    {
        echo "deb $mirror $SUITE main"
        if [ "$SUITE" = trixie ]; then
            echo "deb $mirror trixie-updates main"
            echo "deb ${mirror%/debian}/debian-security trixie-security main"
        fi
    } > "$R/etc/apt/sources.list"
    # never let a package's maintainer script start a service (epmd/rabbit on default ports!)
    printf '#!/bin/sh\nexit 101\n' > "$R/usr/sbin/policy-rc.d"; chmod 755 "$R/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
    ensure_hosts
    mount_all
    # shellcheck disable=SC2046
    in_root apt-get $(apt_opts) update >/tmp/flow-rabbitmq4-$SUITE-apt.log 2>&1 || { tail -20 /tmp/flow-rabbitmq4-$SUITE-apt.log >&2; exit 1; }
    # shellcheck disable=SC2046
    in_root env DEBIAN_FRONTEND=noninteractive apt-get $(apt_opts) install -y --no-install-recommends \
        rabbitmq-server >>/tmp/flow-rabbitmq4-$SUITE-apt.log 2>&1 || { tail -20 /tmp/flow-rabbitmq4-$SUITE-apt.log >&2; exit 1; }
    in_root apt-get clean
    touch "$R/.rmq4-built"
    log "chroot built in $(( $(date +%s) - t0 )) s; size $(du -sh --one-file-system "$R" | cut -f1)"
}

ensure_hosts() {   # forky/sid chroots come without /etc/hosts; the node name needs localhost
    grep -qsE '^127\.0\.0\.1[[:space:]].*\blocalhost\b' "$R/etc/hosts" ||
        printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >> "$R/etc/hosts"
}

configure() {
    ensure_hosts
    local d="$R/etc/rabbitmq"
    mkdir -p "$d"
    cat > "$d/rabbitmq.conf.new" <<EOF
# written by ensure-rabbitmq4.sh — loopback only, non-default ports
listeners.tcp.1 = 127.0.0.1:${AMQP_PORT}
management.tcp.ip = 127.0.0.1
management.tcp.port = ${MGMT_PORT}
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = ${PROM_PORT}
collect_statistics_interval = ${STATS_MS}
loopback_users.guest = true
log.file.level = info
log.console = false
EOF
    # as deploy/rabbitmq.conf recommends: without these the management API refreshes
    # per-queue figures only every 5 s on 4.x, whatever collect_statistics_interval says
    grep '^management.sample_retention_policies' "$HERE/rabbitmq.conf" >> "$d/rabbitmq.conf.new"
    if [ "${RMQ4_DENY_STATS:-0}" = 1 ]; then
        echo 'deprecated_features.permit.management_metrics_collection = false' >> "$d/rabbitmq.conf.new"
    fi
    cat > "$d/rabbitmq-env.conf" <<EOF
# written by ensure-rabbitmq4.sh
NODENAME=${NODENAME}
DIST_PORT=${DIST_PORT}
CTL_DIST_PORT_MIN=${CTL_MIN}
CTL_DIST_PORT_MAX=${CTL_MAX}
ERL_EPMD_PORT=${EPMD_PORT}
ERL_EPMD_ADDRESS=127.0.0.1
PID_FILE=/var/lib/rabbitmq/${NODENAME%@*}.pid
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOF
    if [ -n "${RMQ4_EXTRA_CONF:-}" ]; then printf '%s\n' "$RMQ4_EXTRA_CONF" >> "$d/rabbitmq.conf.new"; fi
    if cmp -s "$d/rabbitmq.conf.new" "$d/rabbitmq.conf"; then
        rm "$d/rabbitmq.conf.new"
    else
        mv "$d/rabbitmq.conf.new" "$d/rabbitmq.conf"
        CONF_CHANGED=1
    fi
    echo '[rabbitmq_management,rabbitmq_prometheus].' > "$d/enabled_plugins"
    in_root chown -R rabbitmq:rabbitmq /etc/rabbitmq
}

answers() {   # management API answers with the admin user (or guest before it exists)
    curl -sf -m 5 -u "$ADMIN_USER:$ADMIN_PASS" "$MGMT_URL/api/overview" >/dev/null 2>&1 ||
        curl -sf -m 5 -u guest:guest "$MGMT_URL/api/overview" >/dev/null 2>&1
}

alive() {   # process exists and is not a zombie waiting to be reaped
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

chroot_pids() {   # live processes named $1 whose root is our chroot
    local p
    for p in $(pgrep -x "$1" 2>/dev/null || true); do
        if [ "$(readlink "/proc/$p/root" 2>/dev/null)" = "$R" ] && alive "$p"; then echo "$p"; fi
    done
}

beam_pid() {   # the beam.smp whose root is our chroot (if any)
    local p
    p=$(chroot_pids beam.smp | head -1)
    [ -n "$p" ] && echo "$p"
}

version() {
    curl -sf -m 5 -u "$ADMIN_USER:$ADMIN_PASS" "$MGMT_URL/api/overview" |
        python3 -c 'import json,sys; o=json.load(sys.stdin); print("RabbitMQ", o["rabbitmq_version"], "Erlang", o["erlang_version"], "node", o["node"])'
}

ensure_user() {
    if curl -sf -m 5 -u "$ADMIN_USER:$ADMIN_PASS" "$MGMT_URL/api/whoami" >/dev/null 2>&1; then return 0; fi
    ctl add_user "$ADMIN_USER" "$ADMIN_PASS" >/dev/null 2>&1 || ctl change_password "$ADMIN_USER" "$ADMIN_PASS" >/dev/null
    ctl set_user_tags "$ADMIN_USER" administrator >/dev/null
    ctl set_permissions -p / "$ADMIN_USER" '.*' '.*' '.*' >/dev/null
}

start() {
    command -v curl >/dev/null || host_apt_install curl
    command -v pgrep >/dev/null || host_apt_install procps
    build
    CONF_CHANGED=0
    configure
    if [ "$CONF_CHANGED" = 1 ] && beam_pid >/dev/null; then
        log "configuration changed; restarting the node"
        stop
    fi
    if answers; then ensure_user; version; echo "pid $(beam_pid || echo '?')"; return 0; fi
    mount_all
    if ! beam_pid >/dev/null; then
        log "starting $NODENAME (AMQP $AMQP_PORT, mgmt $MGMT_PORT, prometheus $PROM_PORT, dist $DIST_PORT, epmd $EPMD_PORT)"
        chroot --userspec="$(rmq_ids)" "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/var/lib/rabbitmq LANG=C.UTF-8 LC_ALL=C.UTF-8 \
            /usr/lib/rabbitmq/bin/rabbitmq-server -detached \
            >"$R/var/log/rabbitmq/startup_log" 2>"$R/var/log/rabbitmq/startup_err" </dev/null 9>&-
        # (9>&-: the broker and its epmd must not inherit our lock descriptor)
    fi
    local i t0=$SECONDS
    until ctl await_startup --timeout 10 >/dev/null 2>&1; do
        if [ $((SECONDS - t0)) -ge "${RMQ4_START_TIMEOUT:-180}" ] ||
           { [ $((SECONDS - t0)) -ge 20 ] && ! beam_pid >/dev/null; }; then
            log "the node did not start; last lines of its logs:"
            tail -n 15 "$R"/var/log/rabbitmq/*.log "$R/var/log/rabbitmq/startup_err" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 1
    done
    ensure_user
    for i in $(seq 1 60); do
        if answers; then version; echo "pid $(beam_pid || echo '?')"; return 0; fi
        sleep 1
    done
    log "management API did not answer on $MGMT_URL; see $R/var/log/rabbitmq/"
    exit 1
}

stop() {
    if [ ! -d "$R/usr/lib/rabbitmq" ]; then log "no chroot at $R"; return 0; fi
    local p
    p=$(beam_pid || true)
    if [ -n "$p" ]; then
        mount_all
        ctl shutdown >/dev/null 2>&1 || ctl stop >/dev/null 2>&1 || true
        local i
        for i in $(seq 1 60); do alive "$p" || break; sleep 1; done
        if alive "$p"; then log "beam $p still running; sending TERM"; kill "$p" || true; sleep 5; fi
    fi
    # the epmd our node started lives in the chroot and listens on $EPMD_PORT only
    for p in $(chroot_pids epmd); do kill "$p" || true; done
    for p in $(chroot_pids beam.smp); do log "leftover beam $p; sending TERM"; kill "$p" || true; done
    sleep 1
    umount_all
    log "stopped"
}

lock() {
    exec 9>"$LOCK"
    flock -w 600 9 || { log "another ensure-rabbitmq4.sh still holds $LOCK after 10 min"; exit 1; }
}

case "${1:-start}" in
    start|"") lock; start ;;
    stop) lock; stop ;;
    status) if answers; then version; echo "pid $(beam_pid || echo '?')"; else echo "not answering on $MGMT_URL"; exit 1; fi ;;
    env) cat <<EOF
export FLOW_TEST_AMQP_URL=amqp://${ADMIN_USER}:${ADMIN_PASS}@127.0.0.1:${AMQP_PORT}/%2F
export FLOW_TEST_MANAGEMENT_URL=${MGMT_URL}
export FLOW_TEST_MANAGEMENT_USER=${ADMIN_USER}
export FLOW_TEST_MANAGEMENT_PASSWORD=${ADMIN_PASS}
export FLOW_TEST_PROMETHEUS_URL=http://127.0.0.1:${PROM_PORT}
EOF
    ;;
    ctl) shift; mount_all; ctl "$@" ;;
    *) echo "usage: $0 [4.0|4.3] [start|stop|status|env|ctl ARGS]" >&2; exit 2 ;;
esac
