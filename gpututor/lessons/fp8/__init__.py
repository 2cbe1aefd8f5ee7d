"""Lesson 06b (``notebooks/06b_fp8.ipynb``): FP8 training on any machine: the small GPT in fp32,
bf16 and three FP8 recipes from scratch and torchao's, where values overflow or flush, the bytes
of FP8 weights, and the learner's own scale-and-cast."""
