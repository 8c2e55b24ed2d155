"""The local Python jobs run in processes forked from one server
(hpcvirt.localjobs): real Snakemake jobs on small notebooks, one that draws
and one whose second cell fails, and on small scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _notebook(cells: list[str]) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "metadata": {}, "source": "# a figure"}]
            + [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
               for c in cells]}


def _workflow(tmp_path: Path) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "table.csv").write_text("x,y\n1,2\n2,4\n")
    draws = ["import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
             "df = pd.read_csv(snakemake.input.table)\nprint('rows', len(df))",
             "df['y'].sum()",
             "fig, ax = plt.subplots()\nax.plot(df['x'], df['y'])\nfig.savefig(snakemake.output.pdf)"]
    fails = ["value = 1", "raise ValueError(f'no data for {snakemake.params.what}')",
             "open(snakemake.output.pdf, 'w').write('never')"]
    for name, cells in (("draws", draws), ("fails", fails)):
        (tmp_path / "notebooks" / f"{name}.ipynb").write_text(json.dumps(_notebook(cells)))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts/sums.py").write_text(
        "import pandas as pd\nsnakemake = globals()['snakemake']\n"
        "total = sum(pd.read_csv(p)['y'].sum() for p in snakemake.input.tables)\n"
        "open(snakemake.output[0], 'w').write(f'{total} {snakemake.params.scale * total} {snakemake.log[0]}')\n")
    (tmp_path / "scripts/exits.py").write_text("import sys\nsys.exit('no rows in ' + snakemake.input.table)\n")
    (tmp_path / "Snakefile").write_text(f"""
import sys
sys.path.insert(0, "{ROOT}/workflow/lib")
from hpcvirt import localjobs

for name in ("draws", "fails"):
    rule:
        name: f"figure_{{name}}"
        input: table="table.csv", notebook=f"notebooks/{{name}}.ipynb"
        output: pdf=f"figures/{{name}}.pdf", png=f"figures/{{name}}.png"
        log: notebook=f"logs/{{name}}.ipynb"
        params: what="the test"
        run: localjobs.notebook(input.notebook, input, output, params, log)

rule sums:
    input: tables=["table.csv", "table.csv"]
    output: "sums.txt"
    log: "logs/sums.log"
    params: scale=10
    run: localjobs.script("scripts/sums.py", input, output, params, log)

rule exits:
    input: table="table.csv"
    output: "exits.txt"
    run: localjobs.script("scripts/exits.py", input, output, params, log)
