"""The uses of the sources whose keys begin with p to z: where in the source, and what it says there."""
from __future__ import annotations

from .entries import Use

USES: dict[str, Use] = {
    "pytorch-sdpa-causal": Use(
        "pytorch-sdpa", "the equivalent implementation in the docstring",
        "with is_causal, temp_mask = torch.ones(L, S).tril(diagonal=0): query i attends to keys "
        "0..i, the mask aligned top-left when L != S (read in the installed torch 2.13)"),
    "stich2019-local-sgd": Use(
        "stich2019", "Algorithm 1 (local SGD)",
        "each of K workers runs SGD on its own copy; every H steps the copies are replaced by "
        "their average (the sync every H steps is the only communication)"),
    "torchft-local-sgd-test-diloco": Use(
        "torchft-local-sgd-test", "DiLoCo tests",
        "the outer optimizer is torch.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, "
        "nesterov=True) (read in the torchft 0.2.0 wheel from PyPI)"),
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
    "torchtitan-config-float8-filter": Use(
        "torchtitan-config", "class Float8 (filter_fqns)",
        "filter_fqns: fully qualified names of modules to skip applying float8 training to, "
        "e.g. 'attention.wq,attention.wk,attention.wv,output'; nn.Linear modules with any "
        "dimension not divisible by 16 are always skipped (hardware requirement); its Float8 "
        "examples set filter_fqns = ['output'] (checked against the docstring and a copy of "
        "its docs, not its current training configs)"),
    "torchtitan2024-float8": Use(
        "torchtitan2024", "Tables 1 and 3, Results",
        "Llama 3.1 8B, FSDP, selective activation checkpointing, tokens/s per H100: on 8 GPUs "
        "5,762 (FSDP), 6,667 (+ torch.compile), 8,532 (+ compile + Float8); on 128 GPUs 5,605, "
        "6,514, 8,380. MFU not reported with Float8: both the BF16 and the FP8 tensor cores "
        "run, with different peaks, so MFU is not well defined"),
    "radford2019-sizes": Use(
        "radford2019", "Table 2, §2.3",
        "the largest GPT-2: 1542M parameters, 48 layers, d_model 1600; context of 1024 tokens"),
    "thakur2005-alltoall": Use(
        "thakur2005", "Alltoall algorithms",
        "for long messages MPICH's all-to-all is a pairwise exchange: p−1 steps, each process "
        "sending to and receiving from one peer (cost model α + n·β per message; not checked "
        "against the text)"),
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
    "pytorch-ddp-source-unused": Use(
        "pytorch-ddp-source", "DistributedDataParallel's docstring, find_unused_parameters",
        "find_unused_parameters (default False): parameters that don't receive gradients as part "
        "of the graph of forward's outputs are preemptively marked as being ready to be reduced "
        "(read in torch 2.13)"),
    "pytorch-zero-redundancy-optimizer-wraps": Use(
        "pytorch-zero-redundancy-optimizer", "ZeroRedundancyOptimizer",
        "wraps an arbitrary optim.Optimizer and shards its states across ranks; each rank "
        "updates about 1/world_size of the parameters, then broadcasts them; each parameter "
        "belongs to a single rank (a sorted-greedy packing), not divided; used with DDP"),
    "pytorch-async-tp-pass-patterns": Use(
        "pytorch-async-tp-pass", "micro_pipeline_tp_pass",
        "async TP finds all-gather -> matmul and matmul -> reduce-scatter patterns and fuses them "
        "(fuse_all_gather_matmul, fuse_matmul_reduce_scatter); no all-reduce is fused; with none "
        "found it warns 'async TP found no matching all-gather/reduce-scatter patterns' "
        "(read in torch 2.13)"),
    "pytorch2022-compile-a100": Use(
        "pytorch2022-compile", "the 163-model benchmark",
        "Across these 163 open-source models torch.compile works 93% of time, and the model runs "
        "43% faster in training on an NVIDIA A100 GPU. At Float32 precision, it runs 21% faster on "
        "average and at AMP Precision it runs 51% faster on average (the 43% weights AMP by 0.75 "
        "and float32 by 0.25)"),
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
    "shazeer2017-moe": Use(
        "shazeer2017", "§2, §2.1",
        "a mixture-of-experts layer: n expert networks and a trainable gating network whose "
        "sparse output picks the experts a token uses; noisy top-k gating keeps the k largest "
        "values before the softmax"),
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
    "pytorch-ddp-comm-hooks-bf16": Use(
        "pytorch-ddp-comm-hooks", "Default Communication Hooks: bf16_compress_hook",
        "casts the GradBucket tensor to bfloat16, divides it by the process group size, "
        "all-reduces those bfloat16 tensors, and a chained callback casts the result back to the "
        "input's dtype (such as float32); the page calls the hooks experimental"),
    "pytorch-ddp-comm-hooks-powersgd": Use(
        "pytorch-ddp-comm-hooks", "PowerSGD Communication Hook: powerSGD_hook, PowerSGDState",
        "vanilla all-reduce for the first start_powerSGD_iter iterations; then the bucket's "
        "tensors are split into those worth compressing (by min_compression_rate) and the rest, "
        "vectors included, all-reduced uncompressed as one batch; each compressed M becomes "
        "P = MQ (all-reduced as a batch, orthogonalized) and Q ≈ MᵀP (all-reduced as a batch), "
        "M ≈ PQᵀ, of rank matrix_approximation_rank; error feedback and warm start are on by "
        "default (read in the installed torch 2.13's docstrings)"),
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
}
