"""Every source cited, once: its authors as a citation names them, year, title and address."""
from __future__ import annotations

from .entries import Work

WORKS: dict[str, Work] = {
    "korthikanti2022": Work("Korthikanti et al.", 2022,
                              "Reducing Activation Recomputation in Large Transformer Models",
                              "https://arxiv.org/abs/2205.05198"),
    # lessons 05, 06, 08, 09, the pipeline and the planner
    "huang2019": Work("Huang et al.", 2019, "GPipe: Efficient Training of Giant Neural Networks "
                        "using Pipeline Parallelism", "https://arxiv.org/abs/1811.06965"),
    "qi2024": Work("Qi et al.", 2024, "Zero Bubble Pipeline Parallelism (ICLR 2024)",
                     "https://arxiv.org/abs/2401.10241"),
    "micikevicius2018": Work("Micikevicius et al.", 2018, "Mixed Precision Training",
                               "https://arxiv.org/abs/1710.03740"),
    "chowdhery2022": Work("Chowdhery et al.", 2022, "PaLM: Scaling Language Modeling with "
                            "Pathways", "https://arxiv.org/abs/2204.02311"),
    "hoffmann2022": Work("Hoffmann et al.", 2022, "Training Compute-Optimal Large Language "
                           "Models", "https://arxiv.org/abs/2203.15556"),
    "touvron2023": Work("Touvron et al.", 2023, "Llama 2: Open Foundation and Fine-Tuned Chat "
                          "Models", "https://arxiv.org/abs/2307.09288"),
    "torchtitan2024": Work("torchtitan", 2024, "Llama 3.1 performance benchmarks on H100s "
                             "(pytorch/torchtitan, benchmarks/llama3_h100_202412_torchtitan.md)",
                             "https://github.com/pytorch/torchtitan/blob/main/benchmarks/"
                             "llama3_h100_202412_torchtitan.md"),
    "torchtitan-config": Work("torchtitan", 2025, "torchtitan/config/job_config.py "
                                "(pytorch/torchtitan): the Float8 options",
                                "https://github.com/pytorch/torchtitan/blob/main/torchtitan/"
                                "config/job_config.py"),
    "li2020": Work("Li et al.", 2020, "PyTorch Distributed: Experiences on Accelerating Data "
                     "Parallel Training", "https://arxiv.org/abs/2006.15704"),
    "kaplan2020": Work("Kaplan et al.", 2020, "Scaling Laws for Neural Language Models",
                         "https://arxiv.org/abs/2001.08361"),
    "radford2019": Work("Radford et al.", 2019, "Language Models are Unsupervised Multitask "
                          "Learners", "https://cdn.openai.com/better-language-models/"
                          "language_models_are_unsupervised_multitask_learners.pdf"),
    "brown2020": Work("Brown et al.", 2020, "Language Models are Few-Shot Learners",
                        "https://arxiv.org/abs/2005.14165"),
    "thakur2005": Work("Thakur et al.", 2005, "Optimization of Collective Communication "
                         "Operations in MPICH", "https://doi.org/10.1177/1094342005051521"),
    "lepikhin2021": Work("Lepikhin et al.", 2021, "GShard: Scaling Giant Models with "
                           "Conditional Computation and Automatic Sharding",
                           "https://arxiv.org/abs/2006.16668"),
    "dao2022": Work("Dao et al.", 2022, "FlashAttention: Fast and Memory-Efficient Exact "
                      "Attention with IO-Awareness", "https://arxiv.org/abs/2205.14135"),
    "dao2023": Work("Dao", 2023, "FlashAttention-2: Faster Attention with Better Parallelism "
                      "and Work Partitioning", "https://arxiv.org/abs/2307.08691"),
    # lesson 01b
    "milakov2018": Work("Milakov & Gimelshein", 2018, "Online normalizer calculation for "
                          "softmax", "https://arxiv.org/abs/1805.02867"),
    "dettmers2022": Work("Dettmers et al.", 2022, "8-bit Optimizers via Block-wise "
                           "Quantization (ICLR 2022)", "https://arxiv.org/abs/2110.02861"),
    "ren2021": Work("Ren et al.", 2021, "ZeRO-Offload: Democratizing Billion-Scale Model "
                      "Training (USENIX ATC 2021)", "https://arxiv.org/abs/2101.06840"),
    "deepseek2024": Work("DeepSeek-AI", 2024, "DeepSeek-V3 Technical Report",
                           "https://arxiv.org/abs/2412.19437"),
    "dubey2024": Work("Dubey et al.", 2024, "The Llama 3 Herd of Models",
                        "https://arxiv.org/abs/2407.21783"),
    # gpututor/precision/fp8_casts.py and fp8_linear.py (issue 46)
    "micikevicius2022": Work("Micikevicius et al.", 2022, "FP8 Formats for Deep Learning",
                               "https://arxiv.org/abs/2209.05433"),
    "ocp2023": Work("Open Compute Project", 2023, "OCP Microscaling Formats (MX) Specification, "
                      "Version 1.0", "https://www.opencompute.org/documents/"
                      "ocp-microscaling-formats-mx-v1-0-spec-final-pdf"),
    # lesson 12 and gpututor/plan/interruptions.py
    "young1974": Work("Young", 1974, "A first order approximation to the optimum checkpoint "
                        "interval (Communications of the ACM 17(9), 530–531)",
                        "https://doi.org/10.1145/361147.361115"),
    "daly2006": Work("Daly", 2006, "A higher order estimate of the optimum checkpoint interval "
                       "for restart dumps (Future Generation Computer Systems 22(3), 303–312)",
                       "https://doi.org/10.1016/j.future.2004.11.016"),
    "pandya2024": Work("Pandya and Wang", 2024, "(prototype) Flight Recorder for Debugging "
                         "Stuck Jobs (PyTorch tutorial)",
                         "https://docs.pytorch.org/tutorials/prototype/flight_recorder_tutorial.html"),
    "hinton2015": Work("Hinton et al.", 2015, "Distilling the Knowledge in a Neural Network",
                         "https://arxiv.org/abs/1503.02531"),
    "shoeybi2019": Work("Shoeybi et al.", 2019, "Megatron-LM: Training Multi-Billion Parameter "
                          "Language Models Using Model Parallelism",
                          "https://arxiv.org/abs/1909.08053"),
    "rajbhandari2020": Work("Rajbhandari et al.", 2020, "ZeRO: Memory Optimizations Toward "
                              "Training Trillion Parameter Models",
                              "https://arxiv.org/abs/1910.02054"),
    # lesson 03: PyTorch's and Megatron Core's documentation pages
    "pytorch-fsdp2": Work("PyTorch docs", 2024, "torch.distributed.fsdp.fully_shard (FSDP2)",
                            "https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html"),
    "pytorch-dtensor": Work("PyTorch docs", 2025, "torch.distributed.tensor (DTensor)",
                              "https://docs.pytorch.org/docs/stable/distributed.tensor.html"),
    "megatron-core-distopt": Work("Megatron Core docs", 2024, "Distributed Optimizer",
                                    "https://docs.nvidia.com/megatron-core/developer-guide/"
                                    "latest/api-guide/dist_optimizer.html"),
    "narayanan2021": Work("Narayanan et al.", 2021, "Efficient Large-Scale Language Model "
                            "Training on GPU Clusters Using Megatron-LM",
                            "https://arxiv.org/abs/2104.04473"),
    "liu2023": Work("Liu et al.", 2023, "Ring Attention with Blockwise Transformers for "
                      "Near-Infinite Context", "https://arxiv.org/abs/2310.01889"),
    "brandon2023": Work("Brandon et al.", 2023, "Striped Attention: Faster Ring Attention for "
                          "Causal Transformers", "https://arxiv.org/abs/2311.09431"),
    "mishra2021": Work("Mishra et al.", 2021, "Accelerating Sparse Deep Neural Networks",
                         "https://arxiv.org/abs/2104.08378"),
    "wang2023": Work("Wang et al.", 2023, "Overlap Communication with Dependent Computation via "
                       "Decomposition in Large Deep Learning Models (ASPLOS 2023)",
                       "https://doi.org/10.1145/3567955.3567959"),
    "wang2024": Work("Wang et al.", 2024, "[Distributed w/ TorchTitan] Introducing Async Tensor "
                       "Parallelism in PyTorch (PyTorch forum post)",
                       "https://discuss.pytorch.org/t/distributed-w-torchtitan-introducing-async-"
                       "tensor-parallelism-in-pytorch/209487"),
    # lesson 04: the code that decides what tensor-parallel overlap needs, and the TP API's status
    "megatron-lm-utils": Work("Megatron-LM", 2025, "megatron/training/utils.py (NVIDIA/"
                                "Megatron-LM)", "https://github.com/NVIDIA/Megatron-LM/blob/main/"
                                "megatron/training/utils.py"),
    "megatron-lm-args": Work("Megatron-LM", 2025, "megatron/training/arguments.py (NVIDIA/"
                               "Megatron-LM)", "https://github.com/NVIDIA/Megatron-LM/blob/main/"
                               "megatron/training/arguments.py"),
    "megatron-core-layers": Work("Megatron-LM", 2025, "megatron/core/tensor_parallel/layers.py "
                                   "(NVIDIA/Megatron-LM)", "https://github.com/NVIDIA/Megatron-LM/"
                                   "blob/main/megatron/core/tensor_parallel/layers.py"),
    "pytorch-ddp-source": Work("PyTorch", 2025, "torch/nn/parallel/distributed.py "
                                 "(pytorch/pytorch)", "https://github.com/pytorch/pytorch/blob/"
                                 "main/torch/nn/parallel/distributed.py"),
    "pytorch-sdpa": Work("PyTorch docs", 2025, "torch.nn.functional.scaled_dot_product_attention",
                           "https://docs.pytorch.org/docs/stable/generated/"
                           "torch.nn.functional.scaled_dot_product_attention.html"),
    "flash-attn-readme": Work("Dao-AILab", 2025, "flash-attention README (Dao-AILab/"
                                "flash-attention)", "https://github.com/Dao-AILab/flash-attention"),
    "pytorch-zero-redundancy-optimizer": Work("PyTorch docs", 2025, "torch.distributed.optim."
                                                "ZeroRedundancyOptimizer", "https://docs.pytorch."
                                                "org/docs/stable/distributed.optim.html"),
    "stich2019": Work("Stich", 2019, "Local SGD Converges Fast and Communicates Little (ICLR 2019)",
                      "https://arxiv.org/abs/1805.09767"),
    "douillard2023": Work("Douillard et al.", 2023, "DiLoCo: Distributed Low-Communication "
                          "Training of Language Models", "https://arxiv.org/abs/2311.08105"),
    "torchft-local-sgd-test": Work("PyTorch torchft", 2025, "torchft/local_sgd_test.py "
                                   "(pytorch/torchft, release 0.2.0)", "https://github.com/"
                                   "pytorch/torchft/blob/main/torchft/local_sgd_test.py"),
    "nccl-tests-performance": Work("NVIDIA nccl-tests", 2025, "doc/PERFORMANCE.md: Performance "
                                     "reported by NCCL tests (NVIDIA/nccl-tests)",
                                     "https://github.com/NVIDIA/nccl-tests/blob/master/doc/"
                                     "PERFORMANCE.md"),
    "pytorch-async-tp-pass": Work("PyTorch", 2025, "torch/_inductor/fx_passes/micro_pipeline_tp.py "
                                    "(pytorch/pytorch)", "https://github.com/pytorch/pytorch/blob/"
                                    "main/torch/_inductor/fx_passes/micro_pipeline_tp.py"),
    "pytorch-tp": Work("PyTorch docs", 2025, "Tensor Parallelism - torch.distributed.tensor."
                         "parallel", "https://docs.pytorch.org/docs/stable/"
                         "distributed.tensor.parallel.html"),
    # lessons 05 and 06: PyTorch's pages and source, NVIDIA's datasheets
    "pytorch-amp": Work("PyTorch docs", 2025, "Automatic Mixed Precision package - torch.amp",
                          "https://docs.pytorch.org/docs/stable/amp.html"),
    "pytorch-cuda-semantics": Work("PyTorch docs", 2025, "CUDA semantics",
                                     "https://docs.pytorch.org/docs/stable/notes/cuda.html"),
    "pytorch-pipelining": Work("PyTorch docs", 2025, "Pipeline Parallelism - "
                                 "torch.distributed.pipelining",
                                 "https://docs.pytorch.org/docs/stable/distributed.pipelining.html"),
    "pytorch-pipelining-source": Work("PyTorch", 2025, "torch/distributed/pipelining/schedules.py "
                                        "(pytorch/pytorch)", "https://github.com/pytorch/pytorch/"
                                        "blob/main/torch/distributed/pipelining/schedules.py"),
    "nvidia-h100-datasheet": Work("NVIDIA", 2022, "NVIDIA H100 Tensor Core GPU (datasheet)",
                                    "https://resources.nvidia.com/en-us-tensor-core/"
                                    "nvidia-tensor-core-gpu-datasheet"),
    "nvidia-h200-datasheet": Work("NVIDIA", 2024, "NVIDIA H200 Tensor Core GPU (product page, "
                                    "specifications)", "https://www.nvidia.com/en-us/data-center/h200/"),
    "nvidia-l4-datasheet": Work("NVIDIA", 2023, "NVIDIA L4 Tensor Core GPU (product page, "
                                  "specifications)", "https://www.nvidia.com/en-us/data-center/l4/"),
    "nvidia-l40s-datasheet": Work("NVIDIA", 2023, "NVIDIA L40S GPU (product page, specifications)",
                                    "https://www.nvidia.com/en-us/data-center/l40s/"),
    "nvidia-a100-whitepaper": Work("NVIDIA", 2020, "NVIDIA A100 Tensor Core GPU Architecture "
                                     "(whitepaper, V1.0)", "https://images.nvidia.com/aem-dam/"
                                     "en-zz/Solutions/data-center/"
                                     "nvidia-ampere-architecture-whitepaper.pdf"),
    "nvidia-v100-datasheet": Work("NVIDIA", 2017, "NVIDIA Tesla V100 GPU Accelerator (datasheet)",
                                    "https://images.nvidia.com/content/technologies/volta/pdf/"
                                    "tesla-volta-v100-datasheet-letter-fnl-web.pdf"),
    "nvidia-t4-datasheet": Work("NVIDIA", 2018, "NVIDIA T4 Tensor Core GPU (datasheet)",
                                  "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
                                  "tesla-t4/t4-tensor-core-datasheet-951643.pdf"),
    # lessons 01, 01c, 11, gpututor/moe.py, formulas.py, measure/flops.py
    "fedus2021": Work("Fedus et al.", 2021, "Switch Transformers: Scaling to Trillion "
                        "Parameter Models with Simple and Efficient Sparsity",
                        "https://arxiv.org/abs/2101.03961"),
    "shazeer2017": Work("Shazeer et al.", 2017, "Outrageously Large Neural Networks: The "
                          "Sparsely-Gated Mixture-of-Experts Layer",
                          "https://arxiv.org/abs/1701.06538"),
    "jiang2024": Work("Jiang et al.", 2024, "Mixtral of Experts",
                        "https://arxiv.org/abs/2401.04088"),
    "mistral2023": Work("Mistral AI", 2023, "Mixtral of experts (announcement)",
                          "https://mistral.ai/news/mixtral-of-experts/"),
    "williams2009": Work("Williams et al.", 2009, "Roofline: An Insightful Visual Performance "
                           "Model for Multicore Architectures (CACM 52(4))",
                           "https://doi.org/10.1145/1498765.1498785"),
    "pytorch2022-compile": Work("PyTorch", 2022, "PyTorch 2.0: torch.compile announced "
                                  "(pytorch.org, Get Started)",
                                  "https://pytorch.org/get-started/pytorch-2.0/"),
    "ansel2024": Work("Ansel et al.", 2024, "PyTorch 2: Faster Machine Learning Through Dynamic "
                        "Python Bytecode Transformation and Graph Compilation (ASPLOS 2024)",
                        "https://doi.org/10.1145/3620665.3640366"),
    "patarasuk2009": Work("Patarasuk & Yuan", 2009, "Bandwidth Optimal All-reduce Algorithms "
                            "for Clusters of Workstations (JPDC 69(2))",
                            "https://doi.org/10.1016/j.jpdc.2008.09.002"),
    "hockney1994": Work("Hockney", 1994, "The Communication Challenge for MPP: Intel Paragon "
                          "and Meiko CS-2 (Parallel Computing 20(3))",
                          "https://doi.org/10.1016/S0167-8191(06)80021-9"),
    "pytorch-ddp-comm-hooks": Work("PyTorch docs", 2025, "DDP Communication Hooks",
                                     "https://docs.pytorch.org/docs/stable/ddp_comm_hooks.html"),
    "vogels2019": Work("Vogels et al.", 2019, "PowerSGD: Practical Low-Rank Gradient "
                         "Compression for Distributed Optimization",
                         "https://arxiv.org/abs/1905.13727"),
    "mccandlish2018": Work("McCandlish et al.", 2018, "An Empirical Model of Large-Batch "
                             "Training", "https://arxiv.org/abs/1812.06162"),
    "kingma2015": Work("Kingma & Ba", 2015, "Adam: A Method for Stochastic Optimization "
                         "(ICLR 2015)", "https://arxiv.org/abs/1412.6980"),
}