""")
    return tmp_path


def _snakemake(work: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-d", str(work), "-s",
                           str(work / "Snakefile"), *args], capture_output=True, text=True, timeout=300)


def test_a_notebook_draws_its_figure_and_its_log_is_the_executed_notebook(tmp_path):
    work = _workflow(tmp_path)
    # in a thread of Snakemake's own process, as the workflow profile has it
    r = _snakemake(work, "--force-use-threads", "figures/draws.pdf")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "figures/draws.pdf").read_bytes().startswith(b"%PDF")
    # drawn into a partial file, published with its picture for the HTML report, nothing else left
    assert (work / "figures/draws.png").read_bytes().startswith(b"\x89PNG")
    assert sorted(p.name for p in (work / "figures").iterdir()) == ["draws.pdf", "draws.png"]
    log = json.loads((work / "logs/draws.ipynb").read_text())
    assert log["cells"][0]["cell_type"] == "raw" and "notebooks/draws.ipynb" in log["cells"][0]["source"]
    assert '"table": "table.csv"' in log["cells"][0]["source"]
    code = [c for c in log["cells"] if c["cell_type"] == "code"]
    assert code[0]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "rows 2\n"}]
    assert code[1]["outputs"][0]["data"]["text/plain"] == "np.int64(6)"    # the last expression, as Jupyter shows it
    assert [c["execution_count"] for c in code] == [1, 2, 3]
    # the notebook is an input: an edited notebook draws its figure again (a touched one does not)
    nb = work / "notebooks/draws.ipynb"
    os.utime(nb)
    assert "Nothing to be done" in _snakemake(work, "figures/draws.pdf").stderr
    edited = json.loads(nb.read_text())
    edited["cells"][-1]["source"] += "\nprint('edited')"
    nb.write_text(json.dumps(edited))
    r = _snakemake(work, "figures/draws.pdf")
    assert r.returncode == 0 and "rule figure_draws" in r.stderr
    assert "edited" in (work / "logs/draws.ipynb").read_text()


def test_a_failing_cell_fails_the_job_names_its_cell_and_writes_no_figure(tmp_path):
    work = _workflow(tmp_path)
    r = _snakemake(work, "figures/fails.pdf")
    assert r.returncode != 0
    assert "notebooks/fails.ipynb: cell 2 failed" in r.stderr
    assert "ValueError: no data for the test" in r.stderr
    assert not (work / "figures/fails.pdf").exists()
    # what the notebook wrote before it failed (its partial file): gone
    assert not (work / "figures").exists() or list((work / "figures").iterdir()) == []
    log = json.loads((work / "logs/fails.ipynb").read_text())
    code = [c for c in log["cells"] if c["cell_type"] == "code"]
    assert code[1]["outputs"][-1]["output_type"] == "error" and code[1]["outputs"][-1]["ename"] == "ValueError"
    assert code[2]["outputs"] == []                       # the cells after it did not run


def test_a_script_gets_its_job_by_name_and_position_and_its_failure_fails_the_job(tmp_path):
    work = _workflow(tmp_path)
    # Snakemake's default for run blocks: a Snakemake process of its own, which starts its own server
    r = _snakemake(work, "sums.txt")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "sums.txt").read_text() == "12 120 logs/sums.log"
    r = _snakemake(work, "--force-use-threads", "exits.txt")
    assert r.returncode != 0
    assert "no rows in table.csv" in r.stderr and "scripts/exits.py failed (exit code 1)" in r.stderr
    assert not (work / "exits.txt").exists()


def test_the_server_ends_with_the_process_that_started_it_and_leaves_no_socket(tmp_path):
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'workflow/lib')!r})\n"
            "from hpcvirt import localjobs\nimport os\n"
            "s = localjobs._socket(); print(os.path.dirname(s), localjobs._SERVER['proc'].pid)\n"
            "print(oct(os.stat(os.path.dirname(s)).st_mode & 0o777))\n")
    # a TMPDIR too long for a socket file's path (107 bytes) gives way to /tmp
    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "TMPDIR": str(long_tmp)})
    assert r.returncode == 0, r.stderr
    (directory, pid), (mode,) = (line.split() for line in r.stdout.splitlines())
    assert mode == "0o700"
    assert not Path(directory).exists()
    assert not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("after", [0.05, 0.2, 0.4, 0.6, 0.8, 1.0])
def test_a_server_started_early_and_never_asked_is_ended_with_its_process(tmp_path, after):
    """A dry run (or a run that stops at a configuration error) starts the server
    (whether a run is dry is known only after the rule files are read) and asks
    it nothing: the server is stopped wherever it is in its imports, quietly (no
    "Exception ignored" traceback from inside the import machinery), and leaves
    no directory and no process."""
    code = (f"import sys, time; sys.path.insert(0, {str(ROOT / 'workflow/lib')!r})\n"
            "from hpcvirt import localjobs\nimport os\n"
            "localjobs.start(); proc, socket = localjobs._SERVER['proc'], localjobs._SERVER['socket']\n"
            f"time.sleep({after}); localjobs._stop(proc, os.path.dirname(socket))\n"
            "print(os.path.dirname(socket), proc.pid, repr(proc.stdout.read()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    directory, pid, said = r.stdout.split()
    # early, it never got as far as saying it is ready (its imports take about a second); later it may have
    assert said == "b''" if after <= 0.2 else said in ("b''", "b'ready\\n'"), said
    assert not Path(directory).exists()
    assert not Path(f"/proc/{pid}").exists()
