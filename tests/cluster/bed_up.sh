#!/usr/bin/env bash
# bed_up.sh EMULATED-CLUSTER N: the cluster tests' setup. Brings the bed up, checks what makes the
# nodes nodes (own hostname, own /dev/shm and System V IPC, reachable over eth0), takes it down and checks that
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
# System V shared memory too (UCX's sysv transport): a segment made on node1 is node1's alone.
shmid="$("$emu" on node1 -- ipcmk -M 4096 | awk '{print $NF}')"
[ -n "$shmid" ] || fail "ipcmk on node1 made no segment"
"$emu" on node1 -- ipcs -m -i "$shmid" >/dev/null 2>&1 || fail "node1 does not see its own segment $shmid"
# (ids are per namespace, so node2's fresh namespace is checked for holding none at all)
seen="$("$emu" on node2 -- ipcs -m | grep -c '^0x' || true)"
[ "$seen" = 0 ] || fail "node2 sees $seen System V segments (node1 made one)"
"$emu" on node1 -- ipcrm -m "$shmid"
"$emu" on "node$nodes" -- ping -c 1 -W 2 node1 >/dev/null || fail "node$nodes cannot reach node1"

"$emu" down
name="${COLLX_EMU_NAME:-collxemu}"
if ip netns list | grep -q "^$name-"; then fail "namespaces left after down: $(ip netns list)"; fi
if ip -br link | grep -Eq '^(br0|port[0-9]|eth0@)'; then fail "interfaces left in the machine's namespace"; fi

"$emu" up "$nodes"
"$emu" slurm-up
"$emu" status
