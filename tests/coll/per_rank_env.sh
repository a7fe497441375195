#!/bin/sh
# Gives ranks different values of one variable, as a launcher that forwards the environment to
# some hosts only would:  per_rank_env.sh VAR LOW HIGH SPLIT cmd...
# ranks below SPLIT (of MPI_COMM_WORLD, from the launcher's environment) get LOW, the others HIGH.
var=$1 low=$2 high=$3 split=$4
shift 4
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
if [ "$rank" -lt "$split" ]; then export "$var=$low"; else export "$var=$high"; fi
exec "$@"
