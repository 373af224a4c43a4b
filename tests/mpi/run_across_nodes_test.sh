#!/usr/bin/env bash
# usage: run_across_nodes_test.sh FLAVOUR PROGRAM LAYER NODES NP [RANKS_PER_NODE|round-robin]
# The MPI layer's result checks across a real network hop: makes a pretend cluster of NODES nodes
# (tools/pretend-cluster: namespaces, a bridge, TCP between nodes), runs run_mpi_layer_test.sh on
# it through FLAVOUR's launcher (ranks placed in blocks, "1,3" per node, or round-robin), and tears
# the cluster down. Skipped (exit 77) where this machine cannot make namespaces, saying why.
set -euo pipefail
flavour=$1 program=$2 layer=$3 nodes=$4 np=$5 placement=${6:-block}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/pretend_cluster.sh" t
trap '"$cluster_tool" down "$name"' EXIT
dir=$("$cluster_tool" up "$name" "$nodes" | tail -n 1)
export SHMCOLL_CLUSTER_TIMEOUT=${SHMCOLL_CLUSTER_TIMEOUT:-240}
case $placement in
  block) ;;
  round-robin) export SHMCOLL_CLUSTER_ROUND_ROBIN=1 ;;
  *) export SHMCOLL_CLUSTER_RANKS=$placement ;;
esac
"$here/run_mpi_layer_test.sh" "$dir/mpirun.$flavour" "$program" "$layer" "$np"
