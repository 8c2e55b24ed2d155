# Software stacks: container images and the per-testbed preflight check.
# (The placement benchmark is compiled by the measurement that first needs
# it, see hpcvirt.measure.ensure_binary: as a rule output it would make the
# archived measurements look outdated in every fresh clone.)
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
        # the suites in the image: Spack installs them from this lock (hpcvirt.image)
        lock="spack-envs/laptop/spack.lock",
    output:
        image=".hpcvirt/images/offline.sqfs",
        sha256=".hpcvirt/images/offline.sqfs.sha256",
        manifest=".hpcvirt/images/offline.sqfs.manifest",
        suites=".hpcvirt/images/offline.sqfs.suites.json",
    log:
        "logs/software/build-offline-image.log",
    benchmark:
        "logs/software/build-offline-image.benchmark.tsv"
    priority: 1000000
    threads: workflow.cores
    resources:
        benchmark=1,
    message:
        "build the offline image {output.image} (mmdebstrap, the suites by Spack from {input.lock}, mksquashfs; about 3 minutes once the host has the suites)"
    shell:
        "workflow/scripts/build-image.sh {output.image} > {log} 2>&1"


rule build_offline_sif:
    input:
        script="containers/offline/build-sif.sh",
        # the same root filesystem as the offline SquashFS image
        image=".hpcvirt/images/offline.sqfs",
        suites=".hpcvirt/images/offline.sqfs.suites.json",
    output:
        image=".hpcvirt/images/offline.sif",
        sha256=".hpcvirt/images/offline.sif.sha256",
        suites=".hpcvirt/images/offline.sif.suites.json",
    log:
        "logs/software/build-offline-sif.log",
    benchmark:
        "logs/software/build-offline-sif.benchmark.tsv"
    priority: 1000000
    threads: workflow.cores
    resources:
        benchmark=1,
    message:
        "build the offline image as a SIF {output.image} (apptainer build from the offline root filesystem, under a minute)"
    shell:
        "containers/offline/build-sif.sh {input.image} {output.image} > {log} 2>&1"


rule preflight:
    input:
        # the image of the testbed's runtime (built first when a rule makes it); ancient: a campaign's
        # record of what it ran with is never made again when the image is rebuilt (each run's provenance
        # names the image digest it ran)
        image=lambda w: ancient(TESTBEDS[w.testbed]["runtime"]["image"]),
    output:
        record="data/raw/{campaign}/{testbed}/preflight.json",
    log:
        "logs/preflight/{campaign}/{testbed}.log",
    priority: 1000000
    threads: workflow.cores
    # on a Slurm testbed: where its measurements run (its 2-rank wire-up needs their allocation)
    resources:
        benchmark=1,
        runtime=measurement_slurm("runtime"),
        slurm_partition=measurement_slurm("slurm_partition"),
        slurm_account=measurement_slurm("slurm_account"),
        constraint=measurement_slurm("constraint"),
        qos=measurement_slurm("qos"),
        nodes=measurement_slurm("nodes"),
        tasks=measurement_slurm("tasks"),
        tasks_per_node=measurement_slurm("tasks_per_node"),
        cpus_per_task=measurement_slurm("cpus_per_task"),
        slurm_extra=measurement_slurm("slurm_extra"),
        mpi=measurement_slurm("mpi"),
    params:
        timeout=120,
    message:
        "preflight {wildcards.testbed}: host vs image MPI/PMIx/UCX, 2-rank wire-up through the container"
    script:
        "../scripts/preflight.py"
