"""Distributed checkpoints: every rank writes its own pieces, any layout reads any other's.

One layout on disk for every strategy (``gpututor.parallel.pieces``): ``model/NAME`` is the
one-process model's parameter NAME at its full shape, ``optim/KEY/NAME`` the optimizer's state
KEY of it (``exp_avg``, ``exp_avg_sq`` for AdamW, ``momentum_buffer`` for SGD), ``optim/step``
AdamW's step count. Each rank hands ``torch.distributed.checkpoint`` (DCP) the boxes it holds
(its strategy's :meth:`~gpututor.parallel.base.Strategy.checkpoint_pieces`) as :class:`Boxes`,
which speaks DCP's protocol for sharded values (``__create_write_items__``,
``__create_chunk_list__``, ``__get_tensor_shard__``, as DTensor does): DCP writes each box
once (a box several ranks hold is written by one of them) and, on load, reads into each box
of the new layout the parts of the saved chunks that overlap it. Nothing is gathered onto one
rank, and the world size and the strategy may change between save and load.

Where a run is: the step (the data position follows from it: ``data.batches``'s
``start_step``); no step draws random numbers, so no random state is saved.

``async_save``: the boxes are copied to CPU memory and written by a thread, over a gloo
process group of their own, while the next steps run. Training waits for the copy, and also for
the previous save to end, rank 0's ``gpututor.json`` and DCP's set-up of the save: the
``checkpoint_blocked_s`` a record holds is all of it, not the copy alone.

Each save is written into a staging folder and renamed to ``step{K}`` when complete, with the
run's id in it; one live run writes a ``checkpoint_dir`` at a time (``checkpoint_owner.py``).
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

from ..models import build_model
from ..parallel.pieces import local_tensor, model_names
from .checkpoint_files import (CheckpointError, check_folder, first_failure, latest, next_step,
                               rank_bytes, safe_reader, write_info, written_bytes)
from .checkpoint_owner import clear_staging, commit, run_of_rank, save_failed, staging_folder
from .checkpoint_planners import Boxes, _planners

STATE_KEYS = {"adamw": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",)}
SCALER_KEYS = ("scaler/scale", "scaler/growth_tracker")   # fp16's loss scale (GradScaler)


def checkpoint_writer(folder):
    """DCP's file writer, one file per rank, written by one thread that never touches CUDA. With
    ``thread_count=1`` and CUDA available, DCP's default copies ahead on the *current* CUDA
    stream (``filesystem._OverlappingCpuLoader``); an async save's writer thread has no device
    set, so ranks 1..N-1 would each make a context on GPU 0, and fail where a GPU takes one
    process (EXCLUSIVE_PROCESS). The state it writes is on the CPU already: read it serially."""
    import torch.distributed.checkpoint as dcp
    return dcp.FileSystemWriter(str(folder), single_file_per_rank=True, thread_count=1,
                                per_thread_copy_ahead=0)


def canonical_shapes(spec) -> tuple[dict, dict]:
    """``(aliases, shapes)`` of the one-process model of ``spec`` (built on meta: no memory)."""
    return model_names(build_model(spec, meta=True))


def init_optimizer_state(optimizer, kind: str) -> None:
    """Make the state a first step would make (zeros), so a load has tensors to fill."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            for key in STATE_KEYS[kind]:
                state.setdefault(key, torch.zeros_like(p, memory_format=torch.preserve_format))
            if kind == "adamw":
                state.setdefault("step", torch.tensor(0.0))


