"""Lesson 09 (``notebooks/09_composing_parallelisms.ipynb``): its runs and the planner's answers
as tables and verdicts, the rank-grid figures, and the lesson's exercise checkers.
"""
