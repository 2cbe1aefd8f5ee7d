"""The uses of the sources whose keys begin with a to k: where in the source, and what it says there."""
from __future__ import annotations

from .entries import Use

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
    "dao2022-memory": Use(
        "dao2022", "§3.1",
        "FlashAttention does not store the N×N matrices S and P for the backward (it recomputes "
        "them from Q, K, V and the softmax statistics): O(N) extra memory beyond inputs and "
        "output (Theorem 1)"),
    "dao2023-backward": Use(
        "dao2023", "§3.1.2",
        "the backward pass recomputes the attention probabilities block by block from Q, K and "
        "the logsumexp L saved by the forward, instead of storing them"),
    "dao2023-causal": Use(
        "dao2023", "§3.1.1, §4.1",
        "with a causal mask the blocks whose columns all lie past the row block are skipped, "
        "about half of them for long sequences; the benchmarks count causal attention's FLOPs as "
        "half of the full 4·seqlen²·head_dim·heads"),
    "deepseek2024-accumulation": Use(
        "deepseek2024", "§3.3.2",
        "Increasing Accumulation Precision: on H800 GPUs the FP8 GEMM accumulation in the "
        "tensor cores retains only about 14 bits, well below FP32 accumulation; DeepSeek-V3 "
        "copies partial sums to FP32 registers on CUDA cores every 128 elements"),
    "flash-attn-readme-causal": Use(
        "flash-attn-readme", "Changelog, 2.1",
        "if seqlen_q != seqlen_k and causal=True, the causal mask is aligned to the bottom right "
        "corner of the attention matrix, instead of the top-left corner"),
    "douillard2023-abstract": Use(
        "douillard2023", "abstract",
        "on the C4 dataset, DiLoCo on 8 workers performs as well as fully synchronous "
        "optimization while communicating 500 times less (inner AdamW, outer Nesterov momentum; "
        "checked against the abstract as quoted in summaries, not the full text)"),
    "douillard2023-diloco-algorithm": Use(
        "douillard2023", "Algorithm 1",
        "k workers each copy the outer parameters θ(t−1), run H inner steps of an inner optimizer "
        "(AdamW) on their own data shard; the outer gradient is the average over workers of "
        "θ(t−1) − θ_i(t); an outer optimizer (Nesterov momentum) updates θ with it"),
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
    "dubey2024-4d-order": Use(
        "dubey2024", "§3.3.2",
        "4D parallelism ordered [TP, CP, PP, DP] for network communication: the innermost "
        "dimension needs the highest bandwidth and lowest latency and stays inside a server"),
    "kaplan2020-params": Use(
        "kaplan2020", "Table 1",
        "N ≈ 2·d_model·n_layer·(2·d_attn + d_ff) = 12·n_layer·d_model² with d_attn = d_ff/4 = "
        "d_model, embeddings left out"),
    "brown2020-sizes": Use(
        "brown2020", "Table 2.1",
        "GPT-3 6.7B: 32 layers, d_model 4096, 32 heads, batch 2M tokens; 175B: 96 layers, "
        "d_model 12288, 96 heads, batch 3.2M tokens; context 2048 for every size"),
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
    "dettmers2022-blockwise": Use(
        "dettmers2022", "§2",
        "8-bit Adam: each state tensor in blocks of 2048, each block normalised by its absolute "
        "maximum and stored with a dynamic (non-linear) 8-bit code; both Adam states are "
        "quantized (section from the paper's structure; the block size and the code checked "
        "against summaries of the paper, not its text)"),
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
    "daly2006-interval": Use(
        "daly2006", "abstract, Figs. 3–5",
        "for Poisson single-component failures, a first-order model and then a perturbation "
        "solution of a more complete cost function give higher-order estimates of the optimum "
        "interval; with δ = 5 min, R = 10 min, the model predicts τopt = 117, 57 and 9.1 min for "
        "M = 24 h, 6 h and 15 min (Figs. 3–5; the formula itself was not read: the full text was "
        "not reachable, and the implementation reproduces these three values)"),
    "hinton2015-temperature": Use(
        "hinton2015", "§2",
        "a softmax at a higher temperature T produces a softer probability distribution over "
        "classes; the student is trained on the teacher's soft targets at the same high T, and "
        "the soft-target gradients are scaled by T²"),
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
    "fedus2021-flops": Use(
        "fedus2021", "§2",
        "the Switch Transformer grows the parameter count while keeping the floating point "
        "operations (FLOPs) per example constant, by activating a subset of the weights"),
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
    "jiang2024-total": Use(
        "jiang2024", "Abstract",
        "Mixtral 8x7B: 8 feed-forward experts per layer, two selected per token; each token has "
        "access to 47B parameters and uses 13B active ones"),
    "jiang2024-shape": Use(
        "jiang2024", "Table 1",
        "dim 4096, n_layers 32, hidden_dim 14336, n_heads 32, n_kv_heads 8, num_experts 8, "
        "top_k_experts 2 (checked against the released config, the table's text not read)"),
    "ansel2024-compile": Use(
        "ansel2024", "Abstract",
        "TorchDynamo rewrites Python bytecode to extract PyTorch operations into an FX graph; "
        "TorchInductor, the default backend, translates it into OpenAI's Triton for GPUs and "
        "C++ for CPUs (AOTAutograd's ahead-of-time backward is in the body; section not "
        "checked)"),
    "hockney1994-model": Use(
        "hockney1994", "the (r∞, n½) model",
        "a point-to-point message of n bytes takes t(n) = t₀ + n/r∞: a start-up latency plus "
        "the bytes at the asymptotic bandwidth (the α-β model; checked against summaries, not "
        "the text)"),
    # lesson 02 and gpututor/parallel/link.py, data_parallel/
    "kingma2015-step": Use(
        "kingma2015", "§2.1",
        "the effective step is Δt = α·m̂t/√v̂t; |Δt| ≤ α·(1−β1)/√(1−β2) only in the most "
        "severe case of sparsity, smaller otherwise, and in common scenarios m̂t/√v̂t ≈ ±1, so "
        "each step's magnitude is approximately "
        "bounded by the stepsize α; it is invariant to the scale of the gradients (rescaling g "
        "by c scales m̂t by c and v̂t by c², which cancel)"),
}
