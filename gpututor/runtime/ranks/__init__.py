"""Persistent ranks behind notebook cells: ``gpututor.ranks(4)`` and, after
``%load_ext gpututor``, the ``%ranks`` / ``%%ranks`` magics (``magic.py``).

``group.py`` holds the group in the kernel, ``lifecycle.py`` starts its ranks' processes and ends
them, ``rank.py`` is what each rank runs, ``replies.py`` is the messages between them (each reply
names its request), ``stacks.py`` reads where a rank that does not answer waits, ``checks.py``
what a group may be asked for (how many ranks here), ``view.py`` draws a cell's outcome one
column per rank. The magics import IPython; nothing else here does, so a rank (which imports
``rank.py``) loads no front-end code.
"""
from .group import CellInterrupted, RankGroup, ranks
from .view import CellResult, RankOutcome

__all__ = ["CellInterrupted", "CellResult", "RankGroup", "RankOutcome", "ranks"]
