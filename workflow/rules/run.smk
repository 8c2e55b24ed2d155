# Measurements: one job per configuration and repetition; on qemu testbeds
# one job per interleaved round (the guests boot once per round).


rule measure:
    input:
        preflight=measurement_preflight,
    output:
        raw=protected(
            "data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.out"
        ),
        prov="data/raw/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.json",
    log:
        "logs/measure/{campaign}/{testbed}/{benchmark}/{params}/rep-{rep}.log",
    wildcard_constraints:
        testbed=MEASURE_TESTBED_RE,
    priority: measurement_priority
    group:
        measurement_group
    # A measurement owns the whole machine: never two at once, whatever --cores says.
    threads: workflow.cores
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
    script:
        "../scripts/measure.py"


for _round_tb, _i, _reps, _configs in ROUND_GROUPS:

    rule:
        name:
            f"measure_round_{_round_tb.replace('-', '_')}_{_i}"
        output:
            raw=[protected(p) for p in round_outputs(_configs, "out")],
            prov=round_outputs(_configs, "json"),
        log:
            f"logs/measure_round/{{campaign}}/{_round_tb}/rep-{{rep}}.log",
        wildcard_constraints:
            rep="|".join(str(r) for r in _reps),
        priority: round_priority_for(_configs)
        threads: workflow.cores
        resources:
            benchmark=1,
        params:
            testbed=_round_tb,
        message:
            f"measure round {{wildcards.rep}} on {_round_tb} (guests boot once per round)"
        script:
            "../scripts/measure_round.py"