def state_dict(spec, strategy, model, optimizer, aliases: dict, shapes: dict) -> dict:
    """This rank's DCP state dict: a :class:`Boxes` per whole tensor it holds part of."""
    kind = "sgd" if spec.optimizer == "sgd" else "adamw"
    entries: dict[str, list] = {}
    meta: dict[str, tuple] = {}

    def add(key: str, box, local: torch.Tensor) -> None:
        view = box.take(local)
        if tuple(view.shape) != tuple(box.sizes):
            raise RuntimeError(f"{strategy.name}: box of {key} is {tuple(view.shape)}, "
                               f"expected {box.sizes}")
        found = entries.setdefault(key, [])
        for offsets, first, copies in found:
            if offsets == tuple(box.offsets) and first.shape == view.shape:
                copies.append(view)   # the same values held twice on this rank
                return
        found.append((tuple(box.offsets), view, []))
        meta[key] = (box.shape, view.dtype)

    step = None
    for piece in strategy.checkpoint_pieces(model, aliases):
        state = optimizer.state.get(piece.param, {})
        for box in piece.boxes:
            if box.name not in shapes:
                raise RuntimeError(f"{strategy.name}: piece {box.name!r} is not a parameter of "
                                   "the one-process model")
            add(f"model/{box.name}", box, local_tensor(piece.param).detach())
            for key in STATE_KEYS[kind]:
                if key in state:
                    add(f"optim/{key}/{box.name}", box, local_tensor(state[key]))
        if "step" in state:
            step = state["step"]
    out = {k: Boxes(*meta[k], v) for k, v in entries.items()}
    if kind == "adamw" and step is not None:
        out["optim/step"] = torch.as_tensor(step, dtype=torch.float32).detach().cpu().reshape(())
    return out


def scaler_state(scaler) -> dict:
    """An fp16 run's loss scale and growth tracker, as tensors: without them a resumed run
    would start again from the first scale and skip or take other steps than the original."""
    state = scaler.state_dict()
    return {"scaler/scale": torch.tensor(float(state["scale"]), dtype=torch.float64),
            "scaler/growth_tracker": torch.tensor(int(state["_growth_tracker"]))}


def load_scaler(values: dict, device: torch.device):
    """A ``GradScaler`` that continues from :func:`scaler_state`'s ``values``."""
    scaler = torch.amp.GradScaler(device.type)
    state = scaler.state_dict()
    state.update(scale=float(values["scaler/scale"]),
                 _growth_tracker=int(values["scaler/growth_tracker"]))
    scaler.load_state_dict(state)
    return scaler


def expected_keys(spec, shapes: dict) -> set:
    kind = "sgd" if spec.optimizer == "sgd" else "adamw"
    keys = {f"model/{n}" for n in shapes} | {f"optim/{k}/{n}" for k in STATE_KEYS[kind]
                                             for n in shapes}
    return keys | ({"optim/step"} if kind == "adamw" else set())


def check_resume(spec) -> dict:
    """Check ``spec.resume`` against the model ``spec`` trains, before any rank starts."""
    _, shapes = canonical_shapes(spec)
    return check_folder(spec.resume, shapes, expected_keys(spec, shapes))[0]


