"""What one persistent rank runs: join the group, then run cells in its own namespace until told
to stop (or until the kernel goes).

A rank is forked from the warm forkserver (runtime/warm.py), joins a gloo (CPU) or NCCL (GPU)
process group the way ``launch()``'s ranks do (``joining.init_process_group``), and then waits on
its pipe for one message at a time:

- ``("run", request, cell, code, guarded)``: run ``code`` in the rank's namespace, which starts
  with ``rank``, ``world_size``, ``device``, ``torch`` and ``dist`` and keeps every name a cell
  defines; reply with what it printed, the value of its last expression and its error, if any;
- ``("get", request, name)``: reply with that name's value (``group.gather``);
- ``("stop",)``: leave the process group and exit.

Every reply echoes its request's id, so the kernel can tell it from a reply to an earlier request
it gave up on (``replies.py``).

While a cell runs, SIGINT (the kernel's interrupt button) raises ``KeyboardInterrupt`` in it;
between cells it is ignored. SIGUSR1 writes every thread's stack to a file the kernel reads when
a cell does not end in time (``rank_output.dump_stack_on_request``). Nothing here imports
plotting or widget code.
"""
from __future__ import annotations

import ast
import io
import linecache
import os
import pickle
import shutil
import signal
import sys
import threading
import time
import traceback

import cloudpickle
import torch
import torch.distributed as dist

from ..rank_output import dump_stack_on_request
from ..refuse import OnlyPointToPoint
from ..joining import (init_process_group, keep_off_gpus, rank_device, rank_threads,
                       use_loopback_only)

OUTPUT_LIMIT = 100_000   # characters of one cell's output a rank keeps (the rest: counted)
VALUE_LIMIT = 10_000     # characters of a last expression's repr


class KeptOutput:
    """What a cell printed on stdout and stderr, in order: the first ``limit`` characters are
    kept, the rest only counted, so a cell that prints forever does not grow the rank's memory."""

    def __init__(self, limit: int = OUTPUT_LIMIT):
        self.limit, self.pieces, self.size, self.dropped = limit, [], 0, 0

    def add(self, stream: str, text: str) -> None:
        piece = text[:max(0, self.limit - self.size)]
        if piece:
            self.pieces.append((stream, piece))
            self.size += len(piece)
        self.dropped += len(text) - len(piece)

    def joined(self) -> list:
        """``(stream, text)`` pairs, neighbouring pieces of one stream joined, and a last line
        saying how many characters were not kept."""
        joined: list = []
        for stream, text in self.pieces:
            if joined and joined[-1][0] == stream:
                joined[-1] = (stream, joined[-1][1] + text)
            else:
                joined.append((stream, text))
        if self.dropped:
            joined.append(("stderr", f"\n[{self.dropped:,} characters of output not shown]\n"))
        return joined


class CellOutput(io.TextIOBase):
    """One of a cell's streams (``stream``: "stdout" or "stderr"), written into ``kept``."""

    def __init__(self, kept: KeptOutput, stream: str):
        self.kept, self.stream = kept, stream

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.kept.add(self.stream, text)
        return len(text)


class Interrupts:
    """SIGINT raises ``KeyboardInterrupt`` once, and only while a cell runs."""

    def __init__(self):
        self.busy = self.raised = False
        signal.signal(signal.SIGINT, self.handle)

    def handle(self, signum, frame):
        if self.busy and not self.raised:
            self.raised = True
            raise KeyboardInterrupt


def cell_name(cell: int) -> str:
    """The file name a cell's code has in tracebacks and stacks: ``<cell 3>``."""
    return f"<cell {cell}>"


def user_names(namespace: dict, preset: set) -> list[str]:
    """The names a learner's cells defined (not the preset ones, not ``_private``)."""
    return sorted(k for k in namespace if k not in preset and not k.startswith("_"))


