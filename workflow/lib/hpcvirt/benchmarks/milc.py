"""MILC lattice QCD (Ramakrishnan et al., Fig. 1b): dynamical HISQ quarks
by MILC's ``ks_imp_rhmc/su3_rhmd_hisq`` (MILC 7.8.1 at the pinned commit
1e11e121), run per rank by ``workflow/scripts/milc-run``.

The program: the classic MILC benchmark is ``ks_imp_dyn/su3_rmd`` (R
algorithm, asqtad quarks), which does not link at the pinned commit.
``su3_rhmd_hisq`` is the nearest program that builds: the same molecular
dynamics without an accept/reject step (RHMD, the rational version of the R
algorithm), with today's HISQ quark action; its cost is, as in su3_rmd, the
conjugate-gradient (CG) solves, the quark force and the link smearing (with
the heavy masses below the CG solves take about a tenth of the run, the
HISQ force and smearing most of the rest).

The input (``workflow/inputs/milc/su3_rhmd_hisq.in``): 2+1+1 flavours with
the masses 0.01, 0.05, 0.5 and the rational functions of MILC's own test
``su3_rhmc_hisq.f211`` (installed with the binary), beta 6.7, 12 Omelyan
steps of 0.04 per trajectory, a fixed seed, a unit ("fresh") start, and the
measurements (plaquette, chiral condensate, fermion action) after every
trajectory.  MILC's shipped sample inputs cannot be used: each reloads a
lattice from ``binary_samples/``, which the pinned archive does not hold,
and the light mass 0.0018 of the HISQ samples costs thousands of CG
iterations per solve.  8^4 for one trajectory (2,505 CG iterations),
the default, took about 20 s on 1 rank and 13 s on 2 ranks of a 2-core
AMD EPYC guest (Open MPI and MPICH alike, shared memory; up to twice that
while other jobs shared the cores); 6x6x8x8, the study's, about 10 s on 1
rank; 6^4 about a quarter of 8^4.

Correctness ("consistent results"): with a fixed seed MILC is deterministic
for a given input.  Its random numbers are drawn per lattice site and its
global sums are taken in double precision, and the layout did not change the
results: Open MPI and MPICH on 1 and 2 ranks, and Open MPI on 4 ranks for
6^4, printed bit-identical plaquettes, actions, CG residuals and iteration
counts, Wilson loops and condensates (6^4 and 8^4, two trajectories each).  A run is accepted when, after every trajectory, the
plaquettes (``PLAQ``), the energy violation (``CHECK: delta S``), the real
parts of the chiral condensates (``PBP``) and the fermion actions
(``FACTION``) of the three masses agree with the references recorded here
(:data:`REFERENCE`, from the project's Open MPI build on 1 rank) within the
absolute tolerances MILC's own test suite sets for this program in single
precision (:data:`TOLERANCE`, from ``ks_imp_rhmc/test/su3_rhmd_hisq.1.errtol``).
They leave room for other compilers, flags and rank counts, and reject a
result that is wrong in the fifth digit of the plaquette.

The output (rank 0)::

    hpcvirt-milc 1
    lattice 8x8x8x8
    trajectories 1
    steps 12          (printed since the steps became a parameter; MILC's echo is what counts)
    ranks 2
    input .../workflow/inputs/milc/su3_rhmd_hisq.in
    ... MILC's output: "Machine = MPI (portable), with 2 nodes", the echoed
    input, one "CONGRAD5: time = <s> (...) masses = <n> iters = <n> ..." and
    one " OK converged ..." line per CG solve, after every trajectory
    "CHECK: delta S = ...", "PLAQ: ...", "PBP: ...", "FACTION: ...", and at the
    end "RUNNING COMPLETED", "Time = <s> seconds", "total_iters = <n>",
    "exit: <date>" ...
    wall_s 24.567
    exit 0
    end

Emitted metrics (benchmark ``milc``, variant ``<lattice> x<trajectories>``, followed by
`` (<n> steps)`` when a trajectory has other than 12 steps):

``wall_time`` (s)               wall clock of rank 0's MILC process (MPI start-up included)
``time_per_trajectory`` (s)     MILC's own run time ("Time = "; set-up included) / trajectories
``time_per_cg_iteration`` (us)  time in CG solves / CG iterations (the CONGRAD5 lines; a
                                multi-mass iteration counts once)
``cg_iterations`` (count)       CG iterations of the run ("total_iters")

ParseError for: launcher/MPI error text or MILC's ``termination``/wrapper
errors; no ``hpcvirt-milc 1`` header; a run that did not reach MILC's
normal end (``RUNNING COMPLETED``, ``exit:`` and the wrapper's ``end``);
another rank count, lattice or number of trajectories than launched; a CG
that did not converge (``NOT converged``) or CG lines that do not add up to
``total_iters``; an input other than the reference input; and results that
fail the correctness check.
"""

