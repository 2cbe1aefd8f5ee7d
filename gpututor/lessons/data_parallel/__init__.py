"""Lesson 02 (``notebooks/02_data_parallel.ipynb``): its exercise checkers.

``exercises.py`` checks the exercises; ``buckets.py`` reads the buckets DDP recorded in a run;
``machine.py`` chooses the words about backends and the world sizes from the run's device.
"""
