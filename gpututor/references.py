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
    # lessons 05, 06, 08, 09, the pipeline and the planner
    "huang2019": Source("Huang et al.", 2019, "GPipe: Efficient Training of Giant Neural Networks "
                        "using Pipeline Parallelism", "https://arxiv.org/abs/1811.06965"),
    "qi2024": Source("Qi et al.", 2024, "Zero Bubble Pipeline Parallelism (ICLR 2024)",
                     "https://arxiv.org/abs/2401.10241"),
    "micikevicius2018": Source("Micikevicius et al.", 2018, "Mixed Precision Training",
                               "https://arxiv.org/abs/1710.03740"),
    "chowdhery2022": Source("Chowdhery et al.", 2022, "PaLM: Scaling Language Modeling with "
                            "Pathways", "https://arxiv.org/abs/2204.02311"),
    "hoffmann2022": Source("Hoffmann et al.", 2022, "Training Compute-Optimal Large Language "
                           "Models", "https://arxiv.org/abs/2203.15556"),
    "touvron2023": Source("Touvron et al.", 2023, "Llama 2: Open Foundation and Fine-Tuned Chat "
                          "Models", "https://arxiv.org/abs/2307.09288"),
    "torchtitan2024": Source("torchtitan", 2024, "Llama 3.1 performance benchmarks on H100s "
                             "(pytorch/torchtitan, benchmarks/llama3_h100_202412_torchtitan.md)",
                             "https://github.com/pytorch/torchtitan/blob/main/benchmarks/"
                             "llama3_h100_202412_torchtitan.md"),
    "li2020": Source("Li et al.", 2020, "PyTorch Distributed: Experiences on Accelerating Data "
                     "Parallel Training", "https://arxiv.org/abs/2006.15704"),
    "kaplan2020": Source("Kaplan et al.", 2020, "Scaling Laws for Neural Language Models",
                         "https://arxiv.org/abs/2001.08361"),
    "radford2019": Source("Radford et al.", 2019, "Language Models are Unsupervised Multitask "
                          "Learners", "https://cdn.openai.com/better-language-models/"
                          "language_models_are_unsupervised_multitask_learners.pdf"),
    "brown2020": Source("Brown et al.", 2020, "Language Models are Few-Shot Learners",
                        "https://arxiv.org/abs/2005.14165"),
    "thakur2005": Source("Thakur et al.", 2005, "Optimization of Collective Communication "
                         "Operations in MPICH", "https://doi.org/10.1177/1094342005051521"),
    "lepikhin2021": Source("Lepikhin et al.", 2021, "GShard: Scaling Giant Models with "
                           "Conditional Computation and Automatic Sharding",
                           "https://arxiv.org/abs/2006.16668"),
    "dao2022": Source("Dao et al.", 2022, "FlashAttention: Fast and Memory-Efficient Exact "
                      "Attention with IO-Awareness", "https://arxiv.org/abs/2205.14135"),
    "dao2023": Source("Dao", 2023, "FlashAttention-2: Faster Attention with Better Parallelism "
                      "and Work Partitioning", "https://arxiv.org/abs/2307.08691"),
    # lesson 01b
    "milakov2018": Source("Milakov & Gimelshein", 2018, "Online normalizer calculation for "
                          "softmax", "https://arxiv.org/abs/1805.02867"),
    "dettmers2022": Source("Dettmers et al.", 2022, "8-bit Optimizers via Block-wise "
                           "Quantization (ICLR 2022)", "https://arxiv.org/abs/2110.02861"),
    "ren2021": Source("Ren et al.", 2021, "ZeRO-Offload: Democratizing Billion-Scale Model "
                      "Training (USENIX ATC 2021)", "https://arxiv.org/abs/2101.06840"),
    "dubey2024": Source("Dubey et al.", 2024, "The Llama 3 Herd of Models",
                        "https://arxiv.org/abs/2407.21783"),
    # lesson 12 and gpututor/plan/interruptions.py
    "young1974": Source("Young", 1974, "A first order approximation to the optimum checkpoint "
                        "interval (Communications of the ACM 17(9), 530–531)",
                        "https://doi.org/10.1145/361147.361115"),
    "daly2006": Source("Daly", 2006, "A higher order estimate of the optimum checkpoint interval "
                       "for restart dumps (Future Generation Computer Systems 22(3), 303–312)",
                       "https://doi.org/10.1016/j.future.2004.11.016"),
    "pandya2024": Source("Pandya and Wang", 2024, "(prototype) Flight Recorder for Debugging "
                         "Stuck Jobs (PyTorch tutorial)",
                         "https://docs.pytorch.org/tutorials/prototype/flight_recorder_tutorial.html"),
    "hinton2015": Source("Hinton et al.", 2015, "Distilling the Knowledge in a Neural Network",
                         "https://arxiv.org/abs/1503.02531"),
    "shoeybi2019": Source("Shoeybi et al.", 2019, "Megatron-LM: Training Multi-Billion Parameter "
                          "Language Models Using Model Parallelism",
                          "https://arxiv.org/abs/1909.08053"),
    "rajbhandari2020": Source("Rajbhandari et al.", 2020, "ZeRO: Memory Optimizations Toward "
                              "Training Trillion Parameter Models",
                              "https://arxiv.org/abs/1910.02054"),
    # lesson 03: PyTorch's and Megatron Core's documentation pages
    "pytorch-fsdp2": Source("PyTorch docs", 2024, "torch.distributed.fsdp.fully_shard (FSDP2)",
                            "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html"),
    "pytorch-dtensor": Source("PyTorch docs", 2025, "torch.distributed.tensor (DTensor)",
                              "https://docs.pytorch.org/docs/stable/distributed.tensor.html"),
    "megatron-core-distopt": Source("Megatron Core docs", 2024, "Distributed Optimizer",
                                    "https://docs.nvidia.com/megatron-core/developer-guide/"
                                    "latest/api-guide/dist_optimizer.html"),
    "narayanan2021": Source("Narayanan et al.", 2021, "Efficient Large-Scale Language Model "
                            "Training on GPU Clusters Using Megatron-LM",
                            "https://arxiv.org/abs/2104.04473"),
    "liu2023": Source("Liu et al.", 2023, "Ring Attention with Blockwise Transformers for "
                      "Near-Infinite Context", "https://arxiv.org/abs/2310.01889"),
    "brandon2023": Source("Brandon et al.", 2023, "Striped Attention: Faster Ring Attention for "
                          "Causal Transformers", "https://arxiv.org/abs/2311.09431"),
    "mishra2021": Source("Mishra et al.", 2021, "Accelerating Sparse Deep Neural Networks",
                         "https://arxiv.org/abs/2104.08378"),
    "wang2023": Source("Wang et al.", 2023, "Overlap Communication with Dependent Computation via "
                       "Decomposition in Large Deep Learning Models (ASPLOS 2023)",
                       "https://doi.org/10.1145/3567955.3567959"),
    "wang2024": Source("Wang et al.", 2024, "[Distributed w/ TorchTitan] Introducing Async Tensor "
                       "Parallelism in PyTorch (PyTorch forum post)",
                       "https://discuss.pytorch.org/t/distributed-w-torchtitan-introducing-async-"
                       "tensor-parallelism-in-pytorch/209487"),
    # lessons 01, 01c, 11, gpututor/moe.py, formulas.py, measure/flops.py
    "fedus2021": Source("Fedus et al.", 2021, "Switch Transformers: Scaling to Trillion "
                        "Parameter Models with Simple and Efficient Sparsity",
                        "https://arxiv.org/abs/2101.03961"),
    "shazeer2017": Source("Shazeer et al.", 2017, "Outrageously Large Neural Networks: The "
                          "Sparsely-Gated Mixture-of-Experts Layer",
                          "https://arxiv.org/abs/1701.06538"),
    "jiang2024": Source("Jiang et al.", 2024, "Mixtral of Experts",
                        "https://arxiv.org/abs/2401.04088"),
    "mistral2023": Source("Mistral AI", 2023, "Mixtral of experts (announcement)",
                          "https://mistral.ai/news/mixtral-of-experts/"),
    "williams2009": Source("Williams et al.", 2009, "Roofline: An Insightful Visual Performance "
                           "Model for Multicore Architectures (CACM 52(4))",
                           "https://doi.org/10.1145/1498765.1498785"),
    "ansel2024": Source("Ansel et al.", 2024, "PyTorch 2: Faster Machine Learning Through Dynamic "
                        "Python Bytecode Transformation and Graph Compilation (ASPLOS 2024)",
                        "https://doi.org/10.1145/3620665.3640366"),
    "patarasuk2009": Source("Patarasuk & Yuan", 2009, "Bandwidth Optimal All-reduce Algorithms "
                            "for Clusters of Workstations (JPDC 69(2))",
                            "https://doi.org/10.1016/j.jpdc.2008.09.002"),
    "hockney1994": Source("Hockney", 1994, "The Communication Challenge for MPP: Intel Paragon "
                          "and Meiko CS-2 (Parallel Computing 20(3))",
                          "https://doi.org/10.1016/S0167-8191(06)80021-9"),
    "vogels2019": Source("Vogels et al.", 2019, "PowerSGD: Practical Low-Rank Gradient "
                         "Compression for Distributed Optimization",
                         "https://arxiv.org/abs/1905.13727"),
    "mccandlish2018": Source("McCandlish et al.", 2018, "An Empirical Model of Large-Batch "
                             "Training", "https://arxiv.org/abs/1812.06162"),
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
    # lessons 05, 06, 08, 09, the pipeline and the planner
    "korthikanti2022-sequence-parallel": Use(
        "korthikanti2022", "§4.2.2",
        "sequence parallelism splits the LayerNorm and dropout regions along the sequence; "
        "tensor parallel's all-reduce becomes a reduce-scatter and an all-gather (g and ḡ) of "
        "the same bytes, and the layer's activations become s·b·h·(34 + 5·a·s/h)/t"),
    "korthikanti2022-pipeline": Use(
        "korthikanti2022", "§4.2.3",
        "with pipeline parallelism the first stage, which 1F1B leaves with p micro-batches in "
        "flight of L/p layers each, holds the activations of L layers whatever p is; the "
        "output layer and the loss add their own (§4.3)"),
    "korthikanti2022-mfu-hfu": Use(
        "korthikanti2022", "§6.3",
        "end-to-end results reported as model FLOPs utilization (the model's FLOPs) and "
        "hardware FLOPs utilization (the FLOPs executed, recomputation included); the 530B "
        "model on 2240 A100s reaches 54.2 % MFU, against 42.1 % with full recomputation "
        "(figures of the abstract; the section number not checked against the text)"),
    "huang2019-bubble": Use(
        "huang2019", "§2.3",
        "with K partitions and M micro-batches the bubble is O((K−1)/(M+K−1)) of the time, "
        "amortised over the micro-steps, and was negligible when M ≥ 4·K; each partition runs "
        "the forwards of all micro-batches, then their backwards (Figure 2)"),
    "narayanan2021-1f1b": Use(
        "narayanan2021", "§2.2.1",
        "GPipe's schedule and PipeDream-Flush's 1F1B (warm-up forwards, then one forward and one "
        "backward in turn, then the remaining backwards) idle the same bubble, (p−1)/m of the "
        "ideal time; 1F1B keeps at most p micro-batches in flight instead of m"),
    "narayanan2021-interleaved": Use(
        "narayanan2021", "§2.2.2",
        "interleaved schedule: each device holds v model chunks instead of one contiguous stage; "
        "the bubble shrinks by v, to (p−1)/(v·m) of the ideal time, for v times the "
        "communication; the micro-batches are a multiple of p"),
    "narayanan2021-end-to-end": Use(
        "narayanan2021", "§5.1",
        "end-to-end training time ≈ 8·T·P/(n·X) for T tokens, P parameters, n GPUs at X FLOP/s "
        "each: with activation recomputation about 8 FLOPs per parameter per token, attention "
        "left out (section number from memory, not checked against the text)"),
    "qi2024-split-backward": Use(
        "qi2024", "§2",
        "the backward is split into B (the gradient of the stage's input, which the previous "
        "stage waits for) and W (the gradient of its weights, which can run any time after its "
        "B); handcrafted schedules ZB-H1 (1F1B's memory, about a third of its bubble) and ZB-H2 "
        "(zero bubble, more memory), assuming F, B and W take equal times"),
    "qi2024-times": Use(
        "qi2024", "§3",
        "with F, B and W of unequal times (as measured), the bubble a schedule leaves depends on "
        "them; an automatic scheduler takes the profiled times and memory limit and searches a "
        "schedule"),
    "micikevicius2018-master-weights": Use(
        "micikevicius2018", "§3.1",
        "an FP32 master copy of the weights accumulates the updates; FP16 weights, activations "
        "and gradients are used in forward and backward; an update much smaller than its weight "
        "(ratio below 2⁻¹¹) becomes zero when added in FP16"),
    "micikevicius2018-loss-scaling": Use(
        "micikevicius2018", "§3.2",
        "scaling the loss scales every gradient into FP16's range; gradients are unscaled before "
        "the update; when an overflow (inf/NaN) is detected the weight update can be skipped and "
        "training goes on with the next iteration"),
    "rajbhandari2020-model-states": Use(
        "rajbhandari2020", "§3.1",
        "mixed-precision Adam keeps fp16 parameters and gradients (2Ψ + 2Ψ bytes) and an fp32 "
        "copy of the parameters, momentum and variance (KΨ, K = 12): 16Ψ bytes in all"),
    "rajbhandari2020-stages": Use(
        "rajbhandari2020", "Figure 1, Table 1",
        "per-device model states over N_d data-parallel GPUs: (2 + 2 + K)Ψ, then 2Ψ + 2Ψ + KΨ/N_d "
        "(P_os), 2Ψ + (2 + K)Ψ/N_d (P_os+g), (2 + 2 + K)Ψ/N_d (P_os+g+p); Ψ = 7.5B, N_d = 64: "
        "120 GB, 31.4 GB, 16.6 GB, 1.88 GB"),
    "dao2022-memory": Use(
        "dao2022", "§3.1",
        "FlashAttention does not store the N×N matrices S and P for the backward (it recomputes "
        "them from Q, K, V and the softmax statistics): O(N) extra memory beyond inputs and "
        "output (Theorem 1)"),
    "dao2023-causal": Use(
        "dao2023", "§3.1.1, §4.1",
        "with a causal mask the blocks whose columns all lie past the row block are skipped, "
        "about half of them for long sequences; the benchmarks count causal attention's FLOPs as "
        "half of the full 4·seqlen²·head_dim·heads"),
    "chowdhery2022-flops": Use(
        "chowdhery2022", "Appendix B",
        "training FLOPs per token, used for model FLOPs utilization: 6N for the parameters plus "
        "12·L·H·Q·T for self-attention (L layers, H heads, Q head dimension, T sequence length)"),
    "chowdhery2022-mfu": Use(
        "chowdhery2022", "§4.1",
        "PaLM 540B trained at 46.2 % model FLOPs utilization (238.3K tokens/s) and 57.8 % "
        "hardware FLOPs utilization, which counts rematerialization"),
    "hoffmann2022-tokens": Use(
        "hoffmann2022", "Table 3",
        "the compute-optimal number of training tokens grows with model size at about 20 tokens "
        "per parameter (1B parameters: 20.2B tokens; 10B: 205.1B)"),
    "touvron2023-models": Use(
        "touvron2023", "Table 1",
        "Llama 2 7B, 13B, 34B, 70B: context 4k, 2.0T pretraining tokens, all trained with a "
        "global batch of 4M tokens; 34B and 70B use grouped-query attention"),
    "touvron2023-gpu-hours": Use(
        "touvron2023", "Table 2",
        "pretraining time on A100-80GB: 7B 184,320 GPU-hours, 13B 368,640, 70B 1,720,320"),
    "touvron2023-hardware": Use(
        "touvron2023", "§2.2.1",
        "Meta's Research Super Cluster (InfiniBand) and a production cluster (RoCE), both A100s "
        "with 200 Gbps end-points; per-GPU power caps of 400 W and 350 W"),
    "torchtitan2024-llama3-8b": Use(
        "torchtitan2024", "Table 1",
        "Llama 3.1 8B on 8 H100s, FSDP, local batch 2, global batch 16, selective activation "
        "checkpointing: 5,762 tokens/s/GPU, 82.4 GiB; H100s of 96 GB HBM2e at a 500 W limit; "
        "33 % to 39 % MFU without Float8, understated (footnote 2: peak of the SXM H100 used)"),
    "li2020-overlap": Use(
        "li2020", "§3.2.3",
        "DDP launches a bucket's all-reduce as soon as all its gradients are ready, so "
        "communication overlaps the rest of the backward pass (gradient bucketing: §3.2.2)"),
    "dubey2024-4d-order": Use(
        "dubey2024", "§3.3.2",
        "4D parallelism ordered [TP, CP, PP, DP] for network communication: the innermost "
        "dimension needs the highest bandwidth and lowest latency and stays inside a server"),
    "kaplan2020-params": Use(
        "kaplan2020", "Table 1",
        "N ≈ 2·d_model·n_layer·(2·d_attn + d_ff) = 12·n_layer·d_model² with d_attn = d_ff/4 = "
        "d_model, embeddings left out"),
    "radford2019-sizes": Use(
        "radford2019", "Table 2, §2.3",
        "the largest GPT-2: 1542M parameters, 48 layers, d_model 1600; context of 1024 tokens"),
    "brown2020-sizes": Use(
        "brown2020", "Table 2.1",
        "GPT-3 6.7B: 32 layers, d_model 4096, 32 heads, batch 2M tokens; 175B: 96 layers, "
        "d_model 12288, 96 heads, batch 3.2M tokens; context 2048 for every size"),
    "thakur2005-alltoall": Use(
        "thakur2005", "Alltoall algorithms",
        "for long messages MPICH's all-to-all is a pairwise exchange: p−1 steps, each process "
        "sending to and receiving from one peer (cost model α + n·β per message; not checked "
        "against the text)"),
    "lepikhin2021-alltoall": Use(
        "lepikhin2021", "§3",
        "with the experts sharded over devices, the MoE layer's dispatch and combine of tokens "
        "are AllToAll collectives (section-level pointer; not checked against the text)"),
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
    "dao2022-flops": Use(
        "dao2022", "§3.2, Figure 2",
        "even though FlashAttention has a higher FLOP count than standard attention (due to "
        "recomputation in the backward pass), it has far fewer HBM accesses and runs faster: "
        "GPT-2 medium, seq. length 1024, on an A100, 75.2 against 66.6 GFLOPs, 4.4 against "
        "40.3 GB read and written, 7.3 against 41.7 ms (Theorem 2 bounds the HBM accesses)"),
    "dao2023-matmuls": Use(
        "dao2023", "§4.1",
        "the forward pass has 2 matmuls and the backward 5, due to recomputation, so the "
        "backward's FLOPs are counted as 2.5 times the forward's"),
    "milakov2018-online": Use(
        "milakov2018", "§3",
        "the online normalizer: one pass over a vector keeps a running maximum and a running "
        "sum of exponentials, rescaling the sum by exp(old max − new max) when the maximum "
        "rises (section from the paper's structure; not checked against the text)"),
    "dettmers2022-blockwise": Use(
        "dettmers2022", "§2",
        "8-bit Adam: each state tensor in blocks of 2048, each block normalised by its absolute "
        "maximum and stored with a dynamic (non-linear) 8-bit code; both Adam states are "
        "quantized (section from the paper's structure; the block size and the code checked "
        "against summaries of the paper, not its text)"),
    "ren2021-offload": Use(
        "ren2021", "§4.1",
        "ZeRO-Offload on one GPU: fp16 parameters stay on the GPU for forward and backward; the "
        "fp16 gradients go to the CPU, which keeps the fp32 master weights and Adam's states and "
        "runs the update, and the updated fp16 parameters come back (checked against summaries "
        "of the paper, not its text)"),
    "dubey2024-interruptions": Use(
        "dubey2024", "§3.3.4, Table 5",
        "in a 54-day snapshot of pre-training there were 466 job interruptions: 47 planned "
        "(automated maintenance, operator-initiated changes) and 419 unexpected, of every cause; "
        "Table 5 classifies the 419 (faulty GPU 148, GPU HBM3 memory 72, software bug 54, "
        "network switch/cable 35, unplanned host maintenance 32, ...); \"GPU issues are the "
        "largest category, accounting for 58.7% of all unexpected issues\" (the sum of Table 5's "
        "GPU percentages; its GPU rows' counts add up to 268 of 419, 64 %, because the "
        "faulty-GPU row prints 30.1 % beside 148, which is 35.3 % of 419); about 78 % were "
        "confirmed or suspected hardware issues"),
    "dubey2024-synchronous": Use(
        "dubey2024", "§3.3.4",
        "\"the synchronous nature of training makes it less fault-tolerant—a single GPU failure "
        "may require a restart of the entire job\"; higher than 90 % effective training time"),
    "dubey2024-flight-recorder": Use(
        "dubey2024", "§3.3.4",
        "the team extensively used PyTorch's built-in NCCL flight recorder, which captures "
        "collective metadata and stack traces into a ring buffer, to diagnose hangs and "
        "performance issues quickly at scale, with traces dumped automatically on a watchdog or "
        "heartbeat timeout"),
    "dubey2024-cluster": Use(
        "dubey2024", "§3.3.1",
        "Llama 3 405B is trained on up to 16K H100 GPUs; the Tectonic storage fabric sustains "
        "2 TB/s (7 TB/s peak); checkpointing saves each GPU's model state, ranging from 1 MB to "
        "4 GB per GPU, and the aim is to minimize GPU pause time during checkpointing and to "
        "checkpoint more often to lose less work after a recovery"),
    "dubey2024-configs": Use(
        "dubey2024", "Table 4",
        "the scaling configurations of Llama 3 405B pre-training: 8,192 GPUs (TP 8, PP 16, "
        "DP 64) and twice 16,384 GPUs (DP 128 at 8K context; CP 16, DP 8 at 128K context)"),
    "young1974-interval": Use(
        "young1974", "pp. 530–531",
        "with failures a Poisson process of mean time between failures T_f and T_s to save a "
        "checkpoint, the time lost (saves before a failure, and the rerun since the last "
        "checkpoint) is smallest, to first order, at an interval T_c ≈ √(2·T_s·T_f) (read in "
        "the abstract and a summary: the full text was not reachable)"),
    "daly2006-interval": Use(
        "daly2006", "abstract, Figs. 3–5",
        "for Poisson single-component failures, a first-order model and then a perturbation "
        "solution of a more complete cost function give higher-order estimates of the optimum "
        "interval; with δ = 5 min, R = 10 min, the model predicts τopt = 117, 57 and 9.1 min for "
        "M = 24 h, 6 h and 15 min (Figs. 3–5; the formula itself was not read: the full text was "
        "not reachable, and the implementation reproduces these three values)"),
    "pandya2024-flight-recorder": Use(
        "pandya2024", "Enabling Flight Recorder; An End-to-End Example",
        "TORCH_NCCL_TRACE_BUFFER_SIZE=N keeps N entries in a circular buffer (2000 recommended), "
        "TORCH_NCCL_DUMP_ON_TIMEOUT writes one file per rank on a timeout, "
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE sets the file prefix, TORCH_NCCL_TRACE_CPP_STACK and "
        "TORCH_NCCL_ENABLE_TIMING are optional; `torchfrtrace --prefix \"trace_\" /tmp/` prints "
        "the collective not all ranks joined (\"missing ranks: {1}\"); the tutorial is listed "
        "as a prototype"),
    "hinton2015-temperature": Use(
        "hinton2015", "§2",
        "a softmax at a higher temperature T produces a softer probability distribution over "
        "classes; the student is trained on the teacher's soft targets at the same high T, and "
        "the soft-target gradients are scaled by T²"),
    "shoeybi2019-vocab": Use(
        "shoeybi2019", "§3",
        "the input embedding matrix is split along the vocabulary dimension, and the output "
        "embedding GEMM is fused with the cross-entropy loss, so the head is split by "
        "vocabulary too; worth it because vocabularies are tens of thousands of tokens "
        "(GPT-2's: 50,257); an all-reduce (g) follows the input embedding, and fusing the loss "
        "sends b×s losses instead of b×s×v logits"),
    "shoeybi2019-mlp-split": Use(
        "shoeybi2019", "§3",
        "splitting the MLP's first weight A by rows would need a synchronization before the GeLU "
        "(GeLU(X₁A₁ + X₂A₂) ≠ GeLU(X₁A₁) + GeLU(X₂A₂)); split by columns, each part's GeLU runs "
        "on its own, and the second GEMM, split by rows, takes its output directly with no "
        "communication; its output is reduced across the GPUs"),
    "shoeybi2019-f-g": Use(
        "shoeybi2019", "§3, Figure 3",
        "f is an identity in the forward pass and an all-reduce in the backward pass, g an "
        "all-reduce in the forward pass and an identity in the backward pass (Code 1 writes f "
        "as a torch.autograd.Function); attention is split by heads (Q, K, V column-parallel, "
        "the output layer row-parallel)"),
    "shoeybi2019-allreduces": Use(
        "shoeybi2019", "§3, Figure 4",
        "all GEMMs of a transformer layer with only two all-reduces in the forward path and two "
        "in the backward path: 4 communication operations per layer"),
    "shoeybi2019-replicated": Use(
        "shoeybi2019", "§3",
        "dropout, layer normalization and residual connections are duplicated on every GPU "
        "rather than computed by one and broadcast: each GPU keeps a copy of the layer norm "
        "parameters"),
    "narayanan2021-tp-in-node": Use(
        "narayanan2021", "§3.2",
        "Takeaway #1: tensor model parallelism should generally be used up to degree g on "
        "g-GPU servers, then pipeline parallelism across servers; each layer all-reduces "
        "8bsh(t−1)/t per device and microbatch, impractical over the slower inter-node links "
        "(shown empirically in §5.4)"),
    "liu2023-ring": Use(
        "liu2023", "§3",
        "each host holds one query block; key-value blocks travel around a ring of hosts, each "
        "sending its block to the next host and receiving from the previous one while it "
        "computes blockwise attention on the block it holds; if computing takes longer than "
        "the transfer, the communication adds no cost; blockwise attention merges the blocks' "
        "softmax statistics in any order"),
    "liu2023-block-size": Use(
        "liu2023", "§3",
        "'Arithmetic Intensity Between Hosts': a block of c tokens costs 4dc² FLOPs of attention "
        "against 4cd bytes of 16-bit keys and values, so the transfer is hidden when c ≥ F/B "
        "(F the host's FLOP/s, B the bandwidth between hosts)"),
    "dubey2024-context-parallel": Use(
        "dubey2024", "§3.3.2",
        "context parallelism splits the sequence into 2×CP chunks, the i-th CP rank taking "
        "chunks i and 2×CP−1−i for load balance; unlike ring implementations it all-gathers "
        "K and V, then computes attention for its local Q chunk"),
    "brandon2023-striped": Use(
        "brandon2023", "Abstract",
        "causal attention gives ring attention a workload imbalance; instead of contiguous "
        "subsequences each device holds a subset of tokens distributed uniformly through the "
        "sequence, which evens the workloads"),
    "mishra2021-2of4": Use(
        "mishra2021", "Abstract",
        "the NVIDIA Ampere architecture's Sparse Tensor Cores exploit a 2:4 (50 %) sparsity "
        "pattern for twice the math throughput of dense matrix units"),
    "wang2023-overlap": Use(
        "wang2023", "Abstract",
        "intra-layer model parallelism's communication can be a large share of the execution "
        "time; the collective and the computation that depends on it are decomposed into finer "
        "pieces so that communication overlaps computation"),
    "wang2024-async-tp": Use(
        "wang2024", "the post",
        "async tensor parallelism in PyTorch: a tensor-parallel collective and the matmul that "
        "depends on it are decomposed and overlapped; in torchtitan it requires torch.compile "
        "(checked against the post's title and torchtitan's code; its full text not reached)"),
    "rajbhandari2020-volume": Use(
        "rajbhandari2020", "§7",
        "with a reduce-scatter and an all-gather each moving Ψ elements, data parallelism moves "
        "2Ψ per step; ZeRO stages 1 and 2 move 2Ψ too, stage 3 moves 3Ψ (an all-gather in the "
        "forward and again in the backward, a reduce-scatter of gradients)"),
    "pytorch-fsdp2-contract": Use(
        "pytorch-fsdp2", "the user contract",
        "PyTorch FSDP2 provides a fully sharded data parallelism (FSDP) implementation; "
        "fully_shard converts parameters to DTensor; pre-forward/backward hooks all-gather the "
        "parameters, post-forward/backward hooks free the unsharded ones; fully_shard groups "
        "parameters together for a single all-gather, applied bottom-up"),
    "pytorch-dtensor-placements": Use(
        "pytorch-dtensor", "PyTorch DTensor (Distributed Tensor)",
        "a DTensor's layout is a DeviceMesh (the devices as an n-dimensional array) and a "
        "Placement per mesh dimension: Shard, Replicate or Partial; the module is in alpha"),
    "megatron-core-distopt-bytes": Use(
        "megatron-core-distopt", "the bytes-per-parameter table",
        "bytes per parameter without the distributed optimizer: 20 (fp16 parameters and "
        "gradients), 18 (bf16 parameters, fp32 gradients), 16 (fp32 both); with it over d "
        "data-parallel ranks 4 + 16/d, 6 + 12/d, 8 + 8/d; fp32 main parameters always"),
    # lessons 01, 01c, 11, gpututor/moe.py, formulas.py, measure/flops.py, precision/
    "kaplan2020-compute": Use(
        "kaplan2020", "§2.1",
        "a forward pass costs C_forward ≈ 2N + 2·n_layer·n_ctx·d_model add-multiply operations "
        "(the factor two from multiply-accumulate); the backward is about twice the forward, "
        "so training costs C ≈ 6N per token, context-dependent terms left out"),
    "chowdhery2022-mfu-defined": Use(
        "chowdhery2022", "§4.1",
        "model FLOPs utilization (MFU) is the observed throughput (tokens per second) over the "
        "theoretical maximum of a system at peak FLOPs, counting only the operations of the "
        "forward and backward passes, not rematerialization; hardware FLOPs utilization (HFU) "
        "counts the FLOPs executed; Appendix B gives the formula"),
    "narayanan2021-flops": Use(
        "narayanan2021", "Appendix (Floating-Point Operations)",
        "a transformer layer's forward is 24Bsh² + 4Bs²h FLOPs; the backward doubles it; "
        "activation recomputation adds another forward: 4 × (24Bsh² + 4Bs²h) = "
        "96Bsh²(1 + s/6h) per layer"),
    "korthikanti2022-table2": Use(
        "korthikanti2022", "§5, Table 2",
        "activation bytes per layer: no parallelism sbh(34 + 5as/h); tensor parallel "
        "sbh(10 + 24/t + 5as/(ht)); tensor + sequence parallel sbh(34/t + 5as/(ht)); with "
        "selective recomputation the 5as/… term goes; full recomputation 2sbh"),
    "fedus2021-top1": Use(
        "fedus2021", "§2.1",
        "Switch routing sends each token to a single expert (k = 1): less router computation, "
        "at least half the expert capacity and simpler communication; §2 grows the parameters "
        "while keeping the FLOPs per token constant"),
    "fedus2021-capacity": Use(
        "fedus2021", "§2.2, eq. 3",
        "expert capacity = (tokens per batch / number of experts) × capacity factor, for top-1 "
        "routing; a token routed to a full expert skips it and the residual connection passes "
        "its representation on"),
    "fedus2021-balance-loss": Use(
        "fedus2021", "eq. 4",
        "auxiliary loss α·N·Σ_i f_i·P_i, f_i the fraction of tokens dispatched to expert i "
        "(its argmax, one per token; not differentiable), P_i the fraction of router "
        "probability given to expert i; minimal under uniform routing"),
    "fedus2021-alpha": Use(
        "fedus2021", "§2.2",
        "α = 10⁻², 'sufficiently large to ensure load balancing while small enough to not to "
        "overwhelm the primary cross-entropy objective'; a sweep from 10⁻¹ to 10⁻⁵ found it "
        "balanced load quickly without interfering with training loss"),
    "fedus2021-padding": Use(
        "fedus2021", "§2.2, Figure 3",
        "each expert processes a fixed batch of (tokens / experts) × capacity factor; a larger "
        "capacity factor drops fewer tokens but increases computation and communication "
        "(padded, empty slots) and wastes memory"),
    "fedus2021-expert-parallel": Use(
        "fedus2021", "§5.4",
        "expert and data parallelism: each core holds its own expert and its share of the "
        "tokens; an all-to-all moves the dispatched [E, C, d_model] tensor so that it is "
        "sharded by expert, and the outputs travel back the same way"),
    "lepikhin2021-gating": Use(
        "lepikhin2021", "Algorithm 1",
        "top-2 gating: softmax gates, the top two renormalized (g1/(g1+g2)); a first pass over "
        "the group's tokens fills every token's first choice, a second pass the second "
        "choices, each while the expert's count is below its capacity"),
    "lepikhin2021-capacity": Use(
        "lepikhin2021", "§2.2",
        "with each token dispatched to at most two experts, the expert capacity is set to "
        "O(N/E); each of G groups gets 2N/(G·E) slots per expert; a token whose experts are "
        "both full passes on through the residual connection"),
    "lepikhin2021-random-routing": Use(
        "lepikhin2021", "§2.2",
        "random routing: the gate dispatches a token to its second-best expert with a "
        "probability proportional to that expert's weight g2 (2·g2 in Algorithm 1)"),
    "shazeer2017-moe": Use(
        "shazeer2017", "§2, §2.1",
        "a mixture-of-experts layer: n expert networks and a trainable gating network whose "
        "sparse output picks the experts a token uses; noisy top-k gating keeps the k largest "
        "values before the softmax"),
    "jiang2024-total": Use(
        "jiang2024", "Abstract",
        "Mixtral 8x7B: 8 feed-forward experts per layer, two selected per token; each token has "
        "access to 47B parameters and uses 13B active ones"),
    "jiang2024-shape": Use(
        "jiang2024", "Table 1",
        "dim 4096, n_layers 32, hidden_dim 14336, n_heads 32, n_kv_heads 8, num_experts 8, "
        "top_k_experts 2 (checked against the released config, the table's text not read)"),
    "mistral2023-mixtral": Use(
        "mistral2023", "the announcement",
        "Mixtral has 46.7B total parameters but uses only 12.9B parameters per token (checked "
        "against quotations of the page, not the page itself)"),
    "williams2009-roofline": Use(
        "williams2009", "the Roofline model",
        "attainable GFlops/s = min(peak floating-point performance, peak memory bandwidth × "
        "operational intensity), operational intensity being operations per byte of DRAM "
        "traffic; the ridge point is where the two roofs meet (checked against the authors' "
        "preprint as quoted, not the CACM text)"),
    "ansel2024-compile": Use(
        "ansel2024", "Abstract",
        "TorchDynamo rewrites Python bytecode to extract PyTorch operations into an FX graph; "
        "TorchInductor, the default backend, translates it into OpenAI's Triton for GPUs and "
        "C++ for CPUs (AOTAutograd's ahead-of-time backward is in the body; section not "
        "checked)"),
    "patarasuk2009-ring": Use(
        "patarasuk2009", "the ring algorithm",
        "the bandwidth-optimal all-reduce on a logical ring: a reduce-scatter then an "
        "all-gather, 2(p−1) steps each sending N/p, so each process sends 2(p−1)/p·N "
        "(checked against summaries of the paper, not its text)"),
    "hockney1994-model": Use(
        "hockney1994", "the (r∞, n½) model",
        "a point-to-point message of n bytes takes t(n) = t₀ + n/r∞: a start-up latency plus "
        "the bytes at the asymptotic bandwidth (the α-β model; checked against summaries, not "
        "the text)"),
    # lesson 02 and gpututor/parallel/link.py, data_parallel/
    "li2020-ddp": Use(
        "li2020", "abstract",
        "PyTorch's distributed data parallel module accelerates training with bucketing "
        "gradients, overlapping computation with communication, and skipping gradient "
        "synchronization; near-linear scalability on 256 GPUs when configured appropriately"),
    "li2020-no-sync": Use(
        "li2020", "§3.2.4",
        "gradient accumulation: inside no_sync() DDP skips the all-reduce and keeps "
        "accumulating gradients locally; the first backward outside it synchronizes them all "
        "(checked against summaries of the paper and DDP's documentation, not the text)"),
    "vogels2019-powersgd": Use(
        "vogels2019", "abstract",
        "a low-rank gradient compressor based on power iteration that compresses gradients "
        "rapidly, aggregates the compressed gradients with all-reduce, and reaches test "
        "performance on par with SGD"),
    "thakur2005-cost-model": Use(
        "thakur2005", "cost model",
        "the time to send a message of n bytes between two processes is α + nβ (latency plus "
        "bytes times the per-byte transfer time), the model its collective algorithms are "
        "costed in (checked against summaries of the paper, not its text)"),
    "mccandlish2018-critical-batch": Use(
        "mccandlish2018", "abstract",
        "a statistic called the gradient noise scale predicts the largest useful batch size "
        "across many domains; beyond it, larger batches give diminishing returns in the "
        "number of optimization steps"),
    "narayanan2021-throughput": Use(
        "narayanan2021", "abstract",
        "training at 502 petaFLOP/s on 3072 GPUs, a per-GPU throughput of 52 % of the "
        "theoretical peak"),
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
