#!/usr/bin/env bash
# `make test`: the whole test suite, in two phases.
#
# 1. At once, none of it measuring (so sharing the cores costs no result):
#    - in the background, at a low CPU and I/O priority (nice 17; Apptainer's
#      build at 19, as it is needed last): Apptainer (built
#      once per machine from its pinned source when the machine has none; only
#      the image tests run it), and the pinned suites on this host, by Spack
#      from spack-envs/laptop/spack.lock (python -m hpcvirt.build: installed
#      once per machine, linked into this clone's .hpcvirt/suites), then both
#      images the container and guest tests run on at once (the offline image
#      by its Snakemake rule, and the guests' image; each once per machine,
#      reused afterwards); logs
#      logs/software/test-{images,apptainer,offline-image,guest-image}.log;
#    - at normal priority, the tests that need neither an image nor the machine
#      to themselves: pytest -m "not e2e and not slurm and not vm and not images"
#      (parsers, schemas, statistics, dry-runs ...; some run MPI ranks with a
#      time limit, which must not wait for a compiler);
#    - once the suites are installed, at a low priority (nice 10), the slow
#      tests that measure nothing: -m no_measurement (the paper and the report
#      from the archive, the offline bundle, Spack's concretization), output in
#      logs/software/test-no-measurement.log.  They go on in phase 2, until
#      its last part.
# 2. The tests that measure, in three lanes (a and c at normal priority):
#    a. as soon as the unit tests are done, one at a time, the tests of the
#       local Slurm clusters that need no suite: the clusters' own tests and
#       the tiny study on the two-node cluster (Debian's NetPIPE, qperf and
#       iperf3, and the placement benchmark):
#       -m "slurm and not suites and not vm and not images";
#       then, once the suites are installed too, the study through the
#       one-node cluster that runs them (the README's Slurm command):
#       -m "slurm and suites and not vm and not images";
#    b. beside them, once the images are built, at nice 10, one at a time,
#       the tests with an image or guests that check what ran and where, not
#       how fast, under time limits of a minute or more (the containers, the
#       guests' boot and teardown, the tiny study, the interrupted guest round):
#       -m "shares_cores and not slurm and not no_measurement", output in
#       logs/software/test-shared.log;
#       the tests of a and b go on beside each other, the builds and the slow
#       tests that measure nothing: none of them depends on how fast it runs;
#    c. once all of that is done, with the machine to themselves, the real
#       runs on this host under short time limits (NetPIPE's, the killed
#       runs') and the namespaces' data paths:
#       -m "(vm or images or (e2e and not slurm)) and not no_measurement and not shares_cores".
#       (A busy-polling MPI rank loses its partner for a time slice to any
#       runnable process, however low its priority: beside the background
#       work a NetPIPE sweep that fits its 10 s limit on an idle machine
#       overran it, and a MILC run took 80 s instead of 6.)
#
# The six marker expressions split the suite: every collected test runs in
# exactly one of them (tests/conftest.py marks the modules that read the
# offline image "images" and those of SHARED_MODULES "shares_cores", refuses
# no_measurement on a test that is not e2e or needs Slurm, a guest or an
# image, and a collection in which a test would run in none or in two).
# Exit status: non-zero if any part failed or an image could not be built
# (the end of its log is printed).
set -uo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/../.."
py=${HPCVIRT_TEST_PYTHON:-.venv/bin/python}
bin=$(dirname "$py")
unit='not e2e and not slurm and not vm and not images'
quiet='no_measurement'
cluster='slurm and not suites and not vm and not images'
studies='slurm and suites and not vm and not images'
shared='shares_cores and not slurm and not no_measurement'
alone='(vm or images or (e2e and not slurm)) and not no_measurement and not shares_cores'
images_log=logs/software/test-images.log
quiet_log=logs/software/test-no-measurement.log
shared_log=logs/software/test-shared.log
mkdir -p logs/software

