"""Lesson 13 (``notebooks/13_cutting_communication.ipynb``): the levers that cut communication,
run side by side on one emulated link (``levers``), what each showed (``verdicts``), the
trade-off figure (``figures``) and the exercise checker, DiLoCo's outer step (``exercises``)."""
