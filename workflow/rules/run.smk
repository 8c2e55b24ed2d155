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
    # rounds that have none of their outputs yet: one rule, the round as a wildcard
    _fresh = [r for r in _reps if r not in ROUND_STARTED[(_round_tb, _i)]]

    rule:
        name:
            f"measure_round_{_round_tb.replace('-', '_')}_{_i}"
        output:
            raw=[protected(p) for p in round_outputs(_configs, "out")],
            prov=round_outputs(_configs, "json"),
        log:
            f"logs/measure_round/{{campaign}}/{_round_tb}/rep-{{rep}}.log",
        wildcard_constraints:
            rep="|".join(str(r) for r in _fresh) or "(?!)",
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

    # rounds of this campaign that have some of their outputs (the archive, when the study
    # gains a configuration): a rule whose outputs are only the missing ones, so that the
    # workflow manager never removes a finished measurement before rerunning the round
    for _rep, _missing in ROUND_STARTED[(_round_tb, _i)].items():
        if not _missing:
            continue  # the whole round is there

        rule:
            name:
                f"measure_round_{_round_tb.replace('-', '_')}_{_i}_rep{_rep}"
            output:
                raw=[protected(matrix.raw_path(CAMPAIGN, c, _rep)) for c in _missing],
                prov=[matrix.raw_path(CAMPAIGN, c, _rep, "json") for c in _missing],
            log:
                f"logs/measure_round/{CAMPAIGN}/{_round_tb}/rep-{_rep}.log",
            priority: max(PRIORITIES.get((c.testbed, c.benchmark, c.params, _rep), 0) for c in _missing)
            threads: workflow.cores
            resources:
                benchmark=1,
            # the same params as the group's rule (the round and campaign are read from the outputs'
            # paths): other params would make the workflow manager rerun the round when, in a later
            # run, the group's rule matches these outputs
            params:
                testbed=_round_tb,
            message:
                f"measure round {_rep} on {_round_tb}: the {len(_missing)} missing measurements (guests boot once per round)"
            script:
                "../scripts/measure_round.py"
