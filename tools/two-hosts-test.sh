#!/usr/bin/env bash
# Two hosts on one machine (issue 14, item 5): two network namespaces joined by a veth pair, each
# host with its own host name (node identity) and its own /dev/shm (a tmpfs in a mount namespace
# of its own, shared by its two ranks), so shared memory stops at the host as it would; and the
# Python suite (numpy flavour) run by 4 ranks, 2 per "host", the store on the first. Gloo goes over
# the veth; shared memory serves only the ranks of one host; message-queue readers on the other
# host are served remotely. Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2: without them it
# prints why and exits 0 (a skip). Exit status non-zero when any rank fails.
#
# Then a dead rank on the other host (second host in a pid namespace of its own): the survivors of
# both hosts get RankFailureError naming it and shrink (python/tests/elastic_two_hosts_job.py).
#
# Message queues made by the group serve the readers of the other host over TCP. Not run across
# hosts: the three external-writer tests, whose writer process builds a handle for readers that
# all share its memory (readers of an external writer on other nodes are not supported); set
# TWO_HOSTS_PYTEST_ARGS= (empty) to run them anyway.
#   tools/two-hosts-test.sh [BUILD_DIR]     (default build/)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
SUFFIX="$$"
NS_A="gc-a-$SUFFIX" NS_B="gc-b-$SUFFIX"
VETH_A="gca$SUFFIX" VETH_B="gcb$SUFFIX"
ADDR_A=10.77.0.1 ADDR_B=10.77.0.2
LOGS="$(mktemp -d /tmp/groupcoord-two-hosts-XXXXXX)"
# Inserted as is into each rank's shell command line (hence the inner quotes).
PYTEST_SELECT="${TWO_HOSTS_PYTEST_ARGS-"-k 'not external_writer'"}"

skip() { echo "[two-hosts] SKIPPED: $*"; rm -rf "$LOGS"; exit 0; }
cleanup() {
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
}
trap cleanup EXIT

[ -f "$BUILD/python/groupcoord/__init__.py" ] || skip "no Python binding in $BUILD"
command -v ip >/dev/null && command -v unshare >/dev/null || skip "iproute2 or unshare missing"
ip netns add "$NS_A" 2>/dev/null || skip "cannot create network namespaces here (needs root)"
ip netns add "$NS_B" || skip "cannot create a second network namespace"
ip link add "$VETH_A" type veth peer name "$VETH_B" || skip "cannot create a veth pair"
ip link set "$VETH_A" netns "$NS_A" && ip link set "$VETH_B" netns "$NS_B" || exit 1
ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VETH_A" && ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VETH_A" up && ip -n "$NS_B" link set "$VETH_B" up || exit 1

# rank_command HOST VETH RANK LOCAL_RANK: one rank, as torchrun would start it on that host.
rank_command() {
  echo "env RANK=$3 WORLD_SIZE=4 LOCAL_RANK=$4 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=$ADDR_A MASTER_PORT=29641 GROUPCOORD_STORE_TOKEN=two-hosts-$SUFFIX \
    GLOO_SOCKET_IFNAME=$2 GROUPCOORD_TEST_ARRAYS=numpy PYTHONPATH=$BUILD/python \
    /usr/bin/python3 $ROOT/python/tests/run_rank.py -q -p no:cacheprovider $PYTEST_SELECT $ROOT/python/tests \
    >$LOGS/rank$3.log 2>&1"
}

# host NS NAME VETH FIRST_RANK: the host's two ranks, in its network namespace, under its own
# name and /dev/shm; fails when either rank fails.
host() {
  local ns="$1" name="$2" veth="$3" first="$4"
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c "
    hostname $name && mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 97
    $(rank_command "$name" "$veth" "$first" 0) & a=\$!
    $(rank_command "$name" "$veth" $((first + 1)) 1) & b=\$!
    wait \$a; ra=\$?; wait \$b; rb=\$?
    [ \$ra -eq 0 ] && [ \$rb -eq 0 ]"
}

echo "[two-hosts] $NS_A ($ADDR_A: ranks 0, 1) <-> $NS_B ($ADDR_B: ranks 2, 3); logs in $LOGS"
host "$NS_A" gc-host-a "$VETH_A" 0 & host_a=$!
host "$NS_B" gc-host-b "$VETH_B" 2 & host_b=$!
status=0
wait $host_a || status=1
wait $host_b || status=1
if [ $status -ne 0 ]; then
  for i in 0 1 2 3; do
    echo "[two-hosts] ---- rank $i ----"
    tail -30 "$LOGS/rank$i.log"
  done
fi
tail -3 "$LOGS/rank0.log"

# ---- a dead rank on the other host (docs/elastic.md) --------------------------------------------
# Host B gets a pid namespace of its own (and its own /proc), as another machine would: ranks 0
# and 1 cannot see its processes, so they learn of rank 3's death from rank 2's report in the store.
# elastic_command HOST VETH RANK LOCAL_RANK
elastic_command() {
  echo "env RANK=$3 WORLD_SIZE=4 LOCAL_RANK=$4 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=$ADDR_A MASTER_PORT=29642 GROUPCOORD_STORE_TOKEN=two-hosts-elastic-$SUFFIX \
    GLOO_SOCKET_IFNAME=$2 PYTHONPATH=$BUILD/python \
    timeout 120 /usr/bin/python3 $ROOT/python/tests/elastic_two_hosts_job.py >$LOGS/elastic$3.log 2>&1"
}
# elastic_host NS NAME VETH FIRST_RANK EXPECTED_SECOND UNSHARE_FLAGS...: the second rank's
# expected exit status is given (137: rank 3 kills itself).
elastic_host() {
  local ns="$1" name="$2" veth="$3" first="$4" second_status="$5"
  shift 5
  ip netns exec "$ns" unshare --uts --mount --propagation private "$@" sh -c "
    hostname $name && mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 97
    $(elastic_command "$name" "$veth" "$first" 0) & a=\$!
    $(elastic_command "$name" "$veth" $((first + 1)) 1) & b=\$!
    wait \$a; ra=\$?; wait \$b; rb=\$?
    [ \$ra -eq 0 ] && [ \$rb -eq $second_status ]"
}
elastic=0
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  elastic_host "$NS_A" gc-host-a "$VETH_A" 0 0 & host_a=$!
  elastic_host "$NS_B" gc-host-b "$VETH_B" 2 137 --pid --fork --mount-proc & host_b=$!
  wait $host_a || elastic=1
  wait $host_b || elastic=1
  for i in 0 1 2 3; do
    if [ $elastic -ne 0 ]; then
      echo "[two-hosts] ---- elastic rank $i ----"
      tail -20 "$LOGS/elastic$i.log"
    else
      grep -h "survived" "$LOGS/elastic$i.log" | sed 's/^/[two-hosts] elastic: /'
    fi
  done
  [ $elastic -eq 0 ] && echo "[two-hosts] elastic: rank 3 of the other host died; all survivors shrank"
  [ $elastic -ne 0 ] && status=1
else
  echo "[two-hosts] elastic phase SKIPPED: cannot make a pid namespace here (unshare --pid)"
fi

[ $status -eq 0 ] && echo "[two-hosts] passed" && rm -rf "$LOGS"
exit $status
