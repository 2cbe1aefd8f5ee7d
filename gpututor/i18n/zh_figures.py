"""Simplified Chinese for the figures of ``gpututor/ui`` (English template -> Chinese), one
section per module, and for the titles the English notebooks pass to them. Plotly hover
templates (``%{x}``) are keys as they are; their ``%{...}`` parts stay."""

FIGURES = {
    # ---- ui/plots.py ------------------------------------------------------------------------
    "Time per phase of one step (median)": "一步中各环节的耗时（中位数）",
    "milliseconds": "毫秒",
    "forward": "前向",
    "backward": "反向",
    "Measured memory by category": "按类别的实测显存",
    "parameters": "参数",
    "gradients": "梯度",
    "optimizer state": "优化器状态",
    "Throughput and memory against the swept value": "吞吐量和显存随扫描值的变化",
    "throughput": "吞吐量",
    "memory": "显存",
    "peak memory": "峰值显存",
    "Training loss per step": "每步的训练损失",
    "What activation checkpointing trades": "激活重计算的取舍",
    "activation memory (MB)": "激活值显存（MB）",
    "Median step: compute and waiting for communication": "单步中位数：计算与等待通信",
    "whole step (communication not measured)": "整步（未测量通信）",
    "milliseconds per step": "每步毫秒数",
    "Collectives measured here": "本机实测的集合通信",
    "ring lower bound at {bandwidth:.2f} GB/s bus bandwidth":
        "环形算法下界（总线带宽 {bandwidth:.2f} GB/s）",
    "message size (bytes)": "消息大小（字节）",
    "time (µs)": "时间（µs）",
    "ideal {ideal}×": "理想值 {ideal}×",
    "speedup over one rank": "相对单进程的加速比",
    "Gradient magnitudes of one fp32 backward, and where fp16 loses them":
        "一次 fp32 反向传播的梯度大小，以及 fp16 在哪里丢失它们",
    "gradient entries": "梯度元素",
    "fp16: smallest > 0": "fp16：最小的正数",
    "fp16 subnormal below": "fp16：低于此为次正规数",
    "fp16 max": "fp16 最大值",
    "Loss scale per step: the from-scratch scaler and torch.amp.GradScaler":
        "每一步的损失缩放因子：从零实现的缩放器与 torch.amp.GradScaler",
    "ours": "我们的实现",
    "ours: step skipped": "我们的实现：跳过这一步",
    "GradScaler: step skipped": "GradScaler：跳过这一步",
    "loss scale": "损失缩放因子",
    "step (and its gradient)": "步（及其梯度）",
    "log2 |gradient|": "log2 |梯度|",
    "entries": "元素个数",

    # ---- ui/pipeline.py ----------------------------------------------------------------------
    "weight gradient (zero bubble)": "权重梯度（零气泡）",
    "stage {stage}": "阶段 {stage}",
    "virtual stage {stage}, micro-batch {micro_batch}": "虚拟阶段 {stage}，微批次 {micro_batch}",
    "ms since the step's first compute": "自本步第一次计算起的 ms",
    "Measured pipeline timeline": "实测的流水线时间线",
    "{title}: bubble {bubble:.0%} of the stage time": "{title}：气泡占阶段时间的 {bubble:.0%}",
    "Step {step}": "第 {step} 步",
    "Step {step} (last)": "第 {step} 步（最后一步）",
    "Pipeline bubble: measured vs (p-1)/(m+p-1)": "流水线气泡：实测值与 (p-1)/(m+p-1)",
    "theory, p={p}": "理论值，p={p}",
    "micro-batches m": "微批次数 m",
    "bubble fraction": "气泡占比",
    "Measured activation memory per stage": "各阶段的实测激活值显存",
    "Measured bubble per schedule, against the theory": "各调度的实测气泡与理论值",
    "with free hand-offs (replayed)": "交接不花时间时（按实测时长重放）",
    "added by handing over": "交接增加的部分",
    "theory": "理论值",
    "From scratch against torch.distributed.pipelining": "从零实现与 torch.distributed.pipelining 的对比",
    "from scratch": "从零实现",

    # ---- ui/one_device.py ---------------------------------------------------------------------
    "kept for backward (MB, measured)": "为反向保留的数据（MB，实测）",
    "forward + backward (ms, measured)": "前向 + 反向（ms，实测）",
    "sequence length T": "序列长度 T",
    "Attention three ways, on this machine": "注意力的三种算法，在本机上",
    "kept for backward (MB)": "为反向保留的数据（MB）",
    "step (ms)": "单步（ms）",
    "Recomputation policies, measured": "各种重计算策略，实测",
    "measured here": "本机实测",
    "emulated link (a sleep, not measured)": "模拟链路（sleep，非实测）",
    "One training step, optimizer on the device or the host": "一步训练：优化器在设备上或在主机上",
    "ms per step (median)": "每步 ms（中位数）",
    "tokens/s (measured)": "tokens/s（实测）",
    "peak memory (MB, measured)": "峰值显存（MB，实测）",
    "One device, before and after the levers": "单设备：用上各项手段之前与之后",
    "fits": "放得下",
    "out of memory": "显存不足",
    "capacity {mb:.0f} MB": "容量 {mb:.0f} MB",
    "What fits one device of this capacity": "这个容量的单个设备放得下什么",
    "MB (peak of a step, or held when it failed)": "MB（一步的峰值，或失败时已占用的量）",

    # ---- ui/roofline.py ------------------------------------------------------------------------
    "this machine, measured": "本机，实测",
    "{gpu}, catalogue (not measured)": "{gpu}，产品参数（非实测）",
    "{precision} peak; {source}": "{precision} 峰值；{source}",
    "operators, measured here": "算子，本机实测",
    "<b>%{customdata[0]}</b><br>achieved %{customdata[1]:.2f} GFLOP/s<br>intensity "
    "%{customdata[2]:.3g} FLOP/byte<br>%{customdata[3]} here<extra></extra>":
        "<b>%{customdata[0]}</b><br>实测 %{customdata[1]:.2f} GFLOP/s<br>算术强度 "
        "%{customdata[2]:.3g} FLOP/byte<br>在本机上%{customdata[3]}<extra></extra>",
    "memory-bound": "受限于访存",
    "compute-bound": "受限于计算",
    "Roofline: ridge at {ridge:.3g} FLOP/byte here": "屋顶线模型：本机的脊点在 {ridge:.3g} FLOP/byte",
    " (catalogue: {others})": "（产品参数：{others}）",
    "arithmetic intensity (FLOP/byte)": "算术强度（FLOP/byte）",

    # ---- ui/profile_view.py ----------------------------------------------------------------------
    "%{y}: %{x:.2f} ms self<br>%{customdata[0]} calls, %{customdata[1]:.1f} % of the wall time "
    "(%{customdata[2]})<extra></extra>":
        "%{y}：自身耗时 %{x:.2f} ms<br>调用 %{customdata[0]} 次，占墙钟时间的 "
        "%{customdata[1]:.1f} %（%{customdata[2]}）<extra></extra>",
    "Operators by self time (measured)": "按自身耗时排列的算子（实测）",
    "self time (ms)": "自身耗时（ms）",
    "copy": "拷贝",
    "other": "其他",
    "idle": "空闲",
    "phases": "环节",
    "operators": "算子",
    "between phases": "环节之间",
    "{phase}, step %{{customdata}}: %{{x:.2f}} ms from %{{base:.2f}} ms<extra></extra>":
        "{phase}，第 %{{customdata}} 步：从 %{{base:.2f}} ms 起，历时 %{{x:.2f}} ms<extra></extra>",
    "%{customdata[0]}: %{x:.3f} ms<br>%{customdata[1]}, step %{customdata[2]}<extra></extra>":
        "%{customdata[0]}：%{x:.3f} ms<br>%{customdata[1]}，第 %{customdata[2]} 步<extra></extra>",
    "Where the wall time went: {shares}": "墙钟时间花在了哪里：{shares}",
    "time since the first step (ms)": "自第一步起的时间（ms）",

    # ---- ui/moe.py ------------------------------------------------------------------------------
    "expert {expert}": "专家 {expert}",
    "Layer {layer}, step {step}: {dropped} of {slots} slots dropped, busiest expert "
    "x{ratio:.2f} the mean":
        "第 {layer} 层，第 {step} 步：{slots} 个槽位中丢弃了 {dropped} 个，"
        "最忙的专家是平均负载的 {ratio:.2f} 倍",
    "slots per expert (latest step)": "每个专家的槽位（最新一步）",
    "kept": "保留",
    "dropped (over capacity)": "丢弃（超出容量）",
    "busiest / mean": "最忙 / 平均",
    "MB sent by rank 0": "进程 0 发送的 MB",
    "MB sent": "发送的 MB",

    # ---- ui/long_context.py --------------------------------------------------------------------
    "{n} ranks": "{n} 个进程",
    "contiguous": "连续切分（contiguous）",
    "zigzag": "锯齿形切分（zigzag）",
    "visible query-key pairs": "可见的 query-key 对",
    "Causal attention's work per rank: contiguous and zig-zag splits":
        "因果注意力在各进程上的计算量：连续切分与锯齿形切分",
    "Activations kept for backward by rank 0 (measured)": "进程 0 为反向保留的激活值（实测）",

    # ---- ui/layouts.py ----------------------------------------------------------------------------
    "{dim} groups ({n} ranks each)": "{dim} 组（每组 {n} 个进程）",
    "Rank grid {shape}: same colour = same group": "设备网格 {shape}：同色即同组",
    "Measured memory per rank, by layout": "各布局下每个进程的实测显存",
    "peak (measured)": "峰值（实测）",
    "capacity {mb:.1f} MB": "容量 {mb:.1f} MB",
    "MB per rank": "每进程 MB",

    # ---- ui/compression.py -------------------------------------------------------------------------
    "What each compression buys, and costs (measured in one run)":
        "每种压缩方法的收益与代价（在同一次运行中实测）",
    "size on disk (MB)": "磁盘占用（MB）",
    "CPU latency per batch (ms)": "每批的 CPU 延迟（ms）",
    "validation loss": "验证损失",
    "Validation loss against the fraction of weights pruned": "验证损失随剪枝权重比例的变化",
    "weights pruned (%)": "剪枝的权重（%）",
    "One Linear's matmul, dense kernel and sparse CSR, against the weights pruned (measured here)":
        "一个 Linear 层的矩阵乘法：稠密内核与稀疏 CSR，随剪枝权重比例的变化（本机实测）",
    "dense kernel": "稠密内核",
    "sparse CSR": "稀疏 CSR",
    "time per matmul (µs)": "每次矩阵乘法的耗时（µs）",

    # ---- titles the English notebooks pass (tests/test_i18n.py finds them there) -----------------
    "2 ranks over 1 rank on an EMULATED link": "模拟链路上 2 个进程相对 1 个进程的加速比",
    "Adam with fp32 and with 8-bit state": "Adam：fp32 状态与 8-bit 状态",
    "From-scratch mixed precision: loss per step": "从零实现的混合精度：每步的损失",
    "Measured activations per stage, 8 micro-batches": "各阶段的实测激活值，8 个微批次",
    "Measured memory of rank 0 by tensor-parallel degree": "进程 0 的实测显存，按张量并行度",
    "Measured memory per rank: one process and three 2-D layouts":
        "每个进程的实测显存：单进程与三种二维布局",
    "Tensor parallel on 2 ranks over one process, the same batches":
        "2 个进程上的张量并行相对单进程的加速比，相同的批次",
    "Plain DDP and PowerSGD: loss per step, the same batches":
        "普通 DDP 与 PowerSGD：每步的损失，相同的批次",
    "Median step on EMULATED links: compute and waiting": "模拟链路上的单步中位数：计算与等待",
    "Median step on an EMULATED link: compute and waiting": "一条模拟链路上的单步中位数：计算与等待",
    "Median step: compute and all-to-all (measured)": "单步中位数：计算与全对全通信（实测）",
    "Median step: compute and waiting for the ring (measured)": "单步中位数：计算与等待环上的传递（实测）",
    "Student: cross-entropy on the true next character, per step": "学生模型：每步在真实下一个字符上的交叉熵",
    "fp32 and bf16 autocast: the same run, loss per step": "fp32 与 bf16 autocast：同一次运行，每步的损失",
    "naive, measured": "朴素调度（naive），实测",
    "1F1B, m=8, measured": "1F1B，m=8，实测",
    "pp-torch ZBV, m=4, measured": "pp-torch ZBV，m=4，实测",
    # series and bar labels the lessons pass to the figures (tr'd where they are drawn)
    "batch 32 in one go": "一次算完 32 条的批次",
    "4 micro-batches of 8": "4 个 8 条的微批次",
    "plain": "普通",
    "checkpointed": "激活检查点",
    "plain DDP": "普通 DDP",
    "PowerSGD rank 1": "PowerSGD，秩 1",
    "uninterrupted, 2 ranks": "不中断，2 个进程",
    "resumed at step 4 on 1 rank": "在 1 个进程上从第 4 步恢复",
    "bf16 autocast": "bf16 自动混合精度",
    "pruned, no fine-tune": "剪枝，不微调",
    "student alone": "单独训练的学生模型",
    "student distilled": "蒸馏得到的学生模型",
    "single (no cap)": "single（不设容量上限）",
    "one rank": "单进程",
    # ui/moe.py capacity_factor_figure (lesson 11)
    "What the capacity factor trades, measured": "容量因子的取舍（实测）",
    "slots dropped at the last step (%)": "最后一步被丢弃的槽位（%）",
    "final loss": "最终损失",
    "capacity factor": "容量因子",
    # lesson 09: the planner's prediction per layout beside the measured peak
    "The planner's prediction per layout, and the measured peak": "规划器对每种布局的预测，以及实测峰值",
    "predicted (formula)": "预测值（公式）",
    "largest peak (measured)": "最大峰值（实测）",
    "does not fit": "放不下",
    "{share:.0%} of the capacity: the planner's limit": "容量的 {share:.0%}：规划器的上限",
}
