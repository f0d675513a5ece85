#!/bin/bash
# tests/mutate.sh [--only NAME,...] [--list] [--check] [--no-baseline] [--scratch DIR]
# The mutation run of the suite (on demand, not in CI): about 20 defects
# planted one at a time in a scratch copy of this tree (default
# /tmp/spmd-mutate; never this tree), each built and tested with its ctest
# subset; a table of which tests catch which defect; exit 1 when a defect is
# not caught.  See tests/mutate.py and tests/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
exec "$py" "$here/mutate.py" "$@"
