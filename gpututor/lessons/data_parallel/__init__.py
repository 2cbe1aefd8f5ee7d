"""Lesson 02 (``notebooks/02_data_parallel.ipynb``): its exercise checkers.
"""
