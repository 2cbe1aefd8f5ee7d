"""How DCP reads and writes gpututor's checkpoints: :class:`Boxes`, the pieces of one whole
tensor a rank holds (DCP's sharded-value protocol), and the save and load planners that write a
compact CPU copy of each and read into them in place, unpickling nothing."""
from __future__ import annotations

import torch

from .checkpoint_files import CheckpointError


class Boxes:
    """The boxes one rank holds of one whole tensor, as DCP's sharded-value protocol wants
    them. ``entries`` are ``(offsets, view, copies)``: ``copies`` are other local views of the
    same values (a pipeline rank holding both copies of a tied weight), filled after a load."""

    def __init__(self, shape: tuple, dtype: torch.dtype, entries: list):
        self.shape, self.dtype, self.entries = tuple(shape), dtype, entries

    def size(self) -> torch.Size:
        return torch.Size(self.shape)

    def __create_write_items__(self, fqn: str, obj) -> list:
        from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex, \
            TensorProperties
        from torch.distributed.checkpoint.planner import TensorWriteData, WriteItem, WriteItemType
        return [WriteItem(index=MetadataIndex(fqn, torch.Size(offsets)),
                          type=WriteItemType.SHARD,
                          tensor_data=TensorWriteData(
                              chunk=ChunkStorageMetadata(offsets=torch.Size(offsets),
                                                         sizes=view.size()),
                              properties=TensorProperties.create_from_tensor(view),
                              size=self.size()))
                for offsets, view, _ in self.entries]

    def __create_chunk_list__(self) -> list:
        from torch.distributed.checkpoint.metadata import ChunkStorageMetadata
        return [ChunkStorageMetadata(offsets=torch.Size(o), sizes=v.size())
                for o, v, _ in self.entries]

    def __get_tensor_shard__(self, index) -> torch.Tensor:
        for offsets, view, _ in self.entries:
            if torch.Size(offsets) == index.offset:
                return view
        raise ValueError(f"no box of {index.fqn} at {tuple(index.offset)}")

    def fill_copies(self) -> None:
        for _, view, copies in self.entries:
            for other in copies:
                other.copy_(view)

    def staged(self) -> "Boxes":
        """The same boxes copied to CPU memory (what an asynchronous save writes from)."""
        return Boxes(self.shape, self.dtype,
                     [(o, v.detach().to("cpu", copy=True), []) for o, v, _ in self.entries])


def _planners():
    from torch.distributed.checkpoint import DefaultLoadPlanner, DefaultSavePlanner

    class SavePlanner(DefaultSavePlanner):
        def lookup_object(self, index):
            obj = self.state_dict[index.fqn]
            if isinstance(obj, Boxes):   # write a compact CPU copy, not the view's storage
                view = obj.__get_tensor_shard__(index).detach()
                compact = view.untyped_storage().nbytes() == view.nbytes
                return view.cpu() if compact and view.is_contiguous() else \
                    view.to("cpu", copy=True).contiguous()
            return super().lookup_object(index)

    class LoadPlanner(DefaultLoadPlanner):
        """Reads into :class:`Boxes` in place (DCP's own set-up would replace them: it only
        knows tensors); the state dict is flat already."""

        def __init__(self):
            super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)

        def set_up_planner(self, state_dict, metadata=None, is_coordinator=False):
            self.original_state_dict = self.state_dict = state_dict
            self.metadata, self.is_coordinator = metadata, is_coordinator

        def lookup_tensor(self, index):
            obj = self.state_dict[index.fqn]
            if isinstance(obj, Boxes):
                return obj.__get_tensor_shard__(index)
            return super().lookup_tensor(index)

        def load_bytes(self, read_item, value):
            # DCP's would torch.load(weights_only=False) them: code could run. gpututor saves
            # tensors only (check_folder refuses an index with other entries)
            raise CheckpointError(f"entry {read_item.dest_index.fqn!r} is not a tensor: a "
                                  "gpututor checkpoint holds tensors only, and loading never "
                                  "unpickles other values")

    return SavePlanner, LoadPlanner
