"""Lesson 10 (``notebooks/10_long_context.ipynb``): ring attention and activations in real ranks,
their figures, the verdicts and tables of its results, and the lesson's exercise checkers.
"""
