#!/usr/bin/env bash
# Installs Debian's prometheus package (prometheus and promtool) for the
# exporter's tests (cmd/etcdinspect/command/exporter_test.go): the real
# Prometheus server scraping `etcdinspect exporter`, and promtool checking
# the alert rules and the exporter's metrics.
#
# Idempotent: does nothing when both are on PATH. Installs only as root and
# only with apt-get; otherwise says why and exits 0 (the tests then skip,
# saying so). Touches nothing but the package: it does not run
# `apt-get update` unless the install fails for a stale package list, and a
# daemon the package's scripts started (on a machine with systemd and no
# policy-rc.d refusing it) is stopped again, so that the tests' own
# Prometheus processes are the only ones this script leaves behind: none.
set -uo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have prometheus && have promtool; then
  echo "install-prometheus: already installed: $(command -v prometheus) ($(prometheus --version 2>&1 | head -n1))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-prometheus: prometheus or promtool is missing and this is not root: not installing (as root: apt-get install --no-install-recommends prometheus)"
  exit 0
fi
if ! have apt-get; then
  echo "install-prometheus: prometheus or promtool is missing and there is no apt-get: not installing"
  exit 0
fi

# Was a prometheus service running before? Then it is the user's: leave it.
running_before=no
if [ -d /run/systemd/system ] && systemctl is-active --quiet prometheus 2>/dev/null; then
  running_before=yes
fi

install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
}
log=$(mktemp "${TMPDIR:-/tmp}/install-prometheus.XXXXXX")
trap 'rm -f "$log"' EXIT
echo "install-prometheus: apt-get install -y --no-install-recommends prometheus"
if ! install >"$log" 2>&1; then
  echo "install-prometheus: the install failed; refreshing the package lists (apt-get update) and trying once more"
  if ! { apt-get update -q && install; } >>"$log" 2>&1; then
    echo "install-prometheus: could not install prometheus (last lines of the log follow); the tests that need it will skip"
    tail -n 5 "$log"
    exit 0
  fi
fi

if [ -d /run/systemd/system ]; then
  if [ "$running_before" = no ] && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl stop prometheus
    echo "install-prometheus: the package started prometheus.service; stopped it (it stays enabled: systemctl disable prometheus to keep it off)"
  fi
else
  # Without systemd, Debian starts services through invoke-rc.d, which
  # policy-rc.d may refuse (containers do: exit 101).
  echo "install-prometheus: no systemd here: the package's service was not started unless invoke-rc.d allowed it (/etc/init.d/prometheus)"
fi
echo "install-prometheus: installed $(command -v prometheus) ($(prometheus --version 2>&1 | head -n1)) and $(command -v promtool)"