if [[ ${1:-} == --images ]]; then
    start=$(date +%s)
    # Apptainer (the site's, or built once per machine from its pinned source), which only phase 2 runs
    # (two steps lower still than the suites, which the first tests that measure wait for)
    { PYTHONPATH=workflow/lib nice -n 2 "$py" -m hpcvirt.apptainer install > logs/software/test-apptainer.log 2>&1 &&
        echo "test.sh: Apptainer ready after $(($(date +%s) - start)) s"; } &
    apptainer=$!
    PYTHONPATH=workflow/lib "$py" -m hpcvirt.build --jobs 2 || { kill "$apptainer" 2>/dev/null; exit 1; }
    echo "test.sh: the pinned suites ready after $(($(date +%s) - start)) s"
    [[ -n ${HPCVIRT_TEST_SUITES_READY:-} ]] && touch "$HPCVIRT_TEST_SUITES_READY"
    # then both images at once (each reads the suites; they share nothing else), each with its own log;
    # --nolock: the tests of phase 1 may run Snakemake in this directory at the same time
    { "$bin/snakemake" --workflow-profile workflow/profiles/default --nolock .hpcvirt/images/offline.sqfs \
        > logs/software/test-offline-image.log 2>&1 &&
        echo "test.sh: the offline image ready after $(($(date +%s) - start)) s"; } &
    offline=$!
    { PYTHONPATH=workflow/lib "$py" -c 'from hpcvirt.qemu import ensure_guest_image; print(ensure_guest_image())' \
        > logs/software/test-guest-image.log 2>&1 &&
        echo "test.sh: the guest image ready after $(($(date +%s) - start)) s"; } &
    guest=$!
    rc=0
    for job in "offline-image:$offline" "guest-image:$guest" "apptainer:$apptainer"; do
        if ! wait "${job#*:}"; then
            rc=1
            tail -n 40 "logs/software/test-${job%%:*}.log"
            echo "test.sh: ${job%%:*} failed; its log: logs/software/test-${job%%:*}.log"
        fi
    done
    [[ $rc -eq 0 && -n ${HPCVIRT_TEST_IMAGES_READY:-} ]] && touch "$HPCVIRT_TEST_IMAGES_READY"
    exit $rc
fi

t0=$(date +%s)
echo "make test: phase 1 of 2: Apptainer, the pinned suites and the images build in the background (log: $images_log);"
echo "  the tests that measure nothing and need no image run meanwhile (-m \"$unit\"), then the slow ones"
echo "  (-m $quiet; log: $quiet_log) at a low priority, once the suites are there"
# Sessions of their own, so that an interrupted `make test` stops them whole, and low CPU priorities,
# so that they take only the cores the tests at normal priority leave: some of those run MPI ranks with
# a time limit, which must not wait for a compiler.  The builds (nice 17; Apptainer's, needed last, at
# 19; best-effort I/O at its lowest level), the slow tests that measure nothing (nice 10), and in phase 2
# the tests that share the cores (nice 10).
tmp=$(mktemp -d /tmp/hpcvirt-test.XXXXXX)
ready=$tmp/suites.ready
images_ready=$tmp/images.ready
HPCVIRT_TEST_SUITES_READY=$ready HPCVIRT_TEST_IMAGES_READY=$images_ready \
    setsid -w nice -n 17 ionice -c 2 -n 7 "$self" --images > "$images_log" 2>&1 &