from __future__ import annotations

import re

from ..tidy import Measurement, ParseError
from .base import VALUE_KEY, Application, Job
from .common import Patterns, WrapperOutput, check_no_mpi_error, error_re, ranks_text, read_text, results
from .parts import Choices, Counterpart, Int, PinnedSource

VERSION = "1e11e121b220433c220310b79de03cb3ee6adba0"
WRAPPER = "workflow/scripts/milc-run"
OUTPUT = WrapperOutput("milc", WRAPPER, "lattice", "trajectories", "ranks")

ERRORS = error_re(r"^milc-run: ", r"^termination: ",
                  r"LAYOUT: Can't lay out", r"LATTICE SIZE DOESN'T FIT", r"^Can't open stdin file",
                  r"get_[a-z]+\(\d+\): Expecting")
#: The reference input's settings, as MILC echoes them (any other input has no reference values).
INPUT = {"iseed": "4563421", "beta": "6.7", "dyn_mass": "0.01 0.05 0.5", "dyn_flavors": "2 1 1",
         "microcanonical_time_step": "0.04", "n_pseudo": "5", "u0": "0.89"}
#: The input's keys MILC echoes that the parser reads: the lattice, the trajectories and their steps, and the
#: reference input's settings.
ECHOED = ("nx", "ny", "nz", "nt", "trajecs", "steps_per_trajectory", *INPUT)
LINES = Patterns(
    machine=r"^Machine = .*?, with (\d+) nodes?\s*$",
    echo=rf"^({'|'.join(ECHOED)}) (.+?)\s*$",
    cg=r"^CONGRAD5: time = (\S+) \(.*?\) masses = \d+ iters = (\d+)",
    not_converged=r"^.*\bNOT (?:converged|CONVERGED)\b.*$",
    time=r"^Time = (\S+) seconds\s*$",
    total_iters=r"^total_iters = (\d+)\s*$",
    delta_s=r"^CHECK: delta S = (\S+)\s*$",
    plaq=r"^PLAQ:\s+(\S+)\s+(\S+)\s*$",
    pbp=r"^PBP: mass (\S+)\s+(\S+)\s+(\S+)\s+\S+\s+\S+ \(",
    faction=r"^FACTION: mass = (\S+),\s+(\S+) \(",
)

#: MILC's molecular-dynamics steps per trajectory in the reference input (its own tests' number)
STEPS = 12

#: The masses of the reference input's quark flavours (its ``dyn_mass``), in order.
MASSES = tuple(float(m) for m in INPUT["dyn_mass"].split())


def _trajectory(plaq: tuple[float, float], delta_s: float, *per_mass: tuple[float, float, float]) -> dict:
    """One trajectory's reference observables: the plaquettes, delta S, and
    per mass of :data:`MASSES` (in order) the chiral condensate's even and
    odd parts and the fermion action."""
    return {"plaq": plaq, "delta_s": delta_s, "pbp": {m: (even, odd) for m, (even, odd, _) in zip(MASSES, per_mass)},
            "faction": {m: faction for m, (_, _, faction) in zip(MASSES, per_mass)}}


