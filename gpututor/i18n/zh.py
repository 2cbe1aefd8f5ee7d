"""Simplified Chinese for what the widgets, figures and checkers show (English template ->
Chinese), in one table ``ZH`` merged from one module per part of the package:

- ``zh_ui``: the widgets (run panel, comparison, sharding board, planner) and their sentences;
- ``zh_figures``: the figures of ``gpututor/ui``, and the titles the notebooks pass to them;
- ``zh_checks``, ``zh_checks_b``: the exercise checkers' messages and questions;
- ``zh_prints_a``, ``zh_prints_b``: the sentences lessons print with ``say()``;
- ``zh_ranks``: what the persistent ranks (``%%ranks``) say;
- ``zh_plan``: what the planner says (an estimate's reasons, a recommendation's notes and table);
- ``zh_failures``: lesson 12's printed sentences, figures and checkers.

The terms follow the glossary of the Chinese lessons (``notebooks/zh/glossary.md``); units,
numbers and code names (strategies, fields, ``cp=2``) stay as they are.
"""
from .zh_checks import CHECKS
from .zh_checks_b import CHECKS_B
from .zh_failures import FAILURES
from .zh_figures import FIGURES
from .zh_plan import PLAN
from .zh_prints_a import PRINTS_A
from .zh_prints_b import PRINTS_B
from .zh_ranks import RANKS
from .zh_ui import UI

PARTS = (UI, FIGURES, CHECKS, CHECKS_B, PRINTS_A, PRINTS_B, RANKS, PLAN, FAILURES)
ZH = {english: chinese for part in PARTS for english, chinese in part.items()}
