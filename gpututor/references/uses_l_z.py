"""The uses of the sources whose keys begin with l to z: where in the source, and what it says there."""
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
    "qi2024-zbv": Use(
        "qi2024", "§6",
        "ZB-V: each worker holds exactly two model chunks, placed so that the forward and the "
        "backward follow a V across the workers (the first worker holds the first and the last "
        "chunk, the last worker the two middle ones); with F, B and W of equal times it reaches "
        "zero bubble with 1F1B's activation memory (section as torch's ScheduleZBVZeroBubble "
        "docstring cites it)"),
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
    "radford2019-sizes": Use(
        "radford2019", "Table 2, §2.3",
        "the largest GPT-2: 1542M parameters, 48 layers, d_model 1600; context of 1024 tokens"),
    "thakur2005-alltoall": Use(
        "thakur2005", "Alltoall algorithms",
        "for long messages MPICH's all-to-all is a pairwise exchange: p−1 steps, each process "
        "sending to and receiving from one peer (cost model α + n·β per message; not checked "
        "against the text)"),
    "lepikhin2021-alltoall": Use(
        "lepikhin2021", "§3",
        "with the experts sharded over devices, the MoE layer's dispatch and combine of tokens "
        "are AllToAll collectives (section-level pointer; not checked against the text)"),
    "milakov2018-online": Use(
        "milakov2018", "§3",
        "the online normalizer: one pass over a vector keeps a running maximum and a running "
        "sum of exponentials, rescaling the sum by exp(old max − new max) when the maximum "
        "rises (section from the paper's structure; not checked against the text)"),
    "ren2021-offload": Use(
        "ren2021", "§4.1",
        "ZeRO-Offload on one GPU: fp16 parameters stay on the GPU for forward and backward; the "
        "fp16 gradients go to the CPU, which keeps the fp32 master weights and Adam's states and "
        "runs the update, and the updated fp16 parameters come back (checked against summaries "
        "of the paper, not its text)"),
    "young1974-interval": Use(
        "young1974", "pp. 530–531",
        "with failures a Poisson process of mean time between failures T_f and T_s to save a "
        "checkpoint, the time lost (saves before a failure, and the rerun since the last "
        "checkpoint) is smallest, to first order, at an interval T_c ≈ √(2·T_s·T_f) (read in "
        "the abstract and a summary: the full text was not reachable)"),
    "pandya2024-flight-recorder": Use(
        "pandya2024", "Enabling Flight Recorder; An End-to-End Example",
        "TORCH_NCCL_TRACE_BUFFER_SIZE=N keeps N entries in a circular buffer (2000 recommended), "
        "TORCH_NCCL_DUMP_ON_TIMEOUT writes one file per rank on a timeout, "
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE sets the file prefix, TORCH_NCCL_TRACE_CPP_STACK and "
        "TORCH_NCCL_ENABLE_TIMING are optional; `torchfrtrace --prefix \"trace_\" /tmp/` prints "
        "the collective not all ranks joined (\"missing ranks: {1}\"); the tutorial is listed "
        "as a prototype"),
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
    "pytorch-ddp-source-first-bucket": Use(
        "pytorch-ddp-source", "_BucketCapacityConfig.create",
        "first_bucket_bytes_cap = dist._DEFAULT_FIRST_BUCKET_BYTES if bucket_cap_mb is left at "
        "its default (25 MiB for the others), else bucket_cap_mb's bytes: a smaller first "
        "bucket lets the first all-reduce start sooner (read in the installed torch 2.13)"),
    "pytorch-ddp-source-bucket-view": Use(
        "pytorch-ddp-source", "DistributedDataParallel's docstring, gradient_as_bucket_view",
        "gradient_as_bucket_view=False in the signature; set to True, 'gradients will be views "
        "pointing to different offsets of allreduce communication buckets', which 'can reduce "
        "peak memory usage, where the saved memory size will be equal to the total gradients "
        "size' and avoids copying between gradients and buckets (read in torch 2.13)"),
    "nccl-tests-performance-bus-factor": Use(
        "nccl-tests-performance", "Bus bandwidth, Summary",
        "bus bandwidth is the algorithm bandwidth S/t times a factor per collective: all-reduce "
        "2(n-1)/n, reduce-scatter and all-gather (n-1)/n, broadcast and reduce 1; an all-reduce "
        "of S needs 2(n-1) transfers per element over n links, t = (S/B)·2(n-1)/n at best"),
    "pytorch-async-tp-pass-patterns": Use(
        "pytorch-async-tp-pass", "micro_pipeline_tp_pass",
        "async TP finds all-gather -> matmul and matmul -> reduce-scatter patterns and fuses them "
        "(fuse_all_gather_matmul, fuse_matmul_reduce_scatter); no all-reduce is fused; with none "
        "found it warns 'async TP found no matching all-gather/reduce-scatter patterns' "
        "(read in torch 2.13)"),
    "pytorch-tp-experimental": Use(
        "pytorch-tp", "the warning at the top",
        "'Tensor Parallelism APIs are experimental and subject to change'; TP is built on DTensor "
        "and provides Colwise, Rowwise and Sequence Parallelism styles"),
    "pytorch-amp-grad-scaler": Use(
        "pytorch-amp", "Gradient Scaling; torch.amp.GradScaler",
        "gradient scaling multiplies the loss by a scale factor so small fp16 gradients do not "
        "flush to zero, and unscales each .grad before the optimizer step; GradScaler's "
        "defaults: init_scale 2.**16, growth_factor 2.0, backoff_factor 0.5, growth_interval "
        "2000 consecutive iterations without inf/NaN gradients (docstring read in torch 2.13)"),
    "pytorch-amp-op-reference": Use(
        "pytorch-amp", "Autocast Op Reference",
        "CUDA ops that autocast to float16 include linear, matmul, mm, bmm; CUDA ops that "
        "autocast to float32 include softmax, layer_norm, cross_entropy, log_softmax; the CPU "
        "float32 list has the losses (cross_entropy_loss, nll_loss, ...) but not softmax or "
        "layer_norm, and unlisted ops run in the type of their inputs"),
    "pytorch-cuda-semantics-tf32": Use(
        "pytorch-cuda-semantics", "TensorFloat-32 (TF32) on Ampere (and later) devices",
        "the allow_tf32 flag for matmuls defaults to True in PyTorch 1.7 to 1.11 and False in "
        "1.12 and later; TF32 tensor cores, on NVIDIA GPUs since Ampere, round inputs to 10 bits "
        "of mantissa and accumulate in FP32"),
    "pytorch-pipelining-schedules": Use(
        "pytorch-pipelining", "Implementing Your Own Schedule; Pipeline Schedules",
        "ScheduleGPipe and Schedule1F1B (one stage per rank) subclass PipelineScheduleSingle; "
        "ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleInterleavedZeroBubble and "
        "ScheduleZBVZeroBubble (several stages per rank) subclass PipelineScheduleMulti"),
    "pytorch-pipelining-source-runtime": Use(
        "pytorch-pipelining-source", "_add_send_recv; _PipelineScheduleRuntime._step_microbatches",
        "_add_send_recv turns a compute-only schedule into one with SEND/RECV actions; the "
        "runtime waits for a receive before the pass that needs it and waits for the send "
        "operations only after the last action of the step ('Mostly these operations should "
        "have finished long ago'); read in torch 2.13's installed copy"),
    "nvidia-h100-datasheet-sxm": Use(
        "nvidia-h100-datasheet", "specifications table, H100 SXM",
        "FP32 67 TFLOPS; TF32 Tensor Core 989 and BF16 Tensor Core 1,979 TFLOPS, marked 'Shown "
        "with sparsity. Specifications 1/2 lower without sparsity', so 494.5 and 989.5 dense "
        "(checked against a copy of the table, archive-lib.hpctech.co.jp, and glennklockwood.com's "
        "table: TF32 494.7, BF16 989.4 dense; not against NVIDIA's own PDF)"),
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
    "shazeer2017-moe": Use(
        "shazeer2017", "§2, §2.1",
        "a mixture-of-experts layer: n expert networks and a trainable gating network whose "
        "sparse output picks the experts a token uses; noisy top-k gating keeps the k largest "
        "values before the softmax"),
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
    "patarasuk2009-ring": Use(
        "patarasuk2009", "the ring algorithm",
        "the bandwidth-optimal all-reduce on a logical ring: a reduce-scatter then an "
        "all-gather, 2(p−1) steps each sending N/p, so each process sends 2(p−1)/p·N "
        "(checked against summaries of the paper, not its text)"),
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
