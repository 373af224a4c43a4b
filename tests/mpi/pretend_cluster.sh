# Sourced by the tests across nodes, with a letter for their clusters' names: skips the test (exit
# 77, saying why) where this machine cannot make a pretend cluster (tools/pretend-cluster); else
# sets $cluster_tool, a cluster $name of this test's own, and the launch scripts' setting for TCP
# between nodes (mpi_launch.sh).
cluster_tool=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools" && pwd)/pretend-cluster
if ! why=$("$cluster_tool" can-make 2>&1); then
  echo "SKIP: no pretend cluster here: $why"
  exit 77
fi
name=$1$$
name=${name:0:8}
export SHMCOLL_TEST_ACROSS_NODES=1
