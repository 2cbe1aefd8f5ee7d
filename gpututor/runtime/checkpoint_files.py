"""A checkpoint folder on disk, read without running code from it, and checked before training.

A gpututor checkpoint is a folder that ``torch.distributed.checkpoint`` (DCP) wrote: each
rank's tensor data in ``__{rank}_0.distcp``, the index of every chunk in ``.metadata`` (DCP
writes it last, once every rank has written its data: a folder without it is incomplete) and
our own ``gpututor.json`` (plain JSON: the format, the run that wrote it, the step, the
model's shapes). A save is renamed into place complete (``checkpoint_owner.py``).

DCP's own reader loads ``.metadata`` with :func:`pickle.load`, which runs whatever a file
asks of it. :func:`read_metadata` reads it with an unpickler that makes only DCP's plain
metadata records and torch's sizes and dtypes (:data:`ALLOWED`), never sets an attribute on a
class (pickle's BUILD on a class object would change it for the whole process) and refuses
anything else; a rank reads it once, checks it (:func:`check_folder`) and hands DCP that very
object (:func:`safe_reader`). The tensors DCP reads with ``torch.load(weights_only=True)``.
Values that are not tensors are never put into a checkpoint (DCP would read them back with
``torch.load(weights_only=False)``), nor stream transforms (compression): a checkpoint whose
index says otherwise is refused.
"""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

FORMAT = "gpututor-dcp-1"
INFO = "gpututor.json"
METADATA = ".metadata"

# The classes a DCP .metadata file is made of (torch 2.11-2.13), and nothing else.
ALLOWED = {
    ("torch.distributed.checkpoint.metadata", n) for n in (
        "Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
        "TensorProperties", "MetadataIndex", "StorageMeta", "_MEM_FORMAT_ENCODING")
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.distributed.checkpoint._extension", "_ExtensionDescriptor"),
    ("torch", "Size"), ("torch", "float32"), ("torch", "float64"), ("torch", "float16"),
    ("torch", "bfloat16"), ("torch", "int64"), ("torch", "int32"), ("torch", "uint8"),
    ("torch", "bool"), ("torch", "strided"), ("torch", "contiguous_format"),
    ("torch", "preserve_format"), ("collections", "OrderedDict"), ("builtins", "set"),
    ("builtins", "frozenset"), ("copyreg", "_reconstructor"), ("builtins", "object"),
    ("torch.serialization", "SerializationFormat"), ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath"),
    ("torch.distributed.checkpoint.filesystem", "SerializationFormat"),
}


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: what is wrong, named, before any step runs."""


class _Unpickler(pickle._Unpickler):   # Python's own: its opcodes can be replaced one by one
    dispatch = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str):
        if (module, name) not in ALLOWED:
            raise CheckpointError(f"{METADATA} asks for {module}.{name}: a gpututor checkpoint's "
                                  "index holds only DCP's metadata records, sizes and dtypes, "
                                  "and loading never runs code from a file")
        return super().find_class(module, name)

    def load_build(self):
        """BUILD sets the state of the object under it. On a class object that would set class
        attributes for the whole process (``PurePosixPath.__truediv__``): only instances, and
        no dunder names, which no DCP record has."""
        target, state = self.stack[-2], self.stack[-1]
        if isinstance(target, type):
            raise CheckpointError(f"{METADATA} sets attributes of the class {target.__module__}."
                                  f"{target.__qualname__} (pickle's BUILD on a class): allowed "
                                  "is state for DCP's records only; loading never changes code")
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        for part in (p for p in parts if isinstance(p, dict)):
            bad = [k for k in part if not isinstance(k, str) or k.startswith("__")]
            if bad:
                raise CheckpointError(f"{METADATA} sets attribute {bad[0]!r} of a "
                                      f"{type(target).__name__}: allowed are DCP's record "
                                      "fields, never dunder names")
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build


def read_metadata(folder) -> object:
    """DCP's index of ``folder``, read with the restricted unpickler (no code runs) and checked:
    DCP's ``Metadata``, its data stored without stream transforms."""
    from torch.distributed.checkpoint.filesystem import _StorageInfo
    from torch.distributed.checkpoint.metadata import Metadata
    path = Path(folder) / METADATA
    where = f"resume={str(folder)!r} is invalid"
    try:
        with open(path, "rb") as f:
            metadata = _Unpickler(f).load()
    except CheckpointError:
        raise
    except Exception as exc:   # truncated or not a pickle at all
        raise CheckpointError(f"{where}: its {METADATA} cannot be read ({type(exc).__name__}: "
                              f"{exc}); allowed is a complete checkpoint folder written by "
                              "gpututor") from exc
    if not isinstance(metadata, Metadata) or not isinstance(metadata.storage_data, dict):
        raise CheckpointError(f"{where}: its {METADATA} holds a {type(metadata).__name__}, not "
                              "DCP's Metadata: allowed is a checkpoint folder written by gpututor")
    for storage in metadata.storage_data.values():
        if not isinstance(storage, _StorageInfo):
            raise CheckpointError(f"{where}: its {METADATA} describes a data file with a "
                                  f"{type(storage).__name__}: allowed is DCP's _StorageInfo")
        # FileSystemReader runs each named transform (an extension looked up by name, e.g.
        # zstd decompression) over the bytes before torch.load: gpututor writes none
        if getattr(storage, "transform_descriptors", None):
            raise CheckpointError(f"{where}: data in {storage.relative_path!r} is stored through "
                                  f"transforms {list(storage.transform_descriptors)}; allowed "
                                  "are plain tensors (gpututor writes no transforms)")
    return metadata