class Checkpointer:
    """A rank's saves and its resume. Every rank constructs it (the asynchronous save's process
    group is made collectively)."""

    def __init__(self, spec, strategy, rank: int):
        self.spec, self.strategy, self.rank = spec, strategy, rank
        self.aliases, self.shapes = canonical_shapes(spec)
        self.pending = None            # (future, figures, ...) of an asynchronous save
        self.group = None
        if spec.checkpoint_every and spec.checkpoint_async and dist.is_initialized():
            self.group = dist.new_group(backend="gloo")   # the writer thread's own collectives
        self.run = self.find_run() if spec.checkpoint_every else None

    def find_run(self) -> str:
        """The id of the run these saves belong to: rank 0 finds it in the folder's owner file
        (``checkpoint_owner.run_of_rank``), every rank learns it (or why the folder is refused)."""
        found = [None, None]
        if self.rank == 0:
            try:
                found[0] = run_of_rank(self.spec.checkpoint_dir)
                clear_staging(self.spec.checkpoint_dir, found[0])   # before any rank writes
            except CheckpointError as exc:
                found[1] = str(exc)
        if dist.is_initialized() and dist.get_world_size() > 1:   # as JSON: no peer's pickle
            from ..parallel.exchange import all_gather_bytes
            found = json.loads(all_gather_bytes(json.dumps(found).encode())[0])
        if found[1]:
            raise CheckpointError(found[1])
        return found[0]

    def folder(self, step: int) -> Path:
        return Path(self.spec.checkpoint_dir) / f"step{step + 1}"

    def save(self, model, optimizer, step: int, scaler=None) -> dict:
        """Save after ``step``; return the record's ``checkpoint_*`` fields: this save's step
        and the seconds training waited for it, and ``checkpoint_written``, the saves that
        finished meanwhile (:meth:`wait`; a synchronous save is one of them). ``scaler``: an
        fp16 run's ``GradScaler``, saved with it."""
        import torch.distributed.checkpoint as dcp
        waited = time.perf_counter()    # training waits from here: for the last save, too
        done = self.wait()              # one save at a time
        folder = self.folder(step)
        staging = staging_folder(folder, self.run)
        start = time.perf_counter()
        # state a first step would make (zeros), where no step has made it yet (an fp16 run
        # whose first steps overflowed and were skipped): AdamW and SGD start from it anyway
        init_optimizer_state(optimizer, "sgd" if self.spec.optimizer == "sgd" else "adamw")
        sd = state_dict(self.spec, self.strategy, model, optimizer, self.aliases, self.shapes)
        if scaler is not None:
            sd.update(scaler_state(scaler))
        try:
            if self.rank == 0:
                # (no removal here: the other ranks' DCP writers make this folder as they plan,
                # before any collective; this run's leftovers went in find_run)
                write_info(staging, self.spec, self.shapes, self.run, step)
            SavePlanner, _ = _planners()
            writer = checkpoint_writer(staging)
            if self.group is None:
                metadata = dcp.save(sd, storage_writer=writer, planner=SavePlanner())
                if self.rank == 0:   # every rank's data and then .metadata are written
                    commit(staging, folder, self.run)
                seconds = time.perf_counter() - start
                written = {"step": step, "save_s": seconds,
                           "bytes": written_bytes(metadata, self.rank, staging, folder)}
                return {"checkpoint_step": step, "checkpoint_blocked_s": seconds,
                        "checkpoint_written": [written]}
            staged = {k: v.staged() if isinstance(v, Boxes) else v.clone() for k, v in sd.items()}
            future = dcp.async_save(staged, storage_writer=writer, planner=SavePlanner(),
                                    process_group=self.group, async_stager=_Passthrough())
        except BaseException as exc:
            raise save_failed(exc, self.rank, step, staging, self.spec.checkpoint_dir) from None
        figures = {"step": step}
        ended = threading.Event()

        def end(done_future) -> None:   # runs in the writer thread when the save is done
            try:
                if done_future.exception() is None:
                    figures["bytes"] = written_bytes(done_future.result(), self.rank,
                                                     staging, folder)
                    if self.rank == 0:
                        commit(staging, folder, self.run)
            except BaseException as exc:  # noqa: BLE001 - raised by wait()
                figures["error"] = exc
            figures["save_s"] = time.perf_counter() - start
            ended.set()

        blocked = time.perf_counter() - waited
        future.add_done_callback(end)
        self.pending = (future, figures, staging, ended)
        return {"checkpoint_step": step, "checkpoint_blocked_s": blocked,
                "checkpoint_written": done}

    def wait(self) -> list:
        """Wait for an asynchronous save; return its figures (``[{"step", "save_s",
        "bytes"}]``; ``[]`` if none was running)."""
        if self.pending is None:
            return []
        future, figures, staging, ended = self.pending
        self.pending = None
        try:
            future.result()
            ended.wait()   # a Future wakes its waiters before it runs its callbacks
            if "error" in figures:
                raise figures["error"]
        except BaseException as exc:
            raise save_failed(exc, self.rank, figures["step"], staging,
                              self.spec.checkpoint_dir) from None
        return [{"step": figures["step"], "save_s": figures["save_s"],
                 "bytes": figures["bytes"]}]

    def settle(self, seconds: float) -> None:
        """A rank is failing: give an asynchronous save in flight up to ``seconds`` to finish
        and be committed, so that its files are whole and a restart resumes from it (the ranks
        are stopped as soon as one reports its failure). Rank 0 commits in its writer thread
        after every rank's part is written, so another rank waits until the committed folder
        is there, not only for its own part. Never raises: the rank's own failure is what it
        reports."""
        if self.pending is None:
            return
        (future, figures, _, ended), self.pending = self.pending, None
        deadline = time.monotonic() + seconds
        try:
            future.result(timeout=seconds)
        except BaseException:  # noqa: BLE001 - the save's own failure, or still running
            return
        ended.wait(max(0.0, deadline - time.monotonic()))   # this rank's callback (rank 0: commit)
        folder = str(self.folder(figures["step"]))
        while "error" not in figures and time.monotonic() < deadline:
            if latest(self.spec.checkpoint_dir, run=self.run) == folder:
                return
            time.sleep(0.02)

    def finished(self) -> list:
        """The figures of an asynchronous save that has finished by now (else [])."""
        return self.wait() if self.pending is not None and self.pending[0].done() else []

    def load(self, model, optimizer, ctx=None) -> int:
        """Fill ``model`` and ``optimizer`` from ``spec.resume``; return the next step. An fp16
        run continues with the saved loss scale (``ctx.grad_scaler``) where there is one."""
        import torch.distributed.checkpoint as dcp
        # the index is read once, checked, and that very object is what DCP reads by
        info, metadata = check_folder(self.spec.resume, self.shapes,
                                      expected_keys(self.spec, self.shapes))
        kind = "sgd" if self.spec.optimizer == "sgd" else "adamw"
        init_optimizer_state(optimizer, kind)
        sd = state_dict(self.spec, self.strategy, model, optimizer, self.aliases, self.shapes)
        if kind == "adamw":
            sd["optim/step"] = torch.zeros(())
        saved_scaler = set(SCALER_KEYS) <= set(metadata.state_dict_metadata)
        if self.spec.precision == "fp16" and saved_scaler:
            sd.update({"scaler/scale": torch.zeros((), dtype=torch.float64),
                       "scaler/growth_tracker": torch.zeros((), dtype=torch.int64)})
        _, LoadPlanner = _planners()
        try:
            with torch.no_grad():
                dcp.load(sd, storage_reader=safe_reader(self.spec.resume, metadata),
                         planner=LoadPlanner())
        except CheckpointError:
            raise
        except (Exception, dcp.api.CheckpointException) as exc:   # (DCP's: a BaseException)
            raise CheckpointError(f"resume={self.spec.resume!r} is invalid: reading it failed "
                                  f"({first_failure(exc)}); allowed is a complete, "
                                  "uncorrupted checkpoint") from None
        for value in sd.values():
            if isinstance(value, Boxes):
                value.fill_copies()
        with torch.no_grad():
            self.strategy.after_load(model)
        if kind == "adamw":
            for state in optimizer.state.values():
                state["step"] = sd["optim/step"].clone()
        if "scaler/scale" in sd and ctx is not None:
            ctx.grad_scaler = load_scaler(sd, ctx.device)
        return int(info["step"]) + 1


class _Passthrough:
    """An async stager that stages nothing more: :meth:`Checkpointer.save` copied the boxes."""

    should_synchronize_after_execute = False

    def stage(self, state_dict):
        return state_dict

    def synchronize_staging(self) -> None:
        pass

    def close(self) -> None:
        pass


__all__ = ["Boxes", "Checkpointer", "CheckpointError", "check_resume", "latest", "next_step"]