def unanswered(tree: ast.Module, namespace: dict) -> list[str]:
    """The names the cell reads that are still ``...`` (an exercise's placeholder, answered
    nowhere yet) and that the cell does not bind itself: running it would only show
    "'ellipsis' object is not callable" on every rank."""
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {n.name for n in ast.walk(tree)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    bound |= {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
              if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(name for name in read - bound if namespace.get(name, None) is Ellipsis)


def run_cell(code: str, cell: int, namespace: dict, guarded: bool, interrupts: Interrupts) -> dict:
    """Run ``code`` as IPython would (the last expression's value is shown) and say what came of
    it: ``text`` (what it printed, as ``(stream, text)`` pairs), ``value``, ``error``, and
    ``unanswered``: the placeholders it would have read (:func:`unanswered`; then it does not run)."""
    filename = cell_name(cell)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    kept = KeptOutput()
    value = error = None
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = CellOutput(kept, "stdout"), CellOutput(kept, "stderr")
    started = time.perf_counter()
    try:
        tree = ast.parse(code, filename)
        waiting_for = unanswered(tree, namespace)
        if waiting_for:
            return {"text": [], "value": None, "error": None, "unanswered": waiting_for,
                    "seconds": time.perf_counter() - started}
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = compile(tree, filename, "exec")
        tail = compile(ast.Expression(last.value), filename, "eval") if last else None
        interrupts.busy, interrupts.raised = True, False
        try:
            if guarded:
                with OnlyPointToPoint():
                    exec(body, namespace)
                    result = eval(tail, namespace) if tail else None
            else:
                exec(body, namespace)
                result = eval(tail, namespace) if tail else None
        finally:
            interrupts.busy = False
        if result is not None:
            namespace["_"] = result
            value = repr(result)
            if len(value) > VALUE_LIMIT:
                value = value[:VALUE_LIMIT] + f"... [{len(value) - VALUE_LIMIT:,} characters more]"
    except BaseException as exc:  # noqa: BLE001 - a cell's error is shown, the rank lives on
        error = {"type": type(exc).__name__, "message": str(exc),
                 "traceback": cell_traceback(exc, filename)}
    finally:
        sys.stdout, sys.stderr = saved
    return {"text": kept.joined(), "value": value, "error": error, "unanswered": [],
            "seconds": time.perf_counter() - started}


def cell_traceback(exc: BaseException, filename: str) -> str:
    """The traceback from the cell's own frames on: the rank's machinery, and the guard's frame
    that refused a collective, left out."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    shown = traceback.TracebackException(type(exc), exc, tb)
    shown.stack = traceback.StackSummary.from_list(
        [f for f in shown.stack if not f.filename.endswith(os.path.join("runtime", "refuse.py"))])
    return "".join(shown.format())


def rank_main(rank: int, world_size: int, spec, tmp: str, conn, alive) -> None:
    """One persistent rank: join the group, then answer the kernel's messages on ``conn``."""
    interrupts = Interrupts()
    exit_when_the_kernel_goes(alive, tmp)
    use_loopback_only()
    stacks = dump_stack_on_request(os.path.join(tmp, f"stack-rank{rank}.txt"))
    grouped = False
    try:
        device = keep_off_gpus(rank_device(spec, rank))
        init_process_group(spec, rank, world_size, device,   # gloo for CPU tensors on GPUs too
                           store=dist.FileStore(os.path.join(tmp, "store"), world_size),
                           cpu_tensors=True)
        grouped = True
        torch.set_num_threads(rank_threads(spec, device))
        namespace = {"__name__": "__ranks__", "rank": rank, "world_size": world_size,
                     "device": device, "torch": torch, "dist": dist}
        preset = set(namespace) | {"__builtins__"}
        conn.send_bytes(pickle.dumps(("ready", 0, (os.getpid(), device.type))))
        while True:
            try:
                message = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                break
            if message[0] == "run":
                _, request, cell, code, guarded = message
                reply = run_cell(code, cell, namespace, guarded, interrupts)
                reply["names"] = user_names(namespace, preset)
                conn.send_bytes(pickle.dumps(("done", request, reply)))
            elif message[0] == "get":
                _, request, name = message
                conn.send_bytes(value_of(namespace, name, request))
            else:
                break
    except BaseException as exc:  # noqa: BLE001 - the kernel must hear why the rank failed
        try:
            conn.send_bytes(pickle.dumps(("failed", None, f"{type(exc).__name__}: {exc}",
                                          traceback.format_exc())))
        except OSError:
            pass
    finally:
        if grouped:
            dist.destroy_process_group()
        stacks.close()


def exit_when_the_kernel_goes(alive, tmp: str) -> None:
    """A daemon thread that ends this rank, and removes the group's temp folder, when the
    kernel's end of ``alive`` closes: after ``stop()``, or when the kernel died (even killed)."""

    def watch():
        try:
            alive.recv()
        except (EOFError, OSError):
            pass
        shutil.rmtree(tmp, ignore_errors=True)
        os._exit(3)

    threading.Thread(target=watch, name="gpututor-ranks-watch", daemon=True).start()


def value_of(namespace: dict, name: str, request: int) -> bytes:
    """The reply to ``request``: ``name``'s value, pickled by value (cloudpickle: a function
    defined in a cell too)."""
    if name not in namespace:
        return pickle.dumps(("missing", request, name))
    value = namespace[name]
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
    try:
        return pickle.dumps(("value", request, cloudpickle.dumps(value)))
    except Exception as exc:  # noqa: BLE001 - say which value could not travel, and why
        return pickle.dumps(("unpicklable", request, f"{type(exc).__name__}: {exc}"))
