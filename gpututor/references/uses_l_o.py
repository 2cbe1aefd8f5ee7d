"""The uses of the sources whose keys begin with l to o: where in the source, and what it says there."""
from __future__ import annotations

from .entries import Use

USES: dict[str, Use] = {
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
    "li2020-overlap": Use(
        "li2020", "§3.2.3",
        "DDP launches a bucket's all-reduce as soon as all its gradients are ready, so "
        "communication overlaps the rest of the backward pass (gradient bucketing: §3.2.2)"),
    "lepikhin2021-alltoall": Use(
        "lepikhin2021", "§3",
        "with the experts sharded over devices, the MoE layer's dispatch and combine of tokens "
        "are AllToAll collectives (section-level pointer; not checked against the text)"),
    "milakov2018-online": Use(
        "milakov2018", "§3",
        "the online normalizer: one pass over a vector keeps a running maximum and a running "
        "sum of exponentials, rescaling the sum by exp(old max − new max) when the maximum "
        "rises (section from the paper's structure; not checked against the text)"),
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
    "mishra2021-2of4": Use(
        "mishra2021", "Abstract",
        "the NVIDIA Ampere architecture's Sparse Tensor Cores exploit a 2:4 (50 %) sparsity "
        "pattern for twice the math throughput of dense matrix units"),
    "megatron-lm-utils-cp-split": Use(
        "megatron-lm-utils", "get_batch_on_this_cp_rank",
        "with causal masking the sequence is split into 2·CP chunks and context-parallel rank r "
        "takes chunks r and 2·CP−1−r (CP = 2: GPU0 chunks 0 and 3, GPU1 chunks 1 and 2), to "
        "balance the work (checked in NVIDIA-licensed copies of the function; the file itself "
        "not reached)"),
    "megatron-core-layers-async-dgrad": Use(
        "megatron-core-layers", "ColumnParallelLinear and its backward",
        "allreduce_dgrad = world_size > 1 and not sequence_parallel and not disable_grad_reduce; "
        "backward starts the input gradient's all-reduce with async_op=True, 'scheduled before the "
        "weight gradient computation' (with CUDA_DEVICE_MAX_CONNECTIONS=1), and waits for it after "
        "the weight-gradient product: 'the tensor parallel all reduce of the input gradients can "
        "be done asynchronously with the calculation of the weight gradients'"),
    "megatron-lm-args-tp-comm-overlap": Use(
        "megatron-lm-args", "validate_args",
        "if args.tp_comm_overlap: 'Tensor parallel communication/GEMM overlap can happen only "
        "when sequence parallelism is enabled' (the run stops otherwise)"),
    "nccl-tests-performance-bus-factor": Use(
        "nccl-tests-performance", "Bus bandwidth, Summary",
        "bus bandwidth is the algorithm bandwidth S/t times a factor per collective: all-reduce "
        "2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast and reduce 1; an all-reduce "
        "of S needs 2(n-1) transfers per element over n links, t = (S/B)·2(n-1)/n at best"),
    "nvidia-h100-datasheet-sxm": Use(
        "nvidia-h100-datasheet", "specifications table, H100 SXM",
        "FP32 67 TFLOPS; TF32 Tensor Core 989 and BF16 Tensor Core 1,979 TFLOPS, marked 'Shown "
        "with sparsity. Specifications 1/2 lower without sparsity', so 494.5 and 989.5 dense "
        "(checked against a copy of the table, archive-lib.hpctech.co.jp, and glennklockwood.com's "
        "table: TF32 494.7, BF16 989.4 dense; not against NVIDIA's own PDF)"),
    "nvidia-h100-datasheet-fp8": Use(
        "nvidia-h100-datasheet", "specifications table, H100 SXM and H100 PCIe",
        "FP8 Tensor Core 3,958 TFLOPS (SXM) and 3,026 (PCIe), marked 'Shown with sparsity. "
        "Specifications 1/2 lower without sparsity': 1,979 and 1,513 dense (checked against "
        "glennklockwood.com's H100 table, FP8 matrix 1,978.9 dense and 3,957.8 sparse; not "
        "against NVIDIA's own PDF)"),
    "nvidia-h200-datasheet-fp8": Use(
        "nvidia-h200-datasheet", "specifications table, H200 SXM",
        "FP8 Tensor Core 3,958 TFLOPS and BF16 1,979, with sparsity (footnote): 1,979 and 989.5 "
        "dense; 141 GB HBM3e at 4.8 TB/s (not checked against the page's text: from the same "
        "tensor cores as the H100 SXM, as glennklockwood.com's H100 page says of the H200)"),
    "nvidia-l4-datasheet-fp8": Use(
        "nvidia-l4-datasheet", "specifications table",
        "FP8 Tensor Core 485 TFLOPS and BF16 242, both with sparsity (footnote): 242.5 and 121 "
        "dense (checked against a copy of the figures, grokipedia.com's L4 vs L40S page: 485 "
        "FP8 with sparsity; not against NVIDIA's page)"),
    "nvidia-l40s-datasheet-fp8": Use(
        "nvidia-l40s-datasheet", "specifications table",
        "FP8 Tensor Core 1,466 TFLOPS and BF16 733, with sparsity (footnote): 733 and 362 dense "
        "(checked against a reseller's copy of the table, mullet.se: FP8 733 | 1,466*, * with "
        "sparsity; not against NVIDIA's page)"),
    "nvidia-a100-whitepaper-formats": Use(
        "nvidia-a100-whitepaper", "A100 Tensor Cores Support All DL Data Types; Compute Capability",
        "A100's third-generation Tensor Cores add TF32 and BF16 to FP16, INT8, INT4 and FP64; "
        "A100 is compute capability 8.0 (not checked against the text: only the whitepaper's "
        "table of contents, which lists these sections and Figure 9 'TensorFloat-32 (TF32)', "
        "was reachable)"),
    "nvidia-v100-datasheet-tensor": Use(
        "nvidia-v100-datasheet", "specifications, V100 SXM2",
        "Tensor Performance 125 TFLOPS for the SXM2 board (FP16 multiply, FP32 accumulate); no "
        "BF16 (not checked against the text: NVIDIA's developer page 'Programming Tensor Cores "
        "in CUDA 9' gives the same 'up to 125 Tensor TFLOPS' for Tesla V100)"),
    "nvidia-t4-datasheet-mixed": Use(
        "nvidia-t4-datasheet", "specifications",
        "Mixed Precision (FP16/FP32) 65 TFLOPS, single precision 8.1 TFLOPS, INT8 130 TOPS; no "
        "BF16 (not checked against the text: third-party copies of the figures, e.g. "
        "geektopia.es's T4 announcement, give 65 and 8.1)"),
    "megatron-core-distopt-bytes": Use(
        "megatron-core-distopt", "the bytes-per-parameter table",
        "bytes per parameter without the distributed optimizer: 20 (fp16 parameters and "
        "gradients), 18 (bf16 parameters, fp32 gradients), 16 (fp32 both); with it over d "
        "data-parallel ranks 4 + 16/d, 6 + 12/d, 8 + 8/d; fp32 main parameters always"),
    # lessons 01, 01c, 11, gpututor/moe.py, formulas.py, measure/flops.py, precision/
    "narayanan2021-flops": Use(
        "narayanan2021", "Appendix (Floating-Point Operations)",
        "a transformer layer's forward is 24Bsh² + 4Bs²h FLOPs; the backward doubles it; "
        "activation recomputation adds another forward: 4 × (24Bsh² + 4Bs²h) = "
        "96Bsh²(1 + s/6h) per layer"),
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
    "mistral2023-mixtral": Use(
        "mistral2023", "the announcement",
        "Mixtral has 46.7B total parameters but uses only 12.9B parameters per token (checked "
        "against quotations of the page, not the page itself)"),
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
    "mccandlish2018-critical-batch": Use(
        "mccandlish2018", "abstract",
        "a statistic called the gradient noise scale predicts the largest useful batch size "
        "across many domains; beyond it, larger batches give diminishing returns in the "
        "number of optimization steps"),
    "micikevicius2022-formats": Use(
        "micikevicius2022", "§3",
        "two FP8 encodings: E4M3 (no infinities, one NaN pattern, largest normal 448, smallest "
        "subnormal 2⁻⁹) recommended for weights and activations, and E5M2 (IEEE-754 special "
        "values, largest normal 57344, smallest subnormal 2⁻¹⁶) for gradients (section-level "
        "pointer; not checked against the text)"),
    "micikevicius2022-scaling": Use(
        "micikevicius2022", "§2",
        "higher-precision values are scaled before the cast to FP8 and unscaled after the "
        "conversion or the arithmetic; the per-tensor scale factors are left to software, not "
        "encoded in the format (section-level pointer; not checked against the text)"),
    "ocp2023-mx-conversion": Use(
        "ocp2023", "§6.3",
        "converting a block of k = 32 values to MXFP8: shared scale X = 2^(floor(log2(max|v|)) "
        "− emax_elem), an E8M0 power of two (exponents −127..127); each element v/X is "
        "quantized to the element format, values beyond its largest normal clamped to it "
        "(section number as torchao's to_mx cites it; not checked against the spec's text)"),
    "narayanan2021-throughput": Use(
        "narayanan2021", "abstract",
        "training at 502 petaFLOP/s on 3072 GPUs, a per-GPU throughput of 52 % of the "
        "theoretical peak"),
}
