"""Simplified Chinese for the sentences lessons print with ``say()`` (English template -> Chinese)."""

PRINTS_A = {
    # ---- 00 start here ------------------------------------------------------------------------
    "This process may use {cores} core(s): 2 ranks can be at most {bound}× one rank here.":
        "本进程可以使用 {cores} 个核心：在这里，2 个进程最多是 1 个进程的 {bound}×。",
    "two independent runs of {sequences} sequences, at once: {tokens_per_s:,.0f} tokens/s together":
        "两个相互独立的运行同时进行，各 {sequences} 条序列：合计 {tokens_per_s:,.0f} tokens/s",
    "DDP on 2 ranks: {tokens_per_s:,.0f} tokens/s = {share:.2f} of that ceiling "
    "(above 1.0: run-to-run noise on a shared machine)":
        "2 个进程上的 DDP：{tokens_per_s:,.0f} tokens/s = 这一上限的 {share:.2f}"
        "（超过 1.0：共享机器上各次运行之间的波动）",
    "DDP on 2 ranks: {tokens_per_s:,.0f} tokens/s = {share:.2f} of that ceiling":
        "2 个进程上的 DDP：{tokens_per_s:,.0f} tokens/s = 这一上限的 {share:.2f}",
    "without a live view: DDP on 2 ranks {ddp:,.0f} tokens/s, one rank {one:,.0f} tokens/s, "
    "speedup {speedup:.2f}× (the panels above, each with its live view: {panels})":
        "不带实时视图：2 个进程上的 DDP {ddp:,.0f} tokens/s，单个进程 {one:,.0f} tokens/s，"
        "加速比 {speedup:.2f}×（上面各自带实时视图的面板：{panels}）",
    # lessons/contention.py view_gap_line: the panels' speedup beside the view's measured cost
    "The two speedups cannot be compared: one of them, or the view's cost, was not measured.":
        "这两个加速比无法比较：其中一个，或者视图的开销，未测量。",
    "The panels' speedup is {pct:.0f} % lower than the one without a view.":
        "面板测到的加速比比不带视图的低 {pct:.0f} %。",
    "The panels' speedup is {pct:.0f} % higher than the one without a view.":
        "面板测到的加速比比不带视图的高 {pct:.0f} %。",
    "The panels' speedup is the same as the one without a view, to 0.5 %.":
        "面板测到的加速比与不带视图的相同（差别在 0.5 % 以内）。",
    "During its run the DDP panel's view used {kernel:.2f} CPU-s in the kernel and {browser:.2f} s "
    "of drawing in the browser: {share:.1%} of the {ranks} ranks' CPU time (the browser's layout "
    "and messages are not counted).":
        "在它的运行期间，DDP 面板的视图在内核中用了 {kernel:.2f} CPU 秒，在浏览器中绘图用了 {browser:.2f} 秒："
        "占 {ranks} 个进程 CPU 时间的 {share:.1%}（浏览器的布局和消息处理没有计入）。",
    "During its run the DDP panel's view used {kernel:.2f} CPU-s in the kernel, {share:.1%} of the "
    "{ranks} ranks' CPU time. The browser's drawing time was not reported (nothing has drawn the "
    "view, or, under Run All, the browser's report waits until the queued cells have run), and its "
    "layout and messages are not counted.":
        "在它的运行期间，DDP 面板的视图在内核中用了 {kernel:.2f} CPU 秒，占 {ranks} 个进程 CPU 时间的 {share:.1%}。"
        "浏览器的绘图时间没有报告过来（还没有任何东西绘制这个视图；或者在“运行全部”时，浏览器的报告要等排队的"
        "单元格都运行完才送到），它的布局和消息处理也没有计入。",
    "It is not lower: nothing here says the view slowed DDP down.":
        "它并不更低：这里没有任何数据表明视图拖慢了 DDP。",
    "The view's measured share is as large as the difference: it can account for all of it.":
        "视图测到的占比与这个差距一样大：足以解释整个差距。",
    "The difference is larger than the view's measured share. The rest is in something not "
    "measured here: the browser's work that is not counted, or the variation from one run to the "
    "next on a shared machine.":
        "差距比视图测到的占比更大。其余部分来自这里没有测量的东西：没有计入的浏览器工作，"
        "或者共享机器上每次运行之间的波动。",
    "These ranks computed on GPUs: the view's CPU time competes with their host-side work only, "
    "not with the GPUs' compute.":
        "这些进程在 GPU 上计算：视图的 CPU 时间只与它们在主机一侧的工作争用，不占用 GPU 的计算。",
    "Run this cell again for a second speedup without any view, and compare.":
        "再运行一次这个单元格，得到第二个不带任何视图的加速比，比较一下。",
    "A run without a live view measured no steady tokens/s: nothing to compare.":
        "不带实时视图的某次运行没有测到稳定阶段的 tokens/s：无法比较。",
    # lessons/contention.py matmul_rate_line: do a rank's smaller matmuls run at a lower rate?
    "matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, "
    "{rows} rows tall (one rank's whole batch) at {whole:.1f}: the smaller pieces "
    "ran at {ratio:.0%} of the rate, so each rank got less done per second of core time here":
        "每个进程那一份大小的矩阵乘法（{part_rows} 行高）达到 {part:.1f} GFLOP/s，单进程整个批次的（{rows} 行高）为 {whole:.1f}："
        "较小的工作块只达到了 {ratio:.0%} 的速率，所以在这里每个进程每秒核心时间完成的工作更少",
    "matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, "
    "{rows} rows tall (one rank's whole batch) at {whole:.1f}: the smaller pieces "
    "ran faster ({ratio:.0%} of the rate), so they cost no efficiency here":
        "每个进程那一份大小的矩阵乘法（{part_rows} 行高）达到 {part:.1f} GFLOP/s，单进程整个批次的（{rows} 行高）为 {whole:.1f}："
        "较小的工作块反而更快（速率的 {ratio:.0%}），所以在这里它们没有损失效率",
    "matmuls {part_rows} rows tall (a rank's share) ran at {part:.1f} GFLOP/s, "
    "{rows} rows tall (one rank's whole batch) at {whole:.1f}: within 5 % of each other "
    "({ratio:.0%}), so the smaller pieces cost little here":
        "每个进程那一份大小的矩阵乘法（{part_rows} 行高）达到 {part:.1f} GFLOP/s，单进程整个批次的（{rows} 行高）为 {whole:.1f}："
        "两者相差不到 5 %（{ratio:.0%}），所以在这里较小的工作块几乎没有代价",
    # lessons/contention.py explain_gap: where DDP's time per step went
    "No steady step times were measured, so the steps cannot be compared.":
        "没有测到稳定阶段的单步时间，所以无法比较各步。",
    "Median steady step: DDP {ddp:.0f} ms (its slowest rank), the independent runs "
    "{independent:.0f} ms on average. This strategy's communication time is not measured, so the "
    "step is not split.":
        "稳定阶段单步时间的中位数：DDP {ddp:.0f} ms（取最慢的进程），独立运行平均 {independent:.0f} ms。"
        "这个策略的通信时间没有测量，所以不拆分单步时间。",
    "Median steady step: DDP {ddp:.0f} ms (its slowest rank); a DDP rank, on average, computed "
    "{compute:.0f} ms and waited {comm:.0f} ms at the all-reduce (that wait includes waiting for "
    "the other rank to get there). The independent runs: {independent:.0f} ms per step on average, "
    "all of it compute; they differed from each other by {spread:.0f} ms.":
        "稳定阶段单步时间的中位数：DDP {ddp:.0f} ms（取最慢的进程）；DDP 的一个进程平均计算 {compute:.0f} ms，"
        "在全归约处等待 {comm:.0f} ms（这段等待也包括等另一个进程到达）。独立运行：平均每步 {independent:.0f} ms，"
        "全部是计算；两个独立运行彼此相差 {spread:.0f} ms。",
    "a DDP rank computed {ms:.0f} ms more per step than an independent run":
        "DDP 的每个 rank 每步比一个独立运行多计算了 {ms:.0f} ms",
    "a DDP rank computed {ms:.0f} ms less per step than an independent run":
        "DDP 的每个 rank 每步比一个独立运行少计算了 {ms:.0f} ms",
    "Both differences, {compute} and the wait of {comm:.0f} ms, are within how much the two "
    "independent runs differed: here they cannot be told apart from run-to-run variation.":
        "两处差异（{compute}；等待 {comm:.0f} ms）都不超过两个独立运行之间的差异："
        "在这里无法把它们与各次运行之间的波动区分开。",
    "Most of DDP's extra time per step was the wait at the all-reduce ({comm:.0f} ms; {compute}).":
        "DDP 每步多出的时间主要是在全归约处的等待（{comm:.0f} ms；{compute}）。",
    "Most of DDP's extra time per step was compute beyond the independent runs' ({extra:+.0f} ms, "
    "against {comm:.0f} ms of waiting) for the same work: DDP's own work during backward counts "
    "there (copying gradients into buckets; on CPU ranks the overlapped all-reduce also runs on the "
    "same cores), not measured separately here.":
        "DDP 每步多出的时间主要是做同样的工作却比独立运行多花的计算时间（{extra:+.0f} ms，而等待是 {comm:.0f} ms）："
        "DDP 在反向传播期间自己的工作算在这里（把梯度复制进桶里；在 CPU 进程上，与反向传播重叠的全归约也在同样的核心上运行），"
        "这里没有单独测量。",
    "parameters: {params:,}": "参数个数：{params:,}",

    # ---- 01 single device ---------------------------------------------------------------------
    "{seconds:.0f} s since the first cell ran: with Run All, how long this notebook takes here; "
    "run cell by cell, your reading time too":
        "从第一个单元格运行到现在共 {seconds:.0f} s：如果用的是全部运行（Run All），这就是本笔记本在这里运行所需的时间；"
        "如果逐个单元格运行，其中也包括你阅读的时间",
    "{params:,} parameters, {tokens:,} tokens per step, median step {step_ms:.0f} ms on {device}":
        "{params:,} 个参数，每步 {tokens:,} 个 token，在 {device} 上单步中位数 {step_ms:.0f} ms",
    "backward / forward = {ratio:.2f}; optimizer = {share:.1%} of the step":
        "反向 / 前向 = {ratio:.2f}；优化器 = 一步时间的 {share:.1%}",
    "N = {n:,} matmul weights, of {params:,} parameters":
        "N = {n:,} 个矩阵乘法权重，全部参数共 {params:,} 个",
    "fraction of this machine's measured matmul rate: {share:.0%} (not MFU)":
        "占本机实测矩阵乘法速率的比例：{share:.0%}（不是 MFU）",
    "MFU against the datasheet peak: {mfu:.1%}": "相对数据手册峰值的 MFU：{mfu:.1%}",
    "MFU against the datasheet peak: unknown for this device": "相对数据手册峰值的 MFU：此设备未知",
    "activations / (parameters + gradients + optimizer state) = {ratio:.1f}":
        "激活值 / (参数 + 梯度 + 优化器状态) = {ratio:.1f}",
    "peak of live tensors during the step: {peak_mb:.1f} MB": "这一步中存活张量的峰值：{peak_mb:.1f} MB",
    "largest loss difference over {steps} steps: {gap:.1e}": "{steps} 步中损失的最大差异：{gap:.1e}",
    "activations x{activations:.2f}, step time x{step_time:.2f}, counted FLOPs x{flops:.2f}":
        "激活值 x{activations:.2f}，单步时间 x{step_time:.2f}，统计的 FLOPs x{flops:.2f}",
    "largest loss difference: {gap:.1e}": "损失的最大差异：{gap:.1e}",
    "counted (FlopCounterMode): {gflop:.4f} GFLOP per step": "统计值（FlopCounterMode）：每步 {gflop:.4f} GFLOP",
    "6·N·tokens + attention:    {gflop:.4f} GFLOP per step": "6·N·tokens + 注意力：     每步 {gflop:.4f} GFLOP",
    "achieved by the training step:      {gflops:6.1f} GFLOP/s": "训练步实际达到的速率：      {gflops:6.1f} GFLOP/s",
    "plain matmuls of the same shapes:   {gflops:6.1f} GFLOP/s": "同样形状的普通矩阵乘法：    {gflops:6.1f} GFLOP/s",
    "parameters {params:.2f} MB | gradients {grads:.2f} MB | optimizer state {optimizer:.2f} MB | "
    "activations {activations:.2f} MB":
        "参数 {params:.2f} MB | 梯度 {grads:.2f} MB | 优化器状态 {optimizer:.2f} MB | 激活值 {activations:.2f} MB",
    "step time:   {before:.0f} ms -> {after:.0f} ms (x{ratio:.2f})": "单步时间：{before:.0f} ms -> {after:.0f} ms（x{ratio:.2f}）",
    "activations: {before:.1f} MB -> {after:.1f} MB (x{ratio:.2f})": "激活值：  {before:.1f} MB -> {after:.1f} MB（x{ratio:.2f}）",
    "recomputation added {extra:.2f} of one forward pass's FLOPs (a forward is about 1/3 of a step's)":
        "重计算增加的 FLOPs 相当于一次前向传播的 {extra:.2f}（一次前向约占一步 FLOPs 的 1/3）",

    # ---- 01b one device -----------------------------------------------------------------------
    "{name}: same output and same gradients of q, k and v as ordinary attention":
        "{name}：输出以及 q、k、v 的梯度都与普通注意力相同",
    "T = {half} -> {T}: naive keeps x{naive:.1f}, tiled x{tiled:.1f} (x4 would be T², x2 would be T)":
        "T = {half} -> {T}：普通注意力保留的数据 x{naive:.1f}，分块注意力 x{tiled:.1f}"
        "（x4 说明随 T² 增长，x2 说明随 T 增长）",
    "at T = {T}: naive keeps {naive_mb:.1f} MB, tiled {tiled_mb:.2f} MB, sdpa {sdpa_mb:.2f} MB":
        "T = {T} 时：普通注意力保留 {naive_mb:.1f} MB，分块注意力 {tiled_mb:.2f} MB，sdpa {sdpa_mb:.2f} MB",
    "time at T = {T}: tiled / naive = {tiled:.2f}, sdpa / naive = {sdpa:.2f}":
        "T = {T} 时的耗时：分块 / 普通 = {tiled:.2f}，sdpa / 普通 = {sdpa:.2f}",
    "{policies}: the same gradients as no recomputation":
        "{policies}：梯度与不重计算时相同",
    "{policy:>14}: keeps {mb:5.1f} MB for backward ({less:4.0%} less than none), step {ms:4.0f} ms ({extra:+.0f} ms)":
        "{policy:>14}：为反向保留 {mb:5.1f} MB（比不重计算少 {less:4.0%}），一步 {ms:4.0f} ms（{extra:+.0f} ms）",
    "here {here_gflops:.1f} GFLOP/s in a training step, an A100 {gpu_tflops:.0f} TFLOP/s "
    "({fraction:.0%} of its {peak_tflops:.0f} TFLOP/s peak): "
    "PCIe 4.0's {pcie_gbs:.1f} GB/s and {us:.0f} us are emulated as {link_mbs:.1f} MB/s and "
    "{ms:.0f} ms per copy":
        "本机训练步 {here_gflops:.1f} GFLOP/s，A100 {gpu_tflops:.0f} TFLOP/s（其峰值 {peak_tflops:.0f} TFLOP/s 的 {fraction:.0%}）："
        "PCIe 4.0 的 {pcie_gbs:.1f} GB/s 和 {us:.0f} us 被模拟为 {link_mbs:.1f} MB/s、每次拷贝 {ms:.0f} ms",
    "same losses all three ways; per step {to_host_mb:.2f} MB went to the host and "
    "{to_device_mb:.2f} MB back ({per_parameter:.0f} bytes per parameter)":
        "三种方式的损失相同；每步有 {to_host_mb:.2f} MB 传到主机，{to_device_mb:.2f} MB 传回"
        "（每个参数 {per_parameter:.0f} 字节）",
    "first compiled step {compile_s:.1f} s (compile included); again after a reset "
    "{recompile_s:.1f} s (Inductor's caches)":
        "编译后的第一步 {compile_s:.1f} s（含编译时间）；重置后再来一次 {recompile_s:.1f} s（Inductor 的缓存）",
    "steady forward + backward: eager {eager_ms:.0f} ms, compiled {compiled_ms:.0f} ms "
    "(x{speedup:.2f}); losses {eager_loss:.6f} and {compiled_loss:.6f}, "
    "gradients within {grad_diff:.1e}":
        "稳定后的前向 + 反向：即时执行（eager）{eager_ms:.0f} ms，编译后 {compiled_ms:.0f} ms"
        "（x{speedup:.2f}）；损失分别为 {eager_loss:.6f} 和 {compiled_loss:.6f}，"
        "梯度相差不超过 {grad_diff:.1e}",
    "the compile is repaid after about {steps:,.0f} steps": "编译的开销大约在 {steps:,.0f} 步之后收回",
    "compiled was not faster here: the compile is not repaid": "编译后的版本在这里并没有更快：编译的开销收不回来",
    "{kernels} generated kernels; {fused} fuse two or more operators, for example:":
        "生成了 {kernels} 个内核；其中 {fused} 个融合了两个或更多算子，例如：",
    "  one kernel computes {ops}": "  一个内核计算 {ops}",
    "the full trace: {trace} -> open https://ui.perfetto.dev and drop the file on it (or chrome://tracing)":
        "完整的 trace：{trace} -> 打开 https://ui.perfetto.dev，把这个文件拖到页面上（或者用 chrome://tracing）",
    "here: peak {peak_gflops:.0f} GFLOP/s, memory {bandwidth_gbs:.1f} GB/s, ridge at {ridge_here:.1f} FLOP/byte; "
    "{gpu} (datasheet, bf16): ridge at {ridge_gpu:.0f}":
        "本机：峰值 {peak_gflops:.0f} GFLOP/s，内存带宽 {bandwidth_gbs:.1f} GB/s，脊点在 {ridge_here:.1f} FLOP/byte；"
        "{gpu}（数据手册，bf16）：脊点在 {ridge_gpu:.0f}",
    "compute-bound here (fp32): {n_here} of {n_ops} operators ({ops_here}); on the {gpu} in bf16: {n_gpu} ({ops_gpu})":
        "本机（fp32）受计算限制的：{n_ops} 个算子中有 {n_here} 个（{ops_here}）；在 {gpu} 上（bf16）：{n_gpu} 个（{ops_gpu}）",
    "the most intense operator, {op}: {fp32:.0f} FLOP/byte in fp32, {bf16:.0f} in bf16, against the {gpu}'s ridge of {ridge_gpu:.0f}":
        "算术强度最高的算子 {op}：fp32 下 {fp32:.0f} FLOP/byte，bf16 下 {bf16:.0f}，而 {gpu} 的脊点在 {ridge_gpu:.0f}",
    "{name:>20}: largest loss gap to the row above {gap:.1e}":
        "{name:>20}：与上一行损失的最大差 {gap:.1e}",
    "within 1e-4 of the row above (float rounding): {same}; further: {other}":
        "与上一行相差不超过 1e-4（浮点舍入）：{same}；相差更大：{other}",
    "{name}: largest that fits is {size} ({millions:.2f} M parameters)":
        "{name}：放得下的最大模型是 {size}（{millions:.2f} M 个参数）",
    "{name}: nothing fits": "{name}：什么都放不下",

    # ---- 10 long context ----------------------------------------------------------------------
    "T x2 ({shorter} -> {longer}): one process x{one:.2f}, a cp rank x{cp:.2f}  (x2 = linear in T, x4 = quadratic)":
        "T x2（{shorter} -> {longer}）：单进程 x{one:.2f}，一个 cp 进程 x{cp:.2f}  "
        "（x2 = 随 T 线性增长，x4 = 随 T 平方增长）",
    "{world} ranks: every rank's output and q, k, v gradients equal full attention's "
    "(largest difference {worst:.1e})":
        "{world} 个进程：每个进程的输出以及 q、k、v 的梯度都与完整注意力的相同（最大差异 {worst:.1e}）",
    "{n} ranks: busiest / idlest rank = {contiguous:.1f} contiguous, {zigzag:.2f} zig-zag":
        "{n} 个进程：最忙进程 / 最闲进程 = 连续切分 {contiguous:.1f}，锯齿形切分 {zigzag:.2f}",
    "{name}: rank 0 holds {params_mb:.2f} MB of parameters and keeps "
    "{activations_mb:.1f} MB of activations; {sent_mb:.2f} MB sent per step":
        "{name}：进程 0 持有 {params_mb:.2f} MB 参数，保留 {activations_mb:.1f} MB 激活值；"
        "每步发送 {sent_mb:.2f} MB",
    "torch's context_parallel ran and equals full attention within {difference:.1e}":
        "torch 的 context_parallel 运行成功，与完整注意力的差异在 {difference:.1e} 以内",
    "torch's context_parallel did not run here: {error}": "torch 的 context_parallel 在这里没有运行起来：{error}",
    "SDPA ran {ops} here; this torch keeps the operators its ring replaces elsewhere":
        "SDPA 在这里运行的是 {ops}；这个版本的 torch 把它的环所替换的算子列表放在了别处",
    "SDPA ran {ops} here, which is among the operators torch's context_parallel replaces: {ring}":
        "SDPA 在这里运行的是 {ops}，它在 torch 的 context_parallel 所替换的算子之中：{ring}",
    "SDPA ran {ops} here, which is not among the operators torch's context_parallel replaces: {ring}":
        "SDPA 在这里运行的是 {ops}，它不在 torch 的 context_parallel 所替换的算子之中：{ring}",
    "its default exchange of keys and values in this torch: {method}":
        "这个版本的 torch 默认交换键和值的方式：{method}",
    "not known": "未知",
    "T = {T:>3}: one process keeps {one_mb:6.1f} MB, a cp=2 rank {cp_mb:5.1f} MB":
        "T = {T:>3}：单进程保留 {one_mb:6.1f} MB，cp=2 的一个进程保留 {cp_mb:5.1f} MB",
    "{name:>16}: final loss {loss:.5f}, {tokens_per_s:7,.0f} tokens/s, {sent_mb:5.2f} MB sent per step, "
    "rank 0 activations {activations_mb:5.1f} MB":
        "{name:>16}：最终损失 {loss:.5f}，{tokens_per_s:7,.0f} tokens/s，每步发送 {sent_mb:5.2f} MB，"
        "进程 0 的激活值 {activations_mb:5.1f} MB",
    "the two cp runs sent the same bytes per step: {zigzag_mb:.3f} MB":
        "两次 cp 运行每步发送的字节数相同：{zigzag_mb:.3f} MB",
    "the two cp runs sent different bytes per step: zig-zag {zigzag_mb:.3f} MB, contiguous {contiguous_mb:.3f} MB":
        "两次 cp 运行每步发送的字节数不同：锯齿形切分 {zigzag_mb:.3f} MB，连续切分 {contiguous_mb:.3f} MB",
    "median steady step: zig-zag {zigzag_ms:.0f} ms, contiguous {contiguous_ms:.0f} ms: zig-zag faster here (x{ratio:.2f})":
        "稳定阶段单步时间的中位数：锯齿形切分 {zigzag_ms:.0f} ms，连续切分 {contiguous_ms:.0f} ms："
        "在这里锯齿形切分更快（x{ratio:.2f}）",
    "median steady step: zig-zag {zigzag_ms:.0f} ms, contiguous {contiguous_ms:.0f} ms: zig-zag not faster here (x{ratio:.2f})":
        "稳定阶段单步时间的中位数：锯齿形切分 {zigzag_ms:.0f} ms，连续切分 {contiguous_ms:.0f} ms："
        "在这里锯齿形切分并不更快（x{ratio:.2f}）",
    "{name:>31}: {total_gb:5.1f} GB per GPU ({activations_gb:5.1f} GB activations), step {step:.2f} s "
    "of which exposed communication {comm:.2f} s":
        "{name:>31}：每张 GPU {total_gb:5.1f} GB（激活值 {activations_gb:5.1f} GB），单步 {step:.2f} s，"
        "其中暴露的通信 {comm:.2f} s",
    "tp=8 + sequence parallel": "tp=8 + 序列并行",
    "cp=8, ZeRO-3 over the cp ranks": "cp=8，在 cp 进程上做 ZeRO-3",
    "a ring hides its transfers if a block holds at least F/B tokens: {needed:,.0f} for an H100 (bf16) on "
    "NVLink 4, {causal:,.0f} with causal masking (half of each block computed); a cp=8 rank holds {block:,} "
    "tokens: {verdict}":
        "只要一个块至少有 F/B 个 token，环就能掩盖它的传输：H100（bf16）走 NVLink 4 时为 {needed:,.0f}，"
        "加上因果掩码（每个块只算一半）为 {causal:,.0f}；cp=8 的一个进程持有 {block:,} 个 token：{verdict}",
    "enough to hide them": "足以掩盖传输",
    "too few to hide them": "不足以掩盖传输",

    # ---- 07 compression: one row of a weight, quantized by hand --------------------------------
    "weights    {values}": "权重       {values}",
    "scale      {scale:.6f}   (= max|w| / 127 = {amax:.4f} / 127)":
        "缩放因子   {scale:.6f}   (= max|w| / 127 = {amax:.4f} / 127)",
    "int8       {values}": "int8       {values}",
    "back       {values}": "还原       {values}",

    # ---- 11 mixture of experts ----------------------------------------------------------------
    "token {t}: experts {experts} with gates {gates}": "token {t}：专家 {experts}，门控值 {gates}",
    "token {t}: experts {experts}, places in their queues {places} -> {fate}":
        "token {t}：专家 {experts}，在各自队列中的位置 {places} -> {fate}",
    "capacity {capacity} slots per expert": "容量：每个专家 {capacity} 个槽位",
    "step {step}: busiest expert x{busiest:.2f} the mean (worst layer), {dropped:.1%} of slots dropped":
        "第 {step} 步：最忙的专家是平均值的 x{busiest:.2f}（最不均衡的一层），{dropped:.1%} 的槽位被丢弃",
    "steps with the same tokens per expert as one rank: the first {identical} of {steps}":
        "每个专家分到的 token 数与单进程相同的步：{steps} 步中的前 {identical} 步",
    "relative loss difference per step: {differences}": "每步损失的相对差异：{differences}",
    "{sent_mb:.2f} MB sent per step by each rank": "每个进程每步发送 {sent_mb:.2f} MB",
    "median step: one rank {one:.0f} ms, ep=2 {two:.0f} ms: {ratio:.2f}x the one rank's, {verdict}":
        "中位单步：单进程 {one:.0f} ms，ep=2 {two:.0f} ms：是单进程的 {ratio:.2f} 倍，{verdict}",
    "{gpus} GPUs, ep={ep}: {gb:6.1f} GB of parameters, gradients and optimizer state per GPU: {verdict}":
        "{gpus} 张 GPU，ep={ep}：每张 GPU 上参数、梯度和优化器状态共 {gb:6.1f} GB：{verdict}",
    "fits an 80 GB H100, {left:.0f} GB left for activations":
        "放得进一张 80 GB 的 H100，还剩 {left:.0f} GB 给激活值",
    "does not fit an 80 GB H100": "放不进一张 80 GB 的 H100",
    # ---- 06 mixed precision (section 3) -------------------------------------------------------
    "ours and GradScaler: the same scale and the same skip decision at all {n} steps":
        "我们的实现与 GradScaler：全部 {n} 步的缩放因子和是否跳过的决定都相同",
    "ours and GradScaler decided differently at step(s) {steps}":
        "我们的实现与 GradScaler 在第 {steps} 步的决定不同",
}
