"""Snakemake adapter: run a figure's notebook (notebooks/<name>.ipynb) in this
process and write it, executed, as the job's log.

The code cells run in order in one namespace that holds ``snakemake`` (the
job's input, output and params, as under Snakemake's notebook directive); a
cell's printed text and the value of its last expression become its outputs,
as in Jupyter.  No Jupyter kernel is started: on a 2-core host a kernel costs
about 2.3 s per figure, more than the drawing (README, "Where the paper's time
goes").  A failing cell stops the job, names the notebook and the cell, and
leaves its traceback in the log; the figure is not written then.
"""

import ast
import contextlib
import io
import json
import os
import sys
import time
import traceback

snakemake = globals()["snakemake"]


def _cells(path):
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    return nb, [c for c in nb["cells"] if c["cell_type"] == "code"]


def _run(source, namespace, name):
    """Execute one cell; return the repr of its last expression (or None)."""
    tree = ast.parse(source, filename=name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, name, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, name, "eval"), namespace)
        if value is not None:
            return repr(value)
    return None


def main():
    path = str(snakemake.input.notebook)
    nb, cells = _cells(path)
    job = {
        "input": {k: str(v) for k, v in snakemake.input.items()},
        "output": {k: str(v) for k, v in snakemake.output.items()},
        "params": {k: v for k, v in snakemake.params.items() if k != "what"},
    }
    namespace = {"__name__": "__main__", "snakemake": snakemake}
    failed = None
    start = time.perf_counter()
    for i, cell in enumerate(cells, start=1):
        out = io.StringIO()
        outputs = []
        t0 = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out):
                value = _run("".join(cell["source"]), namespace, f"{path}, cell {i}")
        except Exception:  # noqa: BLE001 - reported with its notebook and cell, then the job fails
            failed = i
            value = None
            outputs.append({"output_type": "error", "ename": sys.exc_info()[0].__name__,
                            "evalue": str(sys.exc_info()[1]),
                            "traceback": traceback.format_exc().splitlines()})
        if out.getvalue():
            outputs.insert(0, {"output_type": "stream", "name": "stdout", "text": out.getvalue()})
        if value is not None:
            outputs.append({"output_type": "execute_result", "execution_count": i, "metadata": {},
                            "data": {"text/plain": value}})
        cell["outputs"] = outputs
        cell["execution_count"] = i
        cell.setdefault("metadata", {})["hpcvirt_seconds"] = round(time.perf_counter() - t0, 3)
        if failed:
            break
    nb["cells"].insert(0, {
        "cell_type": "raw", "metadata": {}, "source":
        f"hpcvirt: {path} run by workflow/scripts/notebook.py in "
        f"{time.perf_counter() - start:.2f} s for this job:\n{json.dumps(job, indent=1)}\n"})
    tmp = f"{snakemake.log.notebook}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(nb, fh, indent=1)
    os.replace(tmp, snakemake.log.notebook)
    if failed:
        print(f"notebook {path}: cell {failed} failed; its traceback is in {snakemake.log.notebook}\n"
              + "\n".join(cells[failed - 1]["outputs"][-1]["traceback"]), file=sys.stderr)
        sys.exit(1)


main()
