"""Lesson 12 (``notebooks/12_failures_at_scale.ipynb``): the tables and verdicts of its runs, the
lost-work and checkpoint figures and the lesson's exercise checkers.
"""
