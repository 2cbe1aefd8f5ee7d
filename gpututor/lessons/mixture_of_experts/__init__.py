"""Lesson 11 (``notebooks/11_mixture_of_experts.ipynb``): the expert-load figures and the lesson's
exercise checkers.
"""
