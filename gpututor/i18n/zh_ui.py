"""Simplified Chinese for the widgets and figures of ``gpututor/ui`` (English template ->
Chinese), one section per module. Plotly hover templates (``%{x}``) are keys as they are."""

UI = {
    # ---- ui/panel.py: the run panel --------------------------------------------------------
    "Run": "运行",
    "Stop": "停止",
    "ready": "就绪",
    "starting": "启动中",
    "running": "运行中",
    "finished": "已完成",
    "failed": "失败",
    "invalid": "输入有误",
    "stopping": "正在停止",
    "stopped": "已停止",
    "press Run (worker processes are warming up meanwhile)": "点击“运行”（工作进程正在预热）",
    "starting {n} rank(s) on {device} ({why})...": "正在 {device} 上启动 {n} 个进程（rank）（{why}）……",
    "step {step} of {steps} on {n} rank(s)": "第 {step} 步，共 {steps} 步，{n} 个进程",
    "ending every rank...": "正在结束所有进程……",
    "after {steps} complete steps; every rank has ended": "已完成 {steps} 步；所有进程均已结束",
    "not measured (no browser has drawn it)": "未测量（没有浏览器绘制它）",
    "{seconds:.3f} s ({share:.1f} % of the run's wall time)": "{seconds:.3f} 秒（占本次运行墙钟时间的 {share:.1f} %）",
    "part of what the live view cost: {redraws} redraws; the panel's kernel thread "
    "{cpu:.3f} s of CPU ({share:.1f} % of the run's wall time); the browser's drawing "
    "code {browser} (not counted: sending the messages, and the browser's painting)":
        "实时视图的部分开销：重绘 {redraws} 次；面板在 Jupyter 内核中的线程用了 {cpu:.3f} 秒 CPU（占本次运行墙钟时间的 {share:.1f} %）；"
        "浏览器的绘制代码 {browser}（未计入：发送消息，以及浏览器的渲染上屏）",
    "could not start: {error}": "无法启动：{error}",
    "the panel could not draw: {error}": "面板无法绘图：{error}",
    "{strategy} on {n} rank(s), {model} {size}, global batch {batch}":
        "{strategy}，{n} 个进程，{model} {size}，全局批次大小 {batch}",
    "loss (mean over ranks)": "损失（各进程平均）",
    "tokens/s of each rank": "各进程的 tokens/s",
    "memory per rank (MB)": "各进程显存/内存（MB）",
    "last step per rank (ms)": "各进程最近一步耗时（ms）",
    "loss": "损失",
    "step": "步数",
    "compute": "计算",
    "waiting for communication": "等待通信",
    "waiting for communication (EMULATED link)": "等待通信（模拟链路）",
    "rank {rank}": "进程 {rank}",
    "rank {rank} tokens/s": "进程 {rank} 的 tokens/s",
    # the panel's controls: RunSpec fields (the values in them stay code: strategy names etc.)
    "model": "模型",
    "model size": "模型规模",
    "strategy": "策略",
    "world size": "进程数",
    "batch size": "批次大小",
    "seq len": "序列长度",
    "steps": "步数",
    "precision": "精度",
    "lr": "学习率",
    "optimizer": "优化器",      # also a memory category and a phase of the step
    "device": "设备",
    "grad accum": "梯度累积",

    # ---- ui/series.py: sentences about runs --------------------------------------------------
    "n/a": "无",
    "{steps} steps of {strategy} on {n} rank(s): {tokens} tokens/s (all ranks), median step "
    "{step_s} s, loss {first} at the first step, {last} at the last":
        "{strategy} 在 {n} 个进程上运行 {steps} 步：{tokens} tokens/s（所有进程合计），"
        "单步中位数 {step_s} s，损失首步 {first}，末步 {last}",
    "Weak scaling: one of the two runs has no measured throughput.":
        "弱扩展：两次运行中有一次没有测得吞吐量。",
    "every rank kept its single-rank speed": "每个进程都保持了单进程时的速度",
    "communication was not measured": "通信未测量",
    "waiting for communication took {waited:.0f} ms of each {step:.0f} ms step":
        "每个 {step:.0f} ms 的步中有 {waited:.0f} ms 在等待通信",
    "{lost:.0%} of the ideal throughput was lost: {cause}; the rest is other overhead, such as "
    "ranks sharing this machine":
        "理想吞吐量损失了 {lost:.0%}：{cause}；其余是其他开销，例如多个进程共用这台机器",
    "Weak scaling, {batch} sequences per rank: {n} ranks processed {ratio:.2f}x the tokens/s of "
    "one rank (ideal {n}x), an efficiency of {efficiency:.0%}; a step took {step_ratio:.2f}x as "
    "long as one rank's. So {verdict}.":
        "弱扩展，每个进程 {batch} 条序列：{n} 个进程的 tokens/s 是单进程的 {ratio:.2f}x"
        "（理想值 {n}x），效率 {efficiency:.0%}；每步耗时是单进程的 {step_ratio:.2f}x。"
        "也就是说，{verdict}。",

    # ---- runtime/summary.py: a failure and the restart after it (the panel's loss plot) -----
    "rank {rank} failed at step {step}; restarted from step {resumed} (attempt {attempt} of "
    "{attempts})":
        "进程 {rank} 在第 {step} 步失败；已从第 {resumed} 步重启（第 {attempt} 次尝试，共 {attempts} 次）",
    "rank {rank} failed at step {step} (attempt {attempt} of {attempts}); no restart left":
        "进程 {rank} 在第 {step} 步失败（第 {attempt} 次尝试，共 {attempts} 次）；没有剩余的重启次数",

    # ---- ui/comparison.py: speedup over one rank --------------------------------------------
    "ideal (N ranks = N×)": "理想值（N 个进程 = N×）",
    "speedup over one rank (tokens/s, same model and global batch)":
        "相对单进程的加速比（tokens/s，相同模型与全局批次大小）",
    "ranks (world size)": "进程数（world size）",
    "weak scaling, {batch} sequences per rank": "弱扩展，每个进程 {batch} 条序列",
    "Weak scaling: tokens/s over one rank, the same batch per rank":
        "弱扩展：相对单进程的 tokens/s，每个进程的批次相同",
    "tokens/s over one rank": "相对单进程的 tokens/s",
    "speedup": "加速比",
    "the 1-rank run ran on {there}, this one on {here}; a speedup across kinds of device would "
    "compare the devices, not the parallelism, so none is given (pin both: RunSpec.pin_device)":
        "单进程那次运行在 {there} 上，这次在 {here} 上；跨设备类型的加速比比较的是设备而不是"
        "并行方式，所以不给出（请把两者固定到同一种设备：RunSpec.pin_device）",
    "no 1-rank run of the same model and batch yet, so no speedup.":
        "还没有相同模型和批次大小的单进程运行，因此没有加速比。",
    "{strategy} on {n} ranks ({label}): {why}": "{strategy}，{n} 个进程（{label}）：{why}",
    "communication not measured for this strategy": "此策略未测量通信",
    "compute {compute:.0f} ms, waiting for communication {comm:.0f} ms":
        "计算 {compute:.0f} ms，等待通信 {comm:.0f} ms",
    "{strategy} on {n} ranks: {tokens:,.0f} tokens/s vs {baseline:,.0f} on 1 rank = "
    "{speedup:.2f}× (ideal {n}×, scaling efficiency {efficiency:.0%}). Per step and rank: "
    "{split}.":
        "{strategy}，{n} 个进程：{tokens:,.0f} tokens/s，单进程为 {baseline:,.0f}，"
        "加速比 {speedup:.2f}×（理想值 {n}×，扩展效率 {efficiency:.0%}）。每步每进程：{split}。",
    "No run on more than one rank yet.": "还没有多于一个进程的运行。",
    "not measured": "未测量",
    "run": "运行",
    "ranks": "进程数",
    "efficiency": "效率",
    "compute ms/step": "计算 ms/步",
    "comm ms/step": "通信 ms/步",

    # ---- ui/sharding.py: lesson 03's board and figures ---------------------------------------
    "params": "参数",
    "grads": "梯度",
    "activations": "激活值",
    "(MB per rank, measured; the formula counts model state only; gap in bytes)":
        "（每进程 MB，实测；公式只计模型状态；gap 以字节计）",
    "Per-rank memory: measured bars, formula marks": "每进程显存：柱为实测，短横线为公式",
    "n/m: not measured": "n/m：未测量",
    "sent per step": "每步发送",
    "peak during a step": "一步中的峰值",
    "FSDP variants, measured per rank": "FSDP 的几种变体，按进程实测",
    "{category} (measured)": "{category}（实测）",
    "params+grads+optimizer (formula)": "参数+梯度+优化器状态（公式）",
    "peak during a step (measured)": "一步中的峰值（实测）",
    "Sent by each rank per step (measured, ring algorithms)": "每个进程每步发送的数据（实测，环形算法）",
    "MB per step": "MB/步",
    "ready: press Run": "就绪：点击“全部运行”",
    "Run all": "全部运行",
    "running <b>{label}</b> on {n} ranks": "正在 {n} 个进程上运行 <b>{label}</b>",
    "<b>{label}</b> failed: <pre>{error}</pre>": "<b>{label}</b> 失败：<pre>{error}</pre>",
    "finished {n} runs": "已完成 {n} 次运行",
    "failed: {error}": "失败：{error}",
    "memory of each rank (MB, measured)": "各进程显存（MB，实测）",
    "loss {label}": "损失 {label}",

    # ---- ui/planner.py: lesson 08's planner and calibration ---------------------------------
    "configuration": "配置",
    "GB per GPU": "每 GPU 显存（GB）",
    "days": "天数",
    "cost ({currency})": "费用（{currency}）",
    "meets deadline and budget": "满足期限和预算",
    "link-bound": "受限于链路",
    "yes": "是",
    "no": "否",
    "not priced": "未定价",
    "{gpu}: not priced (days only)": "{gpu}：未定价（只有天数）",
    "{gpu}: best layout per GPU count": "{gpu}：每个 GPU 数下的最佳布局",
    "{gpu}: the best": "{gpu}：最佳",
    "figure": "指标",
    "published": "发表值",
    "ratio": "比值",
    "implied MFU": "隐含 MFU",
    "none fits": "无可放下的布局",
    "deadline": "期限",
    "budget": "预算",
    "Cost against days, per GPU type (numbers: GPU count; every point fits)":
        "各 GPU 型号的费用与天数（数字为 GPU 数；每个点都放得下）",
    "assumptions": "假设",
    "HFU (share of peak)": "HFU（占峰值的比例）",
    "tokens per step": "每步 token 数",
    "share of link rate": "互连速率利用率",
    "backward hiding dp traffic": "反向传播掩盖的数据并行通信",
    "sequence parallel with tp": "张量并行时启用序列并行",
    "causal attention": "因果注意力",
    "; {gpu} has no bf16: fp16 with loss scaling": "；{gpu} 不支持 bf16：改用 fp16 并做损失缩放",
    "no configuration fits: see the notes": "没有放得下的配置：见说明",
    "notes": "说明",
    "none": "无",
    "why the first one": "为什么是第一个",
    "why even the largest tried does not fit": "为什么连试过的最大配置也放不下",
    "tokens": "token 数",
    "GPU": "GPU",
    "up to GPUs": "最多 GPU 数",
    "link in a node": "节点内互连",
    "budget ({currency})": "预算（{currency}）",
    "deadline (days)": "期限（天）",
    "{currency}/GPU-hour": "{currency}/GPU·小时",
    "{model} parameters ({layers} layers x {width}), {precision} with Adam, {tokens:.3g} "
    "tokens, {steps:,} steps of {per_step:,} tokens":
        "{model} 参数（{layers} 层 × {width}），{precision} 配 Adam，{tokens:.3g} 个 token，"
        "{steps:,} 步、每步 {per_step:,} 个 token",
    "peak memory per rank (MB)": "各进程峰值显存（MB）",
    "step time (ms)": "单步耗时（ms）",
    "measured": "实测",
    "predicted": "预测",
    "The planner's predictions and the measured runs, on this machine": "规划器的预测与本机上的实测运行",
    # lesson 00's common claims (ui/claims.py, lessons/results.py)
    "claim": "说法",
    "measured in lesson": "在哪一课测量",
    "what your run showed": "你的运行显示",
    "not measured yet: run lesson {lesson}": "尚未测量：请先运行第 {lesson} 课",
    "Data parallel is for models too big for one card.": "数据并行是为单卡放不下的大模型准备的。",
    "N cards train N times faster.": "N 张卡就能快 N 倍。",
    "Mixed precision always saves memory and time.": "混合精度总能省显存、省时间。",
    "Compression avoids the need for more cards.": "有了压缩就不需要更多的卡。",
    "each of {world_size:.0f} data-parallel ranks held {params_ratio:.2f}x the parameters of one process: the whole model, so data parallel does not make a model fit":
        "{world_size:.0f} 个数据并行进程各自持有单进程 {params_ratio:.2f} 倍的参数：即整个模型，所以数据并行并不能让放不下的模型放得下",
    "{world_size:.0f} ranks ran {speedup:.2f}x as fast as one here": "在本机上，{world_size:.0f} 个进程的速度是一个进程的 {speedup:.2f} 倍",
    "bf16 autocast took {time_ratio:.2f}x the time of fp32 per step and {memory_ratio:.2f}x its peak memory here":
        "在本机上，bf16 自动混合精度每步耗时是 fp32 的 {time_ratio:.2f} 倍，峰值内存是它的 {memory_ratio:.2f} 倍",
    "int8 weights made the model {size_ratio:.2f}x the size, for a validation loss {loss_change:+.3f} from fp32; compression shrinks a trained model for inference, not the training state":
        "int8 权重使模型大小变为 {size_ratio:.2f} 倍，验证损失比 fp32 变化 {loss_change:+.3f}；压缩缩小的是训练好、用于推理的模型，而不是训练时的状态",
    # hardware.py summary(): lesson 00's first printed lines
    "CPU cores this process may use: {usable} (the machine has {machine})":
        "本进程可用的 CPU 核心：{usable} 个（整台机器有 {machine} 个）",
    "PyTorch {torch}, built with CUDA {cuda}": "PyTorch {torch}，带 CUDA {cuda} 构建",
    "PyTorch {torch}, CPU build": "PyTorch {torch}，CPU 版本",
    "No CUDA GPU visible: each rank will be a CPU process with one thread.":
        "看不到 CUDA GPU：每个进程（rank）都将是一个只用一个线程的 CPU 进程。",
    # i18n.error_text: the frame of a bad-input error shown in a widget
    "allowed: {what}": "允许的值：{what}",
    "{field}={value} is invalid: {rest}": "{field}={value} 无效：{rest}",
}
