"""Every source the lessons and the package cite, once, with the exact place each use relies on.

A lesson cites by key, as a Markdown link whose title names the key::

    [Korthikanti et al. 2022, §5](https://arxiv.org/abs/2205.05198 "ref:korthikanti2022-selective")

The link text is :func:`cite` of the key (authors, year and the section, table or figure), the
target the source's address; code cites with ``[ref: key]`` beside the words it supports.
``tests/test_references.py`` fails on an unknown key, an unused key, a link whose text or address
differs from its entry, and a citation written by hand without a key. ``python -m
gpututor.references`` writes ``docs/references.md``, the page a learner reads them on.

Each :class:`Use` says where in the source (``where``) and what it supports (``supports``: the
source's sentence or number, quoted or closely paraphrased), checked against the source's text.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Source:
    authors: str   # as a citation names them: "Korthikanti et al.", "Young"
    year: int
    title: str
    url: str


@dataclass(frozen=True)
class Use:
    source: str     # a key of SOURCES
    where: str      # "§5", "Table 2", "eq. 3", "Figure 4"
    supports: str   # what the source says there, quoted or closely paraphrased


SOURCES: dict[str, Source] = {
    "korthikanti2022": Source("Korthikanti et al.", 2022,
                              "Reducing Activation Recomputation in Large Transformer Models",
                              "https://arxiv.org/abs/2205.05198"),
    "dao2022": Source("Dao et al.", 2022, "FlashAttention: Fast and Memory-Efficient Exact "
                      "Attention with IO-Awareness", "https://arxiv.org/abs/2205.14135"),
    "dao2023": Source("Dao", 2023, "FlashAttention-2: Faster Attention with Better Parallelism "
                      "and Work Partitioning", "https://arxiv.org/abs/2307.08691"),
    "dubey2024": Source("Dubey et al.", 2024, "The Llama 3 Herd of Models",
                        "https://arxiv.org/abs/2407.21783"),
    "hinton2015": Source("Hinton et al.", 2015, "Distilling the Knowledge in a Neural Network",
                         "https://arxiv.org/abs/1503.02531"),
    "shoeybi2019": Source("Shoeybi et al.", 2019, "Megatron-LM: Training Multi-Billion Parameter "
                          "Language Models Using Model Parallelism",
                          "https://arxiv.org/abs/1909.08053"),
    "rajbhandari2020": Source("Rajbhandari et al.", 2020, "ZeRO: Memory Optimizations Toward "
                              "Training Trillion Parameter Models",
                              "https://arxiv.org/abs/1910.02054"),
}

USES: dict[str, Use] = {
    "korthikanti2022-activations": Use(
        "korthikanti2022", "§4.1",
        "the activation memory of one transformer layer is s·b·h·(34 + 5·a·s/h) bytes, counted "
        "for 16-bit activations with dropout (one byte per dropout mask element)"),
    "korthikanti2022-tp-sp": Use(
        "korthikanti2022", "§4.2",
        "tensor parallelism and sequence parallelism: the LayerNorm and dropout activations "
        "split along the sequence, with all-gather / reduce-scatter in place of all-reduce"),
    "korthikanti2022-selective": Use(
        "korthikanti2022", "§5",
        "selective activation recomputation: keep most activations, recompute only the "
        "attention core (QKᵀ, softmax, softmax dropout, attention over V), whose memory grows "
        "with s²; the 5·a·s/h term disappears"),
    "dao2022-io": Use(
        "dao2022", "§3.1",
        "FlashAttention computes exact attention in tiles held in SRAM with the softmax "
        "statistics m and ℓ rescaled block by block; the backward recomputes S and P, so it "
        "does more FLOPs than standard attention yet runs faster because it reads and writes "
        "far less HBM"),
    "dao2023-loop-order": Use(
        "dao2023", "§3.1–3.2",
        "FlashAttention-2 puts the loop over query blocks outside, keeps one log-sum-exp per row "
        "for the backward instead of both m and ℓ, and rescales the output once at the end"),
    "dubey2024-interruptions": Use(
        "dubey2024", "§3.3.4, Table 5",
        "in a 54-day snapshot of pre-training there were 466 job interruptions, 419 of them "
        "unexpected; faulty GPUs caused 30.1 % and GPU HBM3 memory 17.2 % (GPU-related issues "
        "58.7 % of the unexpected ones); 16,384 H100 GPUs"),
    "hinton2015-temperature": Use(
        "hinton2015", "§2",
        "a softmax at a higher temperature T produces a softer probability distribution over "
        "classes; the student is trained on the teacher's soft targets at the same high T, and "
        "the soft-target gradients are scaled by T²"),
    "shoeybi2019-vocab": Use(
        "shoeybi2019", "§3",
        "the input embedding matrix is split along the vocabulary dimension, and the output "
        "embedding GEMM is fused with the cross-entropy loss, so the head is split by "
        "vocabulary too"),
    "rajbhandari2020-volume": Use(
        "rajbhandari2020", "§7",
        "with a reduce-scatter and an all-gather each moving Ψ elements, data parallelism moves "
        "2Ψ per step; ZeRO stages 1 and 2 move 2Ψ too, stage 3 moves 3Ψ (an all-gather in the "
        "forward and again in the backward, a reduce-scatter of gradients)"),
}


def cite(key: str) -> str:
    """The words a lesson shows for ``key``: "Korthikanti et al. 2022, §5"."""
    use = USES[key]
    source = SOURCES[use.source]
    return f"{source.authors} {source.year}, {use.where}"


def link(key: str) -> str:
    """The Markdown a lesson writes for ``key`` (the link text, the source, the key)."""
    return f'[{cite(key)}]({SOURCES[USES[key].source].url} "ref:{key}")'


def page() -> str:
    """``docs/references.md``: each source once, with the uses the lessons and code rely on."""
    lines = ["# References", "",
             "Every source the lessons and `gpututor` cite, with the place each citation relies "
             "on and what it says there. Written by `python -m gpututor.references` from "
             "`gpututor/references.py`; do not edit by hand.", ""]
    for name, source in sorted(SOURCES.items(), key=lambda kv: (kv[1].authors, kv[1].year)):
        lines += [f"## {source.authors} {source.year}: {source.title}", "",
                  f"<{source.url}>", ""]
        for key, use in sorted(USES.items()):
            if use.source == name:
                lines.append(f"- <a id=\"{key}\"></a>**{use.where}** (`{key}`): {use.supports}")
        lines.append("")
    return "\n".join(lines)


PAGE = Path(__file__).resolve().parent.parent / "docs" / "references.md"


def main() -> int:
    PAGE.write_text(page(), encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