def safe_reader(folder, metadata):
    """DCP's ``FileSystemReader`` for ``folder`` that hands DCP ``metadata``, the index this
    rank read and checked (:func:`check_folder`), instead of unpickling the file again."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            if kwargs.get("rank") is not None:   # per-rank metadata: not written by gpututor
                raise CheckpointError("per-rank metadata is not part of a gpututor checkpoint")
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

        def set_up_storage_reader(self, given, *args, **kwargs):
            if given is not metadata:
                raise CheckpointError("DCP was handed another index than the one checked")
            return super().set_up_storage_reader(given, *args, **kwargs)

    return SafeReader(folder)


def write_info(folder: Path, spec, shapes: dict, run: str, step: int) -> None:
    """Make ``folder`` and write its ``gpututor.json``: what a save holds, and whose it is."""
    folder.mkdir(parents=True, exist_ok=True)   # (another rank's DCP writer may make it too)
    info = {"format": FORMAT, "run": run, "step": step, "strategy": spec.strategy,
            "world_size": spec.world_size, "model": spec.model,
            "model_size": spec.resolved_model_size, "optimizer": spec.optimizer,
            "seed": spec.seed, "batch_size": spec.batch_size,
            "shapes": {k: list(v) for k, v in shapes.items()}}
    (folder / INFO).write_text(json.dumps(info, indent=1))


def rank_bytes(metadata, rank: int) -> int:
    """Bytes of ``rank``'s data file(s) (DCP names them ``__{rank}_*.distcp``), as a save's
    index records them."""
    ends: dict[str, int] = {}
    for item in metadata.storage_data.values():
        if item.relative_path.startswith(f"__{rank}_"):
            ends[item.relative_path] = max(ends.get(item.relative_path, 0),
                                           item.offset + item.length)
    return sum(ends.values())


def written_bytes(result, rank: int, *folders) -> int | None:
    """Bytes ``rank`` wrote in a save: from the index the save returned (an asynchronous save's
    future's result) when it holds its storage data (torch 2.13's does), else from its data files
    on disk (under torch 2.11 on the lent H200 an asynchronous save's index had ``storage_data``
    None): the staging folder, or the folder rank 0 renamed it to."""
    if getattr(result, "storage_data", None) is not None:
        return rank_bytes(result, rank)
    for folder in folders:
        try:
            files = list(Path(folder).glob(f"__{rank}_*.distcp"))
            if files:
                return sum(f.stat().st_size for f in files)
        except OSError:   # renamed meanwhile: the next folder has them
            continue
    return None


def first_failure(exc: BaseException) -> str:
    """One line for what went wrong, from DCP's per-rank failures when it reports them."""
    failures = getattr(exc, "failures", None)
    if failures:
        exc = next(iter(failures.values()))
        exc = exc[0] if isinstance(exc, tuple) else exc
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def read_info(folder) -> dict:
    """``gpututor.json`` of a checkpoint folder, checked: a clear error if it is not one."""
    folder = Path(folder)
    bad = lambda why: CheckpointError(f"resume={str(folder)!r} is invalid: {why}")
    if folder.is_file():
        raise bad("it is a file; allowed is a checkpoint folder (checkpoint_dir/step{K}) that "
                  "gpututor wrote with torch.distributed.checkpoint (files saved by torch.save "
                  "are not read: unpickling them could run code)")
    if not folder.is_dir():
        raise bad("no such folder; allowed is an existing checkpoint folder")
    try:
        info = json.loads((folder / INFO).read_text())
    except FileNotFoundError:
        raise bad(f"it has no {INFO}: allowed is a folder gpututor wrote") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad(f"its {INFO} is not JSON ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise bad(f"its {INFO} has format={info.get('format') if isinstance(info, dict) else info!r}"
                  f"; allowed is {FORMAT!r}")
    if not (folder / METADATA).is_file():
        raise bad(f"it has no {METADATA}: the save did not finish (DCP writes it last); "
                  "allowed is a complete checkpoint")
    return info


