#!/usr/bin/env bash
# bed_up.sh EMULATED-CLUSTER N: the cluster tests' setup. Brings the bed up, checks what makes the
# nodes nodes (own hostname, own /dev/shm, reachable over eth0), takes it down and checks that
# nothing is left, brings it up again (a second up after down must work), then starts Slurm.
# Exits 77 (skip) with the reason where the machine forbids namespaces.
set -euo pipefail
emu="$1"
nodes="$2"

fail() {
  echo "bed_up: FAILED: $*" >&2
  "$emu" down || true
  exit 1
}

# A bed left behind by an interrupted run goes first ("down" of a bed that is down is quiet).
"$emu" down
"$emu" up "$nodes"

[ "$("$emu" on node2 -- hostname)" = node2 ] || fail "node2's hostname is not node2"
marker="/dev/shm/collx-emu-check-$$"
"$emu" on node1 -- touch "$marker"
"$emu" on node2 -- test ! -e "$marker" || fail "node2 sees node1's /dev/shm"
test ! -e "$marker" || fail "the machine's /dev/shm sees node1's"
"$emu" on node1 -- rm -f "$marker"
"$emu" on "node$nodes" -- ping -c 1 -W 2 node1 >/dev/null || fail "node$nodes cannot reach node1"

"$emu" down
name="${COLLX_EMU_NAME:-collxemu}"
if ip netns list | grep -q "^$name-"; then fail "namespaces left after down: $(ip netns list)"; fi
if ip -br link | grep -Eq '^(br0|port[0-9]|eth0@)'; then fail "interfaces left in the machine's namespace"; fi

"$emu" up "$nodes"
"$emu" slurm-up
"$emu" status
