"""The workflow's local Python jobs (the paper's scripts and the figures'
notebooks) run in processes forked from one server that has imported pandas,
matplotlib and seaborn once, instead of a new interpreter each.

On a 2-core host a new interpreter costs about 1.2 s per job before it does
anything (a Jupyter kernel 2.3 s more), more than most of these jobs take
(README, "Where the paper's time goes").  The server (``python -m
hpcvirt.localjobs DIR``) is started as a run reads its rule files
(:func:`start`, so that its imports overlap Snakemake's planning) or else by
the run's first such job, and ends when the Snakemake process that started
it ends; it talks to that process only,
through a socket file in a private temporary directory.  Every job starts
from the server's state, so what one job draws or imports cannot leak into
the next.

A script (``workflow/scripts/*.py``) runs as under Snakemake's ``script``
directive: it finds ``snakemake`` (its job's ``input``, ``output``,
``params`` and ``log``, by position and by name) among its globals.  A
notebook (``notebooks/<name>.ipynb``) runs its code cells in order in one
namespace that holds ``snakemake`` the same way; a cell's printed text and
the value of its last expression become its outputs, as in Jupyter, and the
executed notebook is the job's log.  A failing cell stops the notebook, names
the notebook and the cell, and leaves its traceback in the log; the figure is
not written then.  Either way a failure fails the job with its traceback.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

# Imported once by the server; what a job needs beyond these it imports itself.
PRELOAD = ["pandas", "matplotlib.pyplot", "matplotlib.backends.backend_pdf", "seaborn", "yaml",
           "hpcvirt.views", "hpcvirt.labels", "hpcvirt.claims", "hpcvirt.paper", "hpcvirt.tables"]


class Names(list):
    """A job's input, output, params or log as its script sees it: by position
    (``snakemake.log[0]``) and by name (``snakemake.input.table``, a list for
    a named list of files)."""

    def __init__(self, values=(), names=None):
        super().__init__(values)
        self.__dict__["_by_name"] = dict(names or {})

    def __getattr__(self, name):
        try:
            return self.__dict__["_by_name"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key):
        return self.__dict__["_by_name"][key] if isinstance(key, str) else super().__getitem__(key)

    def items(self):
        return self.__dict__["_by_name"].items()

    @classmethod
    def of(cls, named, text: bool = True) -> "Names":
        """A Snakemake job's named list (``input``, ``params``...) as plain
        values, files as text (``text``), named lists of files as lists."""
        def plain(v):
            if not text:
                return v
            return [str(x) for x in v] if isinstance(v, list) else str(v)
        return cls([plain(v) for v in named], {k: plain(v) for k, v in named.items()})


class Job:
    """What a script or notebook finds as ``snakemake``."""

    def __init__(self, input, output, params, log):
        self.input, self.output, self.params, self.log = input, output, params, log


def _run(source: str, namespace: dict, name: str):
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


def execute(path: str, job: dict, log: str) -> int:
    """Run the notebook at ``path`` for ``job`` (``input``, ``output``,
    ``params``: names to values), write it executed to ``log`` (atomically)
    and return the number of the cell that failed, or 0."""
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    snakemake = Job(*(Names(v.values(), v) for v in (job["input"], job["output"], job["params"], {})))
    namespace = {"__name__": "__main__", "snakemake": snakemake}
    failed = 0
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
    # the figure's report caption (params.what) is the report's, not the notebook's record
    shown = {**job, "params": {k: v for k, v in job["params"].items() if k != "what"}}
    nb["cells"].insert(0, {
        "cell_type": "raw", "metadata": {}, "source":
        f"hpcvirt: {path} run by hpcvirt.localjobs in "
        f"{time.perf_counter() - start:.2f} s for this job:\n{json.dumps(shown, indent=1)}\n"})
    tmp = f"{log}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(nb, fh, indent=1)
    os.replace(tmp, log)
    if failed:
        print(f"notebook {path}: cell {failed} failed; its traceback is in {log}\n"
              + "\n".join(cells[failed - 1]["outputs"][-1]["traceback"]), file=sys.stderr)
    return failed


def run_script(path: str, job: Job) -> int:
    """Run the script at ``path`` with ``snakemake`` (``job``) among its
    globals, as Snakemake's ``script`` directive does; return its exit code."""
    with open(path, encoding="utf-8") as fh:
        code = compile(fh.read(), path, "exec")
    sys.argv = [path]
    try:
        exec(code, {"__name__": "__main__", "__file__": path, "snakemake": job})
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _serve_one(conn) -> int:
    with conn.makefile("rb") as fh:
        request = pickle.load(fh)
    os.chdir(request["cwd"])
    if request["kind"] == "notebook":
        return 1 if execute(request["path"], request["job"], request["log"]) else 0
    return run_script(request["path"], request["job"])