builder=$!
"$py" -m pytest -ra --durations=25 -p no:cacheprovider --basetemp="$tmp/unit" -m "$unit" &
unit_pid=$!
# once $1 exists (or not at all, if the builder ends without it): the tests of marker expression $2 at
# nice 10, in a session of their own, with their own temporary directory $3, output in $4
after() {
    while [[ ! -e $1 ]] && kill -0 "$builder" 2>/dev/null; do sleep 2; done
    [[ -e $1 ]] || exit 0
    exec setsid -w nice -n 10 "$py" -m pytest -ra --durations=15 -p no:cacheprovider --basetemp="$tmp/$3" \
        -m "$2" > "$4" 2>&1
}
after "$ready" "$quiet" quiet "$quiet_log" &
quiet_pid=$!
after "$images_ready" "$shared" shared "$shared_log" &
shared_pid=$!
trap 'kill -- -"$builder" -"$quiet_pid" -"$shared_pid" 2>/dev/null; kill "$unit_pid" "$quiet_pid" "$shared_pid" 2>/dev/null; exit 130' INT TERM
wait "$unit_pid"
unit_rc=$?
echo "make test: phase 1 took $(($(date +%s) - t0)) s"

echo "make test: phase 2 of 2, a: the tests of the Slurm clusters that need no suite, one at a time" \
     "(beside them, the builds, the tests that measure nothing, and once the images are built, the tests that" \
     "share the cores: -m \"$shared\", log $shared_log)"
"$py" -m pytest -ra --durations=10 -p no:cacheprovider -m "$cluster"
cluster_rc=$?

# the suites (or the builder's end, if it failed before them)
while [[ ! -e $ready ]] && kill -0 "$builder" 2>/dev/null; do sleep 2; done
if [[ ! -e $ready ]]; then
    wait "$builder"
    tail -n 40 "$images_log" >&2
    echo "error: make test: the pinned suites could not be built; the log above is $images_log" >&2
    kill -- -"$quiet_pid" -"$shared_pid" 2>/dev/null
    rm -rf "$tmp"
    exit 1
fi
grep "^test.sh: the pinned suites" "$images_log"
echo "make test: phase 2, a ($(($(date +%s) - t0)) s in): the study through the Slurm cluster that runs the suites"
"$py" -m pytest -ra --durations=10 -p no:cacheprovider -m "$studies"
studies_rc=$?

echo "make test: phase 2, b ($(($(date +%s) - t0)) s in): waiting for the images (log: $images_log), the tests" \
     "that measure nothing and those that share the cores"
wait "$builder"
build_rc=$?
wait "$quiet_pid"
quiet_rc=$?
wait "$shared_pid"
shared_rc=$?
trap - INT TERM
echo "make test: the slow tests that measure nothing (-m $quiet), from $quiet_log:"
cat "$quiet_log"
if [[ $build_rc -ne 0 ]]; then
    tail -n 40 "$images_log" >&2
    echo "error: make test: the images could not be built (exit $build_rc); the log above is $images_log" >&2
    shared_rc=1
    alone_rc=1
else
    grep "^test.sh: " "$images_log"
    echo "make test: the tests that share the cores (-m \"$shared\"), from $shared_log:"
    cat "$shared_log"
    # The rest with nothing else running: a busy-polling MPI rank loses its partner for a time slice to any
    # runnable process, however low its priority (beside the background work, a NetPIPE sweep that fits its
    # 10 s limit on an idle machine overran it, and a MILC run took 80 s instead of 6)
    echo "make test: phase 2, c ($(($(date +%s) - t0)) s in): with the machine to themselves, one at a time, the" \
         "real runs on this host under short time limits and the namespaces' data paths"
    "$py" -m pytest -ra --durations=25 -p no:cacheprovider -m "$alone"
    alone_rc=$?
fi

rm -rf "$tmp"

echo "make test: $(($(date +%s) - t0)) s; exit status of the unit tests $unit_rc, of those that measure nothing $quiet_rc," \
     "of the clusters' own and the tiny study on two nodes $cluster_rc, of the README's Slurm study $studies_rc," \
     "of those that share the cores $shared_rc, of the rest $alone_rc"
if [[ $unit_rc -ne 0 || $quiet_rc -ne 0 || $cluster_rc -ne 0 || $studies_rc -ne 0 || $shared_rc -ne 0 ||
      $alone_rc -ne 0 ]]; then
    echo "error: make test: a part failed (above)" >&2
    exit 1
fi
echo "make test: every part passed"
