#!/usr/bin/env bash
# Run the study through the project's local one-node Slurm cluster:
# start the cluster, run Snakemake with the Slurm workflow profile under a
# time limit, and always stop the cluster again (also on failure or Ctrl-C).
#
# Usage: workflow/scripts/slurm-study.sh [TARGETS...] [SNAKEMAKE OPTIONS...]
#   e.g. workflow/scripts/slurm-study.sh --configfile config/tiny.yaml config/one-host.yaml \
#            --config campaign=slurm-tiny 'testbeds=[local-slurm]'
# Targets go before list-valued options (--config, --group-components, ...).
#
# Environment:
#   HPCVIRT_STUDY_TIMEOUT   seconds before Snakemake is stopped (default 7200);
#                           Snakemake gets SIGTERM, then SIGKILL 15 s later, and
#                           the remaining Slurm jobs are cancelled by `stop`.
#   HPCVIRT_WORKDIR         state directory of the cluster (see local-slurm.sh)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_ROOT="$(cd "${SCRIPT_DIR}/../.." && pwd)"
CLUSTER="${SCRIPT_DIR}/local-slurm.sh"
TIMEOUT="${HPCVIRT_STUDY_TIMEOUT:-7200}"
SNAKEMAKE="${PROJECT_ROOT}/.venv/bin/snakemake"
[[ -x "${SNAKEMAKE}" ]] || SNAKEMAKE="$(command -v snakemake)" || {
    echo "slurm-study: snakemake not found (run make deps)" >&2
    exit 1
}
export PATH="${PROJECT_ROOT}/.venv/bin:${PATH}"

stop_cluster() {
    local rc=$?
    timeout 120 bash "${CLUSTER}" stop || echo "slurm-study: stopping the cluster failed" >&2
    exit "${rc}"
}
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

timeout 120 bash "${CLUSTER}" start
eval "$(bash "${CLUSTER}" env)"
cd "${PROJECT_ROOT}"
set +e
timeout -k 15 "${TIMEOUT}" "${SNAKEMAKE}" --workflow-profile workflow/profiles/slurm "$@"
rc=$?
set -e
if ((rc == 124 || rc == 137)); then
    echo "slurm-study: Snakemake stopped after the time limit of ${TIMEOUT} s (HPCVIRT_STUDY_TIMEOUT)" >&2
fi
exit "${rc}"
