"""Lesson 01 (``notebooks/01_single_device.ipynb``): its exercise checkers.
"""