#: Reference observables per (lattice, steps per trajectory), one entry per
#: trajectory: plaquettes (space-space, space-time), delta S, and per mass
#: (chiral condensate even, odd; fermion action).  Recorded from the Open MPI
#: build on 1 rank; Open MPI and MPICH on 2 ranks printed the same.  The
#: short trajectories (2 steps) on 4x4x4x6 are the input guests under TCG
#: emulation can run (about 90 s per 12-step trajectory on 1 rank there).
REFERENCE: dict[tuple[str, int], list[dict]] = {
    ("4x4x4x6", 2): [
        _trajectory((2.9047, 2.907011), -0.02207336,
                    (0.03278122, -0.01097686, 1.571481), (0.07864787, 0.0179219, 1.460527), (0.4105103, 0.3652354, 1.521196)),
        _trajectory((2.821669, 2.823572), -0.01767676,
                    (-0.006968257, 0.02811179, 1.507953), (0.1368225, -0.03223355, 1.446668), (0.3840492, 0.3493978, 1.558969)),
    ],
    ("4x4x4x6", 12): [
        _trajectory((2.208846, 2.21627), -0.1380042,
                    (0.009220217, 0.01386749, 1.570997), (0.1003476, 0.001600491, 1.462428), (0.4259793, 0.3704675, 1.526315)),
        _trajectory((1.997724, 2.007786), 0.000700925,
                    (-0.0004292631, 0.02407245, 1.508059), (0.1049774, 0.006247969, 1.443152), (0.4032586, 0.355749, 1.565398)),
    ],
    ("6x6x6x6", 12): [
        _trajectory((2.195074, 2.209431), -0.4535067,
                    (0.01044035, 0.005991311, 1.54274), (0.03037338, 0.0496985, 1.459248), (0.3155639, 0.3442486, 1.474434)),
        _trajectory((1.995368, 2.000376), 0.00741138,
                    (0.01986326, -0.002490558, 1.545888), (0.03411128, 0.04938227, 1.476079), (0.3279068, 0.3358591, 1.500423)),
    ],
    ("6x6x8x8", 12): [
        _trajectory((2.188476, 2.20008), -0.7924924,
                    (-0.00852496, 0.02494978, 1.493128), (0.01864581, 0.06441528, 1.521542), (0.3183694, 0.3508904, 1.510689)),
        _trajectory((1.98022, 1.991357), 0.03463231,
                    (-0.01325568, 0.03059122, 1.479727), (0.04453603, 0.04124409, 1.501534), (0.3279736, 0.3445202, 1.504503)),
    ],
    ("8x8x8x8", 12): [
        _trajectory((2.195905, 2.196679), -1.419447,
                    (-0.002133206, 0.01796669, 1.498284), (0.0661745, 0.01482888, 1.532111), (0.3325279, 0.333371, 1.514632)),
        _trajectory((1.99353, 1.989523), 0.02023227,
                    (-0.01296431, 0.02973523, 1.520291), (0.03693229, 0.04503947, 1.470534), (0.3354945, 0.3312288, 1.498952)),
    ],
}

#: Absolute tolerances: those of MILC's own test of this program in single
#: precision (``ks_imp_rhmc/test/su3_rhmd_hisq.1.errtol``: PLAQ 2e-05 1e-05,
#: delta S 0.04, PBP 2e-06, FACTION 2e-06 3e-06; the larger FACTION value).
TOLERANCE = {"plaq": (2e-5, 1e-5), "delta_s": 0.04, "pbp": 2e-6, "faction": 3e-6}

LATTICES = ("4x4x4x6", "6x6x6x6", "6x6x8x8", "8x8x8x8")
MAX_TRAJECTORIES = 2
PRIMES = (53, 47, 43, 41, 37, 31, 29, 23, 19, 17, 13, 11, 7, 5, 3, 2)


def variant(lattice: str, trajectories: int, steps: int) -> str:
    return f"{lattice} x{trajectories}" + ("" if steps == STEPS else f" ({steps} steps)")


def dims(lattice: str) -> tuple[int, ...]:
    return tuple(int(n) for n in lattice.split("x"))


