#!/bin/bash
# Installs ptyvisor's build and test dependencies from Debian 12's packages. Idempotent:
# when everything is present it changes nothing and does not touch the network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config g++
  clang libclang-rt-14-dev                  # libFuzzer and sanitizer runtimes for the fuzz preset
  libsystemd-dev                            # sd-event, sd-bus, sd-daemon, sd-journal
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libre2-dev                                # WAIT for text and policy patterns: linear-time matching (no backtracking)
  libboost-dev                              # ptyvisor web: Boost.Beast and Boost.Asio (HTTP, WebSocket), header-only
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  systemd dbus util-linux passwd procps     # the test harness boots a private systemd
  asciinema                                 # the recording test reads recordings with asciinema cat
  python3 python3-venv python3-pip python3-setuptools python3-wheel  # clients/python: offline install
  python3-pytest python3-pexpect            # clients/python's suite; pexpect is the behaviour it matches
  python3-mypy flake8                       # clients/python/lint.sh: its type check and linter
  vim curl                                  # what the MCP end-to-end agent drives (integrations/mcp; it also needs node and npm)
  libvterm-dev                              # the screen: the terminal emulator (README, Dependencies)
  libseccomp-dev                            # the screen worker's system call allow-list
  tmux less                                 # the screen suite compares snapshots with tmux's
  zsh                                       # shell integration: its scripts are tested in zsh too
  prometheus python3-prometheus-client      # ptyvisor metrics: promtool check metrics, and the OpenMetrics reference parser
  chromium                                  # console/test.sh: the console's browser suites (headless, driven by puppeteer-core)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Packages install, services do not start (prometheus brings a server we need only the
# promtool of): policy-rc.d says no to invoke-rc.d for the length of the install.
guard=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  guard=/usr/sbin/policy-rc.d
  printf '#!/bin/sh\nexit 101\n' > "$guard" && chmod 0755 "$guard"
  trap 'rm -f "$guard"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
