"""What a learner sees: widgets and figures, above the runtime. Ranks never import this.

- ``panel``: :class:`RunPanel` (edit a spec, Run, Stop, live loss/throughput/memory);
- ``comparison``: :class:`Comparison` (speedup over one rank); ``series``: records to series;
- ``plots``: static figures of measured summaries; ``pipeline``: Gantt charts and bubbles;
- ``sharding``: lesson 03's board; ``planner``: lesson 08's widget and calibration chart;
- ``compression``: lesson 07's trade-off figures; ``one_device``, ``roofline`` and
  ``profile_view``: lesson 01c's figures; ``long_context``, ``moe``: lessons 10 and 11's.

``set_language("zh")`` makes the widgets, figures and exercise checkers speak Simplified
Chinese (``gpututor.i18n``); the Chinese lessons call it in their first code cell. In IPython it
also adds, under a bad-input error raised by gpututor in a code cell, its frame in Chinese
(``errors``).
"""
from .. import i18n
from ..i18n import language
from .errors import follow_language

__all__ = ["language", "set_language"]


def set_language(language: str) -> None:
    """Speak ``language`` ("en" or "zh") in this kernel's widgets, figures and checkers, and (in
    IPython) in the frame of the bad-input errors its code cells raise."""
    i18n.set_language(language)
    try:
        from IPython import get_ipython
    except ImportError:   # plain Python: no cells to show errors in
        return
    follow_language(get_ipython())
