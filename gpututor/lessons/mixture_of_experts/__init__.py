"""Lesson 11 (``notebooks/11_mixture_of_experts.ipynb``): the expert-load and dispatch figures, the
verdicts and tables of its results, and the lesson's exercise checkers.
"""