def check_folder(folder, shapes: dict, expected_keys: set | None = None) -> tuple[dict, object]:
    """Check a checkpoint folder against the model about to train; return its info and the
    index that was checked (what a load hands DCP: :func:`safe_reader`).

    ``shapes`` is the one-process model's ``{name: shape}``. Refused, naming what differs: not a
    gpututor checkpoint, an unfinished one, a parameter missing, extra or of another shape, an
    entry that is not a tensor, a data file missing or shorter than its index says."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    info = read_info(folder)
    metadata = read_metadata(folder)
    entries = metadata.state_dict_metadata
    where = f"resume={str(folder)!r} is invalid"
    for key, md in entries.items():
        if not isinstance(md, TensorStorageMetadata):
            raise CheckpointError(f"{where}: entry {key!r} is not a tensor; allowed are tensors "
                                  "only (other values would be unpickled)")
    saved = {k[len("model/"):]: tuple(md.size) for k, md in entries.items()
             if k.startswith("model/")}
    for name, shape in shapes.items():
        if name not in saved:
            raise CheckpointError(f"{where}: it has no parameter {name!r} (shape {shape}) of "
                                  "this model: allowed is a checkpoint of the same model")
        if saved[name] != tuple(shape):
            raise CheckpointError(f"{where}: parameter {name!r} has shape {saved[name]} there "
                                  f"and {tuple(shape)} in this model: allowed is a checkpoint "
                                  "of the same model shape")
    extra = sorted(set(saved) - set(shapes))
    if extra:
        raise CheckpointError(f"{where}: it has parameter(s) {', '.join(extra[:3])} that this "
                              "model lacks: allowed is a checkpoint of the same model")
    missing = sorted((expected_keys or set()) - set(entries))
    if missing:
        raise CheckpointError(f"{where}: it has no {missing[0]!r} (optimizer state of another "
                              f"kind: it saved {info.get('optimizer')!r}); allowed is a "
                              "checkpoint of the same optimizer")
    sizes = {}
    for storage in metadata.storage_data.values():
        end = storage.offset + storage.length
        sizes[storage.relative_path] = max(sizes.get(storage.relative_path, 0), end)
    for rel, end in sizes.items():
        if Path(rel).name != rel or rel in (".", ".."):   # DCP names files inside the folder
            raise CheckpointError(f"{where}: its index names data file {rel!r}, outside the "
                                  "folder: allowed are the folder's own files")
        path = Path(folder) / rel
        if not path.is_file() or os.path.getsize(path) < end:
            have = os.path.getsize(path) if path.is_file() else "no file"
            raise CheckpointError(f"{where}: data file {rel!r} holds {have} bytes, its index "
                                  f"says {end}: allowed is a complete, uncorrupted checkpoint")
    return info, metadata


def latest(folder, since: float | None = None, run: str | None = None) -> str | None:
    """The newest complete checkpoint (``step{K}`` with its ``.metadata``) in ``folder``;
    with ``run``, only one that run wrote (its id in ``gpututor.json``): a restart must not
    pick up another run's checkpoint left in the same folder; with ``since`` (a
    ``time.time()``), only one whose ``.metadata`` was written since then."""
    found = []
    for p in Path(folder).glob("step*"):
        if not (p.name[4:].isdigit() and (p / INFO).is_file()):
            continue
        try:
            written = (p / METADATA).stat().st_mtime
            if run is not None and json.loads((p / INFO).read_text()).get("run") != run:
                continue
        except (OSError, ValueError, AttributeError):   # no .metadata: a save that did not
            continue                                    # finish (DCP writes it last)
        if since is None or written >= since:
            found.append((int(p.name[4:]), p))
    return str(max(found)[1]) if found else None


def next_step(folder: str | None) -> int:
    """The step a run resumed from ``folder`` starts at (0 without a checkpoint)."""
    return 0 if folder is None else int(read_info(folder)["step"]) + 1
