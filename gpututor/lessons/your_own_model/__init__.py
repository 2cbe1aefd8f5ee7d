"""Lesson 03b (``notebooks/03b_your_own_model.ipynb``): the learner's own model wrapped with each
from-scratch piece and its production counterpart, trained in real ranks; the exercise checker."""
