"""Lesson 05 (``notebooks/05_pipeline_parallel.ipynb``): the measured bubble's parts, the verdicts
and tables of its results, the Gantt charts, and the lesson's exercise checkers.
"""
