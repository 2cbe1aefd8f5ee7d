"""Running ranks: ``worker.py`` (what one rank does, under ``launch()`` and under torchrun),
``launcher.py`` (``launch()`` and the :class:`Run` handle), ``warm.py`` (the forkserver, started
early in a kernel), ``kernel.py`` (the lessons' Jupyter kernel, which starts it at kernel start),
``summary.py`` (records to the JSON summary), ``bench.py`` (launched benchmarks), ``cli.py``
(``python -m gpututor``)."""
