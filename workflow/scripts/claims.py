"""Snakemake adapter: the studies' claims checked on the campaign
(hpcvirt.claims), one section per study (hpcvirt.studies), and the campaign
against the archive (hpcvirt.compare)."""

import sys
from pathlib import Path

import pandas as pd

from hpcvirt import audit, claims, claims_tex, compare, studies
from hpcvirt.atomic import write_text
from hpcvirt.reference import load_reference

snakemake = globals()["snakemake"]

with open(snakemake.log[0], "w") as log:
    entries = claims.load(snakemake.input.claims, snakemake.input.claims_md)
    tidy, verdicts = claims.evaluate_campaign(entries, snakemake.input.tidy, snakemake.input.hosts,
                                              snakemake.params.campaign)
    # the same engine on every other campaign of the study (rule verdicts): how stable is each verdict?
    others = {Path(p).parent.name: pd.read_csv(p, keep_default_na=False, na_values=[""])
              for p in snakemake.input.campaigns}
    verdicts = verdicts.merge(claims.stability(verdicts, others), on="claim", how="left")
    print(f"stability over {len(others)} other campaigns: {sorted(others)}", file=log)
    campaign, archive = snakemake.params.campaign, snakemake.params.archive
    problems = claims_tex.check_sentences([*snakemake.input.sections, *snakemake.input.parts], verdicts,
                                      archived=campaign == archive)
    if problems:
        # The text is written for the archived campaign: there a changed verdict
        # stops the build.  Another campaign (a user's `make`) gets its paper,
        # the changed verdicts marked in the text and listed against the archive.
        strict = campaign == archive
        msg = (f"hpcvirt.claims: the paper's text no longer matches the data"
               f"{'' if strict else f' of campaign {campaign} (written for the archive {archive})'}:\n  "
               + "\n  ".join(problems))
        print(msg, file=log)
        print(msg, file=sys.stderr)
        if strict:
            sys.exit(1)
    # the tables and the text mark a verdict that rests on a weaker or different quantity than its claim's
    shown = claims_tex.with_audit(verdicts, audit.load(Path(snakemake.input.audit[0]).parent))
    ref = load_reference(Path(snakemake.input.claims).parent)
    testbeds = pd.read_csv(snakemake.input.testbeds, dtype=str, keep_default_na=False)
    figs = pd.read_csv(snakemake.input.figures, dtype=str, keep_default_na=False)
    rmap = studies.load_map(snakemake.input.reproduction, testbeds)
    per_study = studies.all_tex(ref, testbeds, figs, shown, rmap, set(snakemake.params.figures), tidy)
    if campaign != archive and snakemake.input.archive:
        # the archive is one of the study's other campaigns, already evaluated for the stability
        if archive in others:
            archived = pd.concat([pd.read_csv(p) for p in snakemake.input.archive], ignore_index=True)
            archived_verdicts = others[archive]
        else:
            archived, archived_verdicts = claims.evaluate_campaign(entries, snakemake.input.archive,
                                                                   snakemake.input.archive_hosts, archive)
        metrics = compare.compare(tidy, archived, int(snakemake.params.latency_bytes))
        hosts = (compare.host_line(snakemake.input.archive_hosts), compare.host_line(snakemake.input.hosts))
        vs_archive = compare.tex(metrics, verdicts, archived_verdicts, campaign, archive, problems, hosts,
                                 quick=bool(snakemake.params.quick_look))
    else:
        vs_archive = compare.tex(pd.DataFrame(), verdicts, verdicts, campaign, campaign)
    write_text(snakemake.output.verdicts, verdicts.to_csv(index=False))
    write_text(snakemake.output.page, claims_tex.verdicts_html(shown, snakemake.params.campaign))
    write_text(snakemake.output.vs_archive, vs_archive)
    write_text(snakemake.output.macros, claims_tex.tex_macros(shown)
               + claims_tex.campaign_hosts_tex(snakemake.input.campaign_hosts) + claims_tex.rule_macros(entries))
    write_text(snakemake.output.table, claims_tex.counts_tex(verdicts))
    write_text(snakemake.output.per_study, per_study)
    print(claims.counts(verdicts).to_string(), file=log)
