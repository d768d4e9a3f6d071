#!/usr/bin/env bash
# Times the README's test command where nothing is installed: a minimal Debian 12 (debootstrap --variant=minbase)
# in a chroot, a fresh clone of this repository inside, ../shared bind-mounted read-only beside it. This is how
# the "fresh machine" figures in docs/BENCHMARKS.md are measured; it also catches a dependency that tools/setup.sh
# or tools/setup-libtorch2.sh forgets to install (it found python3-venv).
#
#   sudo bash tools/bare-debian-test.sh [ROOT] [--libtorch2]
#
# ROOT (default /tmp/parla-bare) is created if missing and reused if present: a new ROOT for apt's time on a bare
# system. The first leg clones HEAD afresh; the second, --libtorch2, runs in that clone after it, as in .ci/run. Needs root, network access to the Debian mirror (and PyPI for the second
# leg), and debootstrap (installed if missing). Prints "bare-debian-test: N s" (wall) and exits with the command's code.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=/tmp/parla-bare
args=()
for a in "$@"; do
  case "$a" in
    --libtorch2) args+=(--libtorch2) ;;
    -*) echo "usage: sudo bash tools/bare-debian-test.sh [ROOT] [--libtorch2]" >&2; exit 2 ;;
    *) root=$a ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bare-debian-test: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
log() { echo "bare-debian-test: $*" >&2; }

if [ ! -x "$root/bin/bash" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >&2
  log "debootstrap --variant=minbase bookworm $root"
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
  # The host's apt sources, proxy settings and CA bundle (a sandbox's egress proxy may need its own CA); nothing else.
  rm -f "$root/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || cp /etc/apt/sources.list "$root/etc/apt/"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  [ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
  mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  # ...kept when the chroot's ca-certificates package regenerates the bundle.
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
fi

mkdir -p "$root/work/main" "$root/work/shared"
mounted=()
cleanup() { for ((i=${#mounted[@]}-1; i>=0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
bind() { mount --bind "$1" "$2"; mounted+=("$2"); }
if [ -d "$here/../shared" ]; then bind "$here/../shared" "$root/work/shared"; mount -o remount,bind,ro "$root/work/shared"; fi
mount -t proc proc "$root/proc"; mounted+=("$root/proc")
bind /dev "$root/dev"
bind /sys "$root/sys"
# A fresh clone of HEAD for the first leg; the --libtorch2 leg runs in the clone the first one left (as .ci/run).
if [ ${#args[@]} -eq 0 ] || [ ! -d "$root/work/main/.git" ]; then
  rm -rf "$root/work/main" && git clone -q "$here" "$root/work/main"
  log "cloned $(git -C "$root/work/main" rev-parse --short HEAD)"
fi

start=$(date +%s)
rc=0
env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  chroot "$root" /bin/bash -c "cd /work/main && bash tools/test.sh ${args[*]:-}" || rc=$?
log "$(( $(date +%s) - start )) s (tools/test.sh ${args[*]:-}), exit code $rc"
exit $rc
