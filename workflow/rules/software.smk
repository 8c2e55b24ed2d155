# Software stacks: container images, the placement benchmark and the
# per-testbed preflight check.
#
# The offline image is a workflow product, not a committed file: a fresh
# machine builds it by running the rule (bit-reproducible for a fixed mirror
# state, see containers/README.md); afterwards it is reused until
# containers/offline/build.sh changes.  (No between-workflow `cache:`:
# Snakemake refuses it together with the benchmark record of the build
# time.)  Both rules claim the whole machine
# (like a measurement) and run before any measurement (priority), so they
# neither disturb nor reorder the interleaved benchmarks.


rule build_offline_image:
    input:
        script="containers/offline/build.sh",
    output:
        image=".hpcvirt/images/offline.sqfs",
        sha256=".hpcvirt/images/offline.sqfs.sha256",
        manifest=".hpcvirt/images/offline.sqfs.manifest",
    log:
        "logs/software/build-offline-image.log",
    benchmark:
        "logs/software/build-offline-image.benchmark.tsv"
    priority: 1000000
    threads: workflow.cores
    resources:
        benchmark=1,
    message:
        "build the offline image {output.image} (mmdebstrap + mksquashfs, about 2 minutes)"
    shell:
        "workflow/scripts/build-image.sh {output.image} > {log} 2>&1"


rule preflight:
    input:
        # the image of the testbed's runtime (built first when a rule makes it)
        image=lambda w: TESTBEDS[w.testbed]["runtime"]["image"],
    output:
        record="data/raw/{campaign}/{testbed}/preflight.json",
    log:
        "logs/preflight/{campaign}/{testbed}.log",
    priority: 1000000
    threads: workflow.cores
    resources:
        benchmark=1,
    params:
        timeout=120,
    message:
        "preflight {wildcards.testbed}: host vs image MPI/PMIx/UCX, 2-rank wire-up through the container"
    script:
        "../scripts/preflight.py"


rule build_advect:
    input:
        src="workflow/src/advect.c",
        script="workflow/scripts/build-advect.sh",
    output:
        binary=".hpcvirt/bin/advect-{mpi}",
    log:
        "logs/software/build-advect-{mpi}.log",
    wildcard_constraints:
        mpi="openmpi|mpich",
    priority: 1000000
    # compiled where the workflow runs (a cluster's login node), never as a batch job
    localrule: True
    message:
        "compile the placement benchmark for {wildcards.mpi} ({output.binary})"
    shell:
        "{input.script} {wildcards.mpi} {output.binary} > {log} 2>&1"