def layout(lattice: str, ranks: int) -> tuple[int, ...] | None:
    """The sub-lattice per rank that MILC's hyper_prime layout
    (``generic/layout_hyper_prime.c``) gives, or None when it cannot lay the
    lattice out on ``ranks`` ranks (MILC then stops) or gives a rank fewer
    than 3 sites in a direction, less than the HISQ (Naik) three-link hop
    (MILC then crashes: 6^4 on 3 ranks, 2 x 6 x 6 x 6 sites each, ended in
    a segmentation fault; 3 x 3 x 6 x 6 on 4 ranks ran)."""
    size, grid, i = list(dims(lattice)), [1, 1, 1, 1], 1
    while i < ranks:
        p = next((p for p in PRIMES if (ranks // i) % p == 0), None)
        if p is None:
            return None                          # a prime factor above 53
        j = max((s for s in size if s % p == 0), default=0)
        d = next((d for d in range(4) if size[d] == j and grid[d] > 1), None)
        if d is None:
            d = next((d for d in range(4) if size[d] == j), None)
        if d is None or j == 0:
            return None
        i, size[d], grid[d] = i * p, size[d] // p, grid[d] * p
    return tuple(size) if min(size) >= 3 else None


def _observables(text: str) -> list[dict]:
    """Per trajectory: plaq, delta_s, pbp {mass: (even, odd)}, faction {mass: value}."""
    plaqs, deltas = LINES.plaq.findall(text), LINES.delta_s.findall(text)
    pbps, factions = LINES.pbp.findall(text), LINES.faction.findall(text)
    n = len(plaqs)
    masses = len(pbps) // n if n else 0
    if n == 0 or len(deltas) != n or masses == 0 or len(pbps) != n * masses or len(factions) != n * masses:
        return []
    out = []
    for k in range(n):
        p = pbps[k * masses:(k + 1) * masses]
        f = factions[k * masses:(k + 1) * masses]
        out.append({"plaq": tuple(float(x) for x in plaqs[k]), "delta_s": float(deltas[k]),
                    "pbp": {float(m): (float(e), float(o)) for m, e, o in p},
                    "faction": {float(m): float(v) for m, v in f}})
    return out


def mismatches(got: dict, ref: dict) -> list[str]:
    """The observables of one trajectory that differ from their references by more than :data:`TOLERANCE`."""
    if set(got["pbp"]) != set(ref["pbp"]) or set(got["faction"]) != set(ref["faction"]):
        return [f"masses {sorted(got['pbp'])}, reference {sorted(ref['pbp'])}"]
    pairs = [(f"PLAQ[{i}]", a, b, t) for i, (a, b, t) in enumerate(zip(got["plaq"], ref["plaq"], TOLERANCE["plaq"]))]
    pairs.append(("delta S", got["delta_s"], ref["delta_s"], TOLERANCE["delta_s"]))
    for m in sorted(ref["pbp"]):
        pairs += [(f"PBP mass {m:g} {eo}", a, b, TOLERANCE["pbp"])
                  for eo, a, b in zip(("even", "odd"), got["pbp"][m], ref["pbp"][m])]
        pairs.append((f"FACTION mass {m:g}", got["faction"][m], ref["faction"][m], TOLERANCE["faction"]))
    return [f"{name} = {a:.7g}, reference {b:.7g} (|difference| {abs(a - b):.2g} > {tol:g})"
            for name, a, b, tol in pairs if not abs(a - b) <= tol]


def check_results(path, lattice: str, steps: int, observed: list[dict]) -> None:
    refs = REFERENCE.get((lattice, steps))
    if refs is None:
        raise ParseError(path, f"no reference values for lattice {lattice} with {steps} steps per trajectory: the "
                               "results cannot be checked")
    if len(observed) > len(refs):
        raise ParseError(path, f"{len(observed)} trajectories, but references are recorded for {len(refs)}")
    for k, (got, ref) in enumerate(zip(observed, refs), 1):
        bad = mismatches(got, ref)
        if bad:
            raise ParseError(path, f"incorrect result after trajectory {k}: " + "; ".join(bad))


def parse(path, expected: dict | None = None) -> list[Measurement]:
    expected = expected or {}
    text = read_text(path)
    check_no_mpi_error(path, text, ERRORS)
    fields = OUTPUT.fields(path, text)
    ended = [s for s in ("RUNNING COMPLETED", "exit: ") if not re.search(f"^{s}", text, re.M)]
    if "end" not in fields or ended:
        raise ParseError(path, f"the run did not reach MILC's normal end (no {', '.join(map(repr, ended or ['end']))}; "
                               f"exit {fields.get('exit', 'not printed')}: cut, killed or failed)")
    bad = LINES.not_converged.search(text)
    if bad:
        lineno = text.count("\n", 0, bad.start()) + 1
        raise ParseError(path, f"a CG did not converge (line {lineno}: {bad.group(0).strip()!r})")
    try:
        lattice, trajecs, ranks = fields["lattice"], int(fields["trajectories"]), int(fields["ranks"])
        wall = float(fields["wall_s"])
        machine = int(LINES.machine.search(text).group(1))
        milc_time = float(LINES.time.search(text).group(1))
        total_iters = int(LINES.total_iters.search(text).group(1))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParseError(path, f"the header, MILC's machine line or its final summary is incomplete: {exc}") from None
    if not re.fullmatch(r"\d+x\d+x\d+x\d+", lattice):
        raise ParseError(path, f"the header's lattice {lattice!r} is not NXxNYxNZxNT")
    if machine != ranks:
        raise ParseError(path, f"MILC ran on {machine} ranks, but the wrapper counted {ranks}")
    want = expected.get("ranks")
    if want is not None and want != ranks:
        raise ParseError(path, f"the output is from {ranks} ranks, but {want} were launched")
    echo = {k: v for k, v in reversed(LINES.echo.findall(text))}     # the first echo of each key
    if tuple(int(echo.get(k, 0)) for k in ("nx", "ny", "nz", "nt")) != dims(lattice):
        raise ParseError(path, f"MILC's input has another lattice than {lattice}")
    if echo.get("trajecs") != str(trajecs):
        raise ParseError(path, f"MILC's input has trajecs {echo.get('trajecs')}, but the header {trajecs}")
    try:
        steps = int(echo["steps_per_trajectory"])
    except (KeyError, ValueError):
        raise ParseError(path, "MILC's input echo has no steps_per_trajectory") from None
    for key, value in (("lattice", lattice), ("trajectories", trajecs), ("steps", steps)):
        if expected.get(key) not in (None, value):
            raise ParseError(path, f"the output is of {key} {value}, but {expected[key]} was run")
    other = {k: echo.get(k) for k, v in INPUT.items() if echo.get(k) != v}
    if other:
        raise ParseError(path, f"not the reference input (the correctness check has no reference for it): {other}")
    cg = [(float(t), int(i)) for t, i in LINES.cg.findall(text)]
    cg_iters, cg_time = sum(i for _, i in cg), sum(t for t, _ in cg)
    if not cg or cg_iters != total_iters:
        raise ParseError(path, f"the CONGRAD5 lines add up to {cg_iters} CG iterations, but MILC counted "
                               f"total_iters = {total_iters} (output garbled or not a CGTIME build)")
    observed = _observables(text)
    if len(observed) != trajecs:
        raise ParseError(path, f"measurements of {len(observed)} trajectories (PLAQ, CHECK: delta S, PBP, FACTION), "
                               f"expected {trajecs}")
    check_results(path, lattice, steps, observed)
    extra = {"suite_version": f"MILC {VERSION[:8]} su3_rhmd_hisq", "milc_time_s": f"{milc_time:g}",
             "plaquette": " ".join(f"{p:g}" for p in observed[-1]["plaq"])}
    extra["steps_per_trajectory"] = str(steps)
    return results([("wall_time", "s", wall),
                    ("time_per_trajectory", "s", milc_time / trajecs, trajecs),
                    ("time_per_cg_iteration", "us", cg_time / cg_iters * 1e6, cg_iters),
                    ("cg_iterations", "count", total_iters)],
                   benchmark="milc", ranks=ranks, variant=variant(lattice, trajecs, steps), verified=True, extra=extra)


class MILC(Application):
    name = "milc"
    row_name = "milc"
    label = "MILC"
    experiment = "milc"
    title = ("MILC lattice QCD (su3_rhmd_hisq, 2+1+1 HISQ flavours): time per trajectory and per CG iteration, "
             "results checked against references (Ramakrishnan et al., Fig. 1b)")
    params = {
        **Application.run_params(ranks_doc="Process counts; one configuration each (MILC's layout must divide the "
                                 "lattice into at least 3 sites a direction per rank: 1, 2, 4 on 6^4; 1, 2, 4, 8, 16 on "
                                 "8^4)."),
        "lattices": Choices(LATTICES, "Lattices NXxNYxNZxNT, one configuration each; references are recorded for "
                                      "these (8^4: about 20 s per trajectory on 1 rank of a 2-core guest, 6^4: 5 s).",
                            ["8x8x8x8"],
                            sweep="lattice"),
        "trajectories": Int("Molecular-dynamics trajectories (references recorded for "
                            f"1..{MAX_TRAJECTORIES}).", 1, minimum=1, maximum=MAX_TRAJECTORIES),
        "steps": Int("Molecular-dynamics steps of 0.04 per trajectory: 12 as in MILC's tests (references recorded "
                     "for every lattice), or 2 on 4x4x4x6, the input guests under TCG emulation can run "
                     "(the raw-output name then ends in _s<steps>).", STEPS, minimum=1, maximum=STEPS),
    }
    raw_template = "{mpi}-{path}_l{lattice}_t{trajectories}_n{ranks}"

    def raw_params(self, s: dict) -> str:
        return super().raw_params(s) + ("" if s.get("steps", STEPS) == STEPS else f"_s{s['steps']}")
    # MILC publishes no release archive for this commit and no checksum of GitHub's archive of it: only the
    # mirror copy (``git archive`` of the commit without the folders binary_samples, Grid, QPhiX_JLab,
    # QPhiX_MILC and the file JHW_NEW_PG_ANI.tar.gz, none needed to build) is accepted.
    build = PinnedSource(
        "MILC", VERSION, suite="milc", spack_package="milc", binary_dir="bin/su3_rhmd_hisq",
        targets=("ks_imp_rhmc/su3_rhmd_hisq", "share/milc/rationals.sample.su3_rhmc_hisq_f211 (input data)"),
        urls=(f"https://github.com/milc-qcd/milc_qcd/archive/{VERSION}.tar.gz",),
        files=((f"milc_qcd-{VERSION[:8]}.tar.gz", "307c65568ed7c48088a2b031c2a3e714922a80d9535370c0977215f60058da4b",
                "mirror copy"),))
    metrics = {"wall_time": "s", "time_per_trajectory": "s", "time_per_cg_iteration": "us", "cg_iterations": "count"}
    counterparts = (Counterpart(r"MILC \texttt{su3\_rhmd\_hisq}", r"\citet{ramakrishnan2011} Fig.~1b",
                                r"not \texttt{su3\_rmd}; \hvMilcRanks{} ranks; interconnect classes as stand-ins"),)
    success = ("MILC reaches its normal end ('RUNNING COMPLETED', 'exit:', the wrapper's 'end') on the launched ranks, "
               "every CG converges, and after every trajectory the plaquettes, delta S, chiral condensates and "
               "fermion actions agree with the recorded references within the tolerances of MILC's own test "
               "(su3_rhmd_hisq.1.errtol); no launcher/MPI error text")

    def numbers(self, rows) -> dict[str, str]:
        """The rank counts it ran (``\\hvMilcRanks``)."""
        return {"hvMilcRanks": ranks_text(rows)}

    def check(self, exp: dict) -> str | None:
        sets = [{"lattice": lat, "steps": exp.get("steps", STEPS), **inp}
                 for lat in exp.get("lattices", []) for inp in self.input_sets(exp)]
        missing = sorted({(c["lattice"], c["steps"]) for c in sets} - set(REFERENCE))
        if missing:
            return (f"no reference values for (lattice, steps) {missing}, so their results could not be checked; "
                    f"recorded: {sorted(REFERENCE)}")
        bad = sorted({(c["lattice"], r) for c in sets for r in exp.get("ranks", []) if layout(c["lattice"], r) is None})
        if bad:
            return ("MILC cannot run these lattices on these rank counts (its hyper_prime layout divides the "
                    f"lattice by the prime factors of the rank count, into at least 3 sites a direction): {bad}")
        return None

    def job(self, s: dict, entry: dict) -> Job:
        steps = s.get("steps", STEPS)
        return self.app_job([entry.get("wrapper", WRAPPER), entry["binary"], s["lattice"], str(s["trajectories"])]
                            + ([] if steps == STEPS else [str(steps)]), s)

    testbed_keys = {
        "wrapper": {**VALUE_KEY, "default": WRAPPER,
                    "description": "The per-rank wrapper that makes the input and runs the binary (relative to the "
                                   "checkout, or absolute where the ranks see it elsewhere)."},
    }

    def expected(self, s: dict, rank_hosts: list[str]) -> dict:
        return {"ranks": s["ranks"], "lattice": s["lattice"], "trajectories": s["trajectories"],
                "steps": s.get("steps", STEPS)}

    def parse(self, raw, expected: dict) -> list[Measurement]:
        return parse(raw, expected)


BENCHMARK = MILC()
