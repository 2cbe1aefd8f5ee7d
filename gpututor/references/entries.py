"""What a cited work and each use of it hold (data only)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    authors: str   # as a citation names them: "Korthikanti et al.", "Young"
    year: int
    title: str
    url: str


@dataclass(frozen=True)
class Use:
    source: str     # a key of WORKS
    where: str      # "§5", "Table 2", "eq. 3", "Figure 4"
    supports: str   # what the source says there, quoted or closely paraphrased
