#!/bin/sh
# Gives each rank one GCD, as srun --gpus-per-task / --gpu-bind would:  gcd_by_rank.sh PER cmd...
# rank r (of MPI_COMM_WORLD, from the launcher's environment) sees GCD r / PER.
per=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
ROCR_VISIBLE_DEVICES=$((rank / per))
export ROCR_VISIBLE_DEVICES
exec "$@"