def serve(directory: str) -> None:
    """The server: import PRELOAD, listen on ``directory``/socket, say
    ``ready`` on stdout, and run each request (a pickled script or notebook
    job, see :func:`_ask`) in a forked child that answers with its exit code.
    It ends when its standard input (the starting process) closes."""
    import importlib
    import signal
    import socket

    def end(*_) -> None:
        # at once and quietly, wherever it comes: an exception raised from here
        # inside the import machinery (e.g. a module lock's callback) would only
        # be printed as "Exception ignored", and the imports would go on
        shutil.rmtree(directory, ignore_errors=True)
        os._exit(0)

    # Ctrl-C reaches the whole process group: the jobs stop, Snakemake ends, and
    # so does the server when its standard input closes; SIGTERM ends it at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, end)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(os.path.join(directory, "socket"))
        server.listen(8)
        print("ready", flush=True)
        os.dup2(2, 1)  # what a job prints goes where Snakemake's own output goes
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        _loop(server)
        server.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _loop(server) -> None:
    import select
    import signal

    while True:
        ready, _, _ = select.select([server, sys.stdin], [], [])
        if sys.stdin in ready:
            return
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            for sig, handler in ((signal.SIGCHLD, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler),
                                 (signal.SIGTERM, signal.SIG_DFL)):
                signal.signal(sig, handler)
            code = 1
            try:
                code = _serve_one(conn)
            except BaseException:  # noqa: BLE001 - the job fails with this traceback
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                conn.sendall(f"{code}\n".encode())
                os._exit(code)
        conn.close()


_SERVER: dict = {}
_LOCK = threading.Lock()


def start() -> None:
    """Start the server now, without waiting for it (a run that will run
    local jobs starts it while Snakemake still builds its graph: its imports
    take the other core).  It ends with this process (its standard input is
    a pipe from here)."""
    with _LOCK:
        _start()


def _start() -> None:
    proc = _SERVER.get("proc")
    if proc is not None and proc.poll() is None:
        return
    # mode 0700; a socket file's path has at most 107 bytes: a long TMPDIR gives way to /tmp
    directory = tempfile.mkdtemp(prefix="hpcvirt-localjobs-", dir=None if len(tempfile.gettempdir()) < 64 else "/tmp")
    lib = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [lib, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "hpcvirt.localjobs", directory],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    atexit.register(_stop, proc, directory)
    _SERVER.clear()
    _SERVER.update(proc=proc, socket=os.path.join(directory, "socket"), ready=False)


def _stop(proc: subprocess.Popen, directory: str) -> None:
    if not _SERVER.get("ready"):
        proc.terminate()  # no job asked for it (a dry run): not even its imports are waited for
    proc.stdin.close()  # the server ends and removes its directory
    proc.wait()
    shutil.rmtree(directory, ignore_errors=True)


def _socket() -> str:
    """The running server's socket file, started on first use unless
    :func:`start` started it."""
    with _LOCK:
        _start()
        if not _SERVER["ready"]:
            if _SERVER["proc"].stdout.readline().strip() != b"ready":
                raise RuntimeError(f"the local jobs' server ({sys.executable} -m hpcvirt.localjobs) did not start")
            _SERVER["ready"] = True
        return _SERVER["socket"]


def _ask(request: dict) -> str:
    """Send a job to the server; its answer: the job's exit code as text."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_socket())
        conn.sendall(pickle.dumps({**request, "cwd": os.getcwd()}))
        conn.shutdown(socket.SHUT_WR)
        with conn.makefile("r", encoding="utf-8") as fh:
            return fh.readline().strip()


def notebook(path, input, output, params, log) -> None:
    """Run the notebook at ``path`` for a Snakemake job (its ``input``,
    ``output``, ``params`` and ``log``, whose entry ``notebook`` receives the
    executed notebook); raise if a cell failed.  The notebook draws output
    ``pdf`` into a partial file, published with its PNG (output ``png``) only
    when every cell ran (:func:`hpcvirt.figures.publish`)."""
    from .figures import partial, publish

    out = {k: str(v) for k, v in output.items()}
    pdf, png = out.get("pdf"), out.pop("png", None)
    if pdf:
        out["pdf"] = partial(pdf)
    job = {"input": {k: str(v) for k, v in input.items()}, "output": out, "params": dict(params.items())}
    answer = _ask({"kind": "notebook", "path": str(path), "job": job, "log": str(log.notebook)})
    if answer != "0":
        if pdf:
            Path(out["pdf"]).unlink(missing_ok=True)
        raise RuntimeError(f"notebook {path} failed ({'exit code ' + answer if answer else 'no answer'}); "
                           f"the executed notebook is {log.notebook}")
    if pdf:
        publish(out["pdf"], pdf, png)


def script(path, input, output, params, log) -> None:
    """Run the script at ``path`` for a Snakemake job (its ``input``,
    ``output``, ``params`` and ``log``); raise if it fails."""
    job = Job(Names.of(input), Names.of(output), Names.of(params, text=False), Names.of(log))
    answer = _ask({"kind": "script", "path": str(path), "job": job})
    if answer != "0":
        raise RuntimeError(f"{path} failed ({'exit code ' + answer if answer else 'no answer'})"
                           + (f"; see {', '.join(map(str, log))}" if len(log) else ""))


if __name__ == "__main__":
    from hpcvirt.localjobs import serve as _serve  # the module's own names, which the requests pickle

    _serve(sys.argv[1])
