"""Per-lesson helpers, above the runtime: sweeps, the step's anatomy, the planner's calibration,
exercise checkers (``exercises.py``: every ``check_*``), and tasks that run in ranks.

Nothing here imports ``gpututor.ui`` (plots, widgets): a task defined here runs inside ranks,
and a rank imports no plotting or widget code. Notebooks import from both.
"""
