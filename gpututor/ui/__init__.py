"""What a learner sees: widgets and figures, above the runtime. Ranks never import this.

- ``panel``: :class:`RunPanel` (edit a spec, Run, Stop, live loss/throughput/memory);
- ``comparison``: :class:`Comparison` (speedup over one rank); ``series``: records to series;
- ``plots``: static figures of measured summaries; ``pipeline``: Gantt charts and bubbles;
- ``sharding``: lesson 03's board; ``planner``: lesson 08's widget and calibration chart;
- ``compression``: lesson 07's trade-off figures; ``one_device``, ``roofline`` and
  ``profile_view``: lesson 01c's figures; ``long_context``, ``moe``: lessons 10 and 11's.

``set_language("zh")`` makes the widgets, figures and exercise checkers speak Simplified
Chinese (``gpututor.i18n``); the Chinese lessons call it in their first code cell.
"""
from ..i18n import language, set_language

__all__ = ["language", "set_language"]
