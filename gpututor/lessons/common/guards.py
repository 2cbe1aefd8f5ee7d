"""Guards for exercises that ask the learner to build something the package already has: while
the learner's function runs, the package's own version refuses, however it is reached.

:class:`RefusedWhileRunning` swaps the code of the given functions for one that raises, so a name
imported before the check, an attribute of the module, or a reference held anywhere all reach
the refusal; :class:`RefusedAttributes` replaces built-ins (C functions, torch ops) by name.
:class:`OnlyPointToPoint` does the same for the built-in collectives of ``torch.distributed``,
while a learner builds one from point-to-point messages; :class:`RecordedSends` records what
those messages send. Checkers run the learner's function
through :func:`.code_exercise.call_refusing`, the one place that asks
:func:`called_the_reference`.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

# the collectives' refusal lives in the runtime (the persistent ranks' guarded mode uses it too)
from ...runtime.refuse import (GROUP_COLLECTIVES, OP_COLLECTIVES, POINT_TO_POINT_OPS,  # noqa: F401
                              OnlyPointToPoint, op_collectives)

REFUSED = "gpututor_reference_called"


def _refuse(*args, **kwargs):
    # this code runs as the refused function's, with that function's module globals: a literal
    raise RuntimeError("gpututor_reference_called")


class RefusedWhileRunning:
    """``with RefusedWhileRunning(f, g): candidate()``: inside, calling ``f`` or ``g`` raises
    ``RuntimeError(REFUSED)``; afterwards they work again."""

    def __init__(self, *functions):
        self.functions, self.saved = functions, []

    def __enter__(self):
        self.saved = [f.__code__ for f in self.functions]
        for f in self.functions:
            f.__code__ = _refuse.__code__
        return self

    def __exit__(self, *exc):
        for f, code in zip(self.functions, self.saved):
            f.__code__ = code
        return False


class RefusedAttributes:
    """``with RefusedAttributes((torch, "name"), (torch.ops.aten, "name")): candidate()``: for
    built-ins whose code cannot be swapped, the named attributes of each owner (a module, one of
    torch's op namespaces) refuse as :class:`RefusedWhileRunning` does; missing ones are skipped."""

    def __init__(self, *places: tuple[object, str]):
        self.places = [(owner, name) for owner, name in places if hasattr(owner, name)]
        self.saved: list = []

    def __enter__(self):
        self.saved = [getattr(owner, name) for owner, name in self.places]
        for owner, name in self.places:
            setattr(owner, name, _refuse)
        return self

    def __exit__(self, *exc):
        for (owner, name), original in zip(self.places, self.saved):
            setattr(owner, name, original)
        return False


def called_the_reference(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is a refused call of a reference."""
    while exc is not None:
        if isinstance(exc, RuntimeError) and REFUSED in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class RecordedSends:
    """While active, every point-to-point send this rank makes records ``(peer, elements,
    bytes)`` in ``sends``, then goes as before. ``dist.send``, ``isend``, ``batch_isend_irecv``
    and the group's own ``send`` all reach the ``send`` of the process group's class or its
    backend's, so a function bound before the check (``from torch.distributed import isend``)
    is recorded too. Lesson 02's ring check reads the peers, lesson 03's the bytes."""

    def __init__(self):
        self.sends: list[tuple[int, int, int]] = []
        self.saved: list[tuple[type, object]] = []

    @property
    def bytes(self) -> int:
        """All bytes sent while active."""
        return sum(nbytes for _, _, nbytes in self.sends)

    def _record(self, send):
        def recorded(obj, tensors, dst, *args, **kwargs):
            self.sends.append((dst, sum(t.numel() for t in tensors),
                               sum(t.nbytes for t in tensors)))
            return send(obj, tensors, dst, *args, **kwargs)
        return recorded

    def __enter__(self):
        group = dist.group.WORLD
        for cls in {type(group), type(group._get_backend(torch.device("cpu")))}:
            owner = next((c for c in cls.__mro__ if "send" in vars(c)), None)
            if owner is not None and all(owner is not saved for saved, _ in self.saved):
                self.saved.append((owner, vars(owner)["send"]))
                setattr(owner, "send", self._record(vars(owner)["send"]))
        return self

    def __exit__(self, *exc):
        for owner, original in reversed(self.saved):
            setattr(owner, "send", original)
        self.saved.clear()
        return False
