"""What every lesson shows: widgets and figures, above the runtime. Ranks never import this.

- ``panel``: :class:`RunPanel` (edit a spec, Run, Stop, live loss/throughput/memory);
- ``comparison``: :class:`Comparison` (speedup over one rank); ``series``: records to series;
- ``follow``: the one follower that reads a run's records for a widget; ``live_figure``: the
  figure it redraws; ``plots``: static figures of measured summaries; ``errors``: a bad-input
  error's frame in the notebook's language.

A lesson's own figures and widgets live in its folder (``gpututor.lessons.<name>.figures``).

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
