"""Simplified Chinese for the sentences lessons print with ``say()`` (English template -> Chinese)."""

PRINTS_B = {
    # ---- 02 data parallel ---------------------------------------------------------------------
    "{strategy:>12} on {world} rank(s): final loss {loss:.5f}, {tokens_per_s:,.0f} tokens/s":
        "{strategy:>12} 在 {world} 个进程上：最终损失 {loss:.5f}，{tokens_per_s:,.0f} tokens/s",
    "{strategy:>12}: same losses and weights as one process; largest weight difference {worst:.1e}":
        "{strategy:>12}：损失和权重与单进程相同；权重的最大差异 {worst:.1e}",
    "{name:>12}: waiting {wait_ms:.1f} ms of a {step_ms:.0f} ms step":
        "{name:>12}：{step_ms:.0f} ms 的一步中等待 {wait_ms:.1f} ms",
    "here DDP's step took {ratio:.2f}x the naive one's: faster":
        "在这里，DDP 的单步耗时是朴素版本的 {ratio:.2f} 倍：更快",
    "here DDP's step took {ratio:.2f}x the naive one's: not faster on this machine's loopback "
    "(the waits above are what communication cost here); section 4 makes the link slower":
        "在这里，DDP 的单步耗时是朴素版本的 {ratio:.2f} 倍：在本机的回环（loopback）上并不更快"
        "（上面的等待时间就是通信在这里的代价）；第 4 节会把链路变慢",
    "all-reduce here: {small_kb:.0f} KB took {small_us:.0f} us, {large_mb:.1f} MB {large_us:.0f} us: "
    "{more_bytes:,.0f}x the bytes in {more_time:,.1f}x the time, so at most {bytes_share:.1%} of the "
    "small one's time was its bytes: it was mostly fixed cost (latency)":
        "本机的全归约：{small_kb:.0f} KB 用了 {small_us:.0f} us，{large_mb:.1f} MB 用了 {large_us:.0f} us："
        "字节数是 {more_bytes:,.0f} 倍，时间是 {more_time:,.1f} 倍，所以小消息的耗时中最多 {bytes_share:.1%} "
        "花在字节上：它主要是固定开销（延迟）",
    "all-reduce here: {small_kb:.0f} KB took {small_us:.0f} us, {large_mb:.1f} MB {large_us:.0f} us: "
    "{more_bytes:,.0f}x the bytes in {more_time:,.1f}x the time, so at most {bytes_share:.1%} of the "
    "small one's time was its bytes: these two sizes cannot tell whether it was mostly fixed cost":
        "本机的全归约：{small_kb:.0f} KB 用了 {small_us:.0f} us，{large_mb:.1f} MB 用了 {large_us:.0f} us："
        "字节数是 {more_bytes:,.0f} 倍，时间是 {more_time:,.1f} 倍，所以小消息的耗时中最多 {bytes_share:.1%} "
        "花在字节上：仅凭这两个大小，无法判断它是否主要是固定开销",
    "PowerSGD rank 1 all-reduced {mb:.3f} MB per steady step, plain DDP {plain_mb:.2f} MB: "
    "{ratio:.0f}x fewer bytes":
        "PowerSGD（秩 1）每个稳定步全归约 {mb:.3f} MB，普通 DDP {plain_mb:.2f} MB：字节数少了 {ratio:.0f} 倍",
    "over {steps} steps the two losses differed by at most {gap:.4f} (final {loss:.4f} and {plain_loss:.4f})":
        "{steps} 步中两者的损失最多相差 {gap:.4f}（最终分别为 {loss:.4f} 和 {plain_loss:.4f}）",
    "{name:>34}: {speedup:.2f}x one rank, waiting {waiting:.0%} of each step":
        "{name:>34}：单进程的 {speedup:.2f} 倍，每步有 {waiting:.0%} 的时间在等待",
    "{cores} usable CPU cores here": "本机有 {cores} 个可用的 CPU 核心",
    "ddp on {world} ranks: {tokens_per_s:,.0f} tokens/s":
        "ddp 在 {world} 个进程上：{tokens_per_s:,.0f} tokens/s",
    "{name:>6}, rank 0 holds: {held}": "{name:>6}，进程 0 持有：{held}",
    "the resumed run's losses equal the uninterrupted run's from step 4 on":
        "从第 4 步起，恢复后的运行与未中断的运行损失相同",
    "reduce-scatter, then all-gather: all {n} ranks hold the sum of the {n} ranks' x":
        "先归约分散，再全收集：全部 {n} 个进程都持有 {n} 个进程的 x 之和",
    "reduce-scatter, then all-gather: on some rank the result differs from the sum of the {n} ranks' x":
        "先归约分散，再全收集：有进程的结果与 {n} 个进程的 x 之和不同",

    # ---- 03 sharding ----------------------------------------------------------------------------
    "Ψ = {n_params:,} parameters; data parallel, per rank (formula): {parts}":
        "Ψ = {n_params:,} 个参数；数据并行，每个进程（公式）：{parts}",
    "{name:>6}: largest loss difference from ddp over {steps} steps: {gap:.1e}":
        "{name:>6}：{steps} 步中与 ddp 的最大损失差异：{gap:.1e}",
    "{name:>6}: peak {peak_mb:5.1f} MB = {share:.0%} of ddp's; model state {state_mb:5.1f} MB":
        "{name:>6}：峰值 {peak_mb:5.1f} MB = ddp 的 {share:.0%}；模型状态 {state_mb:5.1f} MB",
    "{label:>6}: {mb:6.2f} MB sent per rank per step = {vs_ddp:.2f}x ddp; "
    "waiting {wait_ms:5.1f} ms of a {step_ms:4.0f} ms step":
        "{label:>6}：每个进程每步发送 {mb:6.2f} MB = ddp 的 {vs_ddp:.2f} 倍；"
        "{step_ms:4.0f} ms 的一步中等待 {wait_ms:5.1f} ms",
    "{label}: finished": "{label}：已完成",
    "{label:>17}: final loss {loss:.4f}, {diff:+.1e} from fsdp's":
        "{label:>17}：最终损失 {loss:.4f}，与 fsdp 相差 {diff:+.1e}",
    "zero3 on {world} ranks: model state per rank {state_mb:5.2f} MB (formula {formula_mb:5.2f}), "
    "activations {act_mb:4.1f} MB":
        "zero3 在 {world} 个进程上：每个进程的模型状态 {state_mb:5.2f} MB（公式 {formula_mb:5.2f}），"
        "激活值 {act_mb:4.1f} MB",
    "budget: {budget_mb:.1f} MB per rank": "预算：每个进程 {budget_mb:.1f} MB",

    # ---- 04 tensor parallel ---------------------------------------------------------------------
    "column split, then row split: the same Z, with one sum of partial results":
        "先按列切分，再按行切分：得到相同的 Z，只需对部分结果求一次和",
    "{strategy:>10} on {world} rank(s): final loss {loss:.5f}, {tokens_per_s:,.0f} tokens/s":
        "{strategy:>10} 在 {world} 个进程上：最终损失 {loss:.5f}，{tokens_per_s:,.0f} tokens/s",
    "{strategy:>10}: same losses as one process; largest weight difference {worst:.1e}":
        "{strategy:>10}：损失与单进程相同；权重的最大差异 {worst:.1e}",
    "DTensor, per block: {forward:.0f} all-reduces in forward, {backward:.0f} in backward":
        "DTensor，每个块：前向 {forward:.0f} 次全归约，反向 {backward:.0f} 次",
    "from scratch, per block: {count:.0f} all-reduces per step (measured bytes / bytes of one all-reduce)":
        "从零实现，每个块：每步 {count:.0f} 次全归约（实测字节数 / 一次全归约的字节数）",
    "all-reduced per step: {step_mb:.2f} MB, {block_mb:.2f} MB per block":
        "每步全归约：{step_mb:.2f} MB，每个块 {block_mb:.2f} MB",
    "waiting for it: {step_ms:.1f} ms per step, {block_ms:.1f} ms per block, {share:.0%} of the "
    "{whole_ms:.0f} ms step (medians of the steady steps; the wait: mean of the ranks, the step: "
    "the slowest rank)":
        "等待它：每步 {step_ms:.1f} ms，每个块 {block_ms:.1f} ms，占 {whole_ms:.0f} ms 单步的 {share:.0%}"
        "（稳定步的中位数；等待时间取各进程的平均，单步时间取最慢的进程）",
    "{label}: rank 0 holds {params_mb:.2f} MB of parameters, {tokens_per_s:,.0f} tokens/s":
        "{label}：进程 0 持有 {params_mb:.2f} MB 参数，{tokens_per_s:,.0f} tokens/s",
    "{name:>36}: {mb:.2f} MB per step, waiting {waiting:.0%} of the step (steady-step medians)":
        "{name:>36}：每步 {mb:.2f} MB，单步中有 {waiting:.0%} 的时间在等待（稳定步的中位数）",

    "here tp-dtensor reached {ratio:.2f}x the tokens/s of tp: slower":
        "在这里，tp-dtensor 的 tokens/s 是 tp 的 {ratio:.2f} 倍：更慢",
    "here tp-dtensor reached {ratio:.2f}x the tokens/s of tp: not slower":
        "在这里，tp-dtensor 的 tokens/s 是 tp 的 {ratio:.2f} 倍：并不更慢",
    "the reference, an {gpu} at {share:.0%} of its {precision} peak, computes {ratio:,.0f}x "
    "faster than one rank here":
        "参考系统（{gpu}，按其 {precision} 峰值的 {share:.0%} 计）的计算速度是本机一个进程的 {ratio:,.0f} 倍",
    "{name} ({link}): {gbps:g} GB/s and {us:.0f} us per message -> emulated as "
    "{mbps:.2f} MB/s and {ms:.0f} ms per message":
        "{name}（{link}）：{gbps:g} GB/s，每条消息 {us:.0f} us -> 模拟为 {mbps:.2f} MB/s，每条消息 {ms:.0f} ms",
    "{name}: one {mb:.2f} MB all-reduce takes {ms:.0f} ms emulated, {share:.0%} of it latency":
        "{name}：一次 {mb:.2f} MB 的全归约模拟耗时 {ms:.0f} ms，其中 {share:.0%} 是延迟",
    "these {n} runs took {seconds:.0f} s here": "这 {n} 次运行在本机共用了 {seconds:.0f} s",
    "{name}: tensor parallel waited {tp:.0%} of its step, data parallel {dp:.0%}: tensor "
    "parallel waited more":
        "{name}：张量并行每步有 {tp:.0%} 的时间在等待，数据并行 {dp:.0%}：张量并行等得更久",
    "{name}: tensor parallel waited {tp:.0%} of its step, data parallel {dp:.0%}: tensor "
    "parallel did not wait more":
        "{name}：张量并行每步有 {tp:.0%} 的时间在等待，数据并行 {dp:.0%}：张量并行并没有等得更久",
    "on all {n} ranks the gathered shards equal the dense fc and proj weights":
        "在全部 {n} 个进程上，由分片收集得到的权重都等于稠密的 fc 和 proj 的权重",
    "on some of the {n} ranks a gathered weight differs from the dense one":
        "在 {n} 个进程中，有进程由分片收集得到的权重与稠密层的不同",

    # ---- 05 pipeline parallel -------------------------------------------------------------------
    "stage {s}: embeddings, blocks {blocks}: {n:,} parameters":
        "阶段 {s}：嵌入层，块 {blocks}：{n:,} 个参数",
    "stage {s}: final norm, head, blocks {blocks}: {n:,} parameters":
        "阶段 {s}：最后的 norm、输出头，块 {blocks}：{n:,} 个参数",
    "whole model: {n:,} parameters": "整个模型：{n:,} 个参数",
    "{name:>20}: final loss {loss:.5f}, step {step_ms:.0f} ms":
        "{name:>20}：最终损失 {loss:.5f}，单步 {step_ms:.0f} ms",
    "{name:>20}: same losses; largest weight difference {worst:.1e}":
        "{name:>20}：损失相同；权重的最大差异 {worst:.1e}",
    "m={m}: measured {bubble:.3f}, theory {theory:.3f}, difference {difference:+.3f}":
        "m={m}：实测 {bubble:.3f}，理论值 {theory:.3f}，差值 {difference:+.3f}",
    "m={m}: theory r = (p-1)/m = {r:.3f}, so f = r/(1+r) = {f_theory:.3f}; "
    "measured f = {f:.3f}, so r = f/(1-f) = {r_measured:.3f}":
        "m={m}：理论上 r = (p-1)/m = {r:.3f}，所以 f = r/(1+r) = {f_theory:.3f}；"
        "实测 f = {f:.3f}，所以 r = f/(1-f) = {r_measured:.3f}",
    "forward of one micro-batch on stage 0: {forward_ms:.1f} ms; handing it to stage 1: at least "
    "{handoff_ms:.2f} ms":
        "阶段 0 上一个微批次的前向：{forward_ms:.1f} ms；把它交给阶段 1：至少 {handoff_ms:.2f} ms",
    "stage {s}: GPipe {gpipe_mb:.1f} MB, 1F1B {one_f_one_b_mb:.1f} MB ({share:.2f} of GPipe)":
        "阶段 {s}：GPipe {gpipe_mb:.1f} MB，1F1B {one_f_one_b_mb:.1f} MB（GPipe 的 {share:.2f}）",
    "measured bubble: GPipe {gpipe:.3f}, 1F1B {one_f_one_b:.3f} (theory {theory:.3f} for both)":
        "实测气泡：GPipe {gpipe:.3f}，1F1B {one_f_one_b:.3f}（两者的理论值都是 {theory:.3f}）",
    "{schedule}: from scratch {ours_ms:.0f} ms, pp-torch {torch_ms:.0f} ms per step; "
    "bubble {ours_bubble:.2f} vs {torch_bubble:.2f}":
        "{schedule}：每步从零实现 {ours_ms:.0f} ms，pp-torch {torch_ms:.0f} ms；"
        "气泡 {ours_bubble:.2f} 对 {torch_bubble:.2f}",
    "pipeline, 2 stages: stage 0 sends {activations_mb:.2f} MB of activations forward and gets as much "
    "back as gradients (measured, mean over ranks incl. the tied embedding: {measured_mb:.2f} MB)":
        "流水线并行，2 个阶段：阶段 0 向前发送 {activations_mb:.2f} MB 激活值，并以梯度的形式收回同样多的数据"
        "（实测，各进程的平均值，含绑定的嵌入：{measured_mb:.2f} MB）",
    "tensor parallel, same batch: 4 all-reduces per block x {n_layer} blocks = "
    "{tp_mb:.2f} MB per step (lesson 04, exercise 2)":
        "张量并行，同样的批次：每个块 4 次全归约 x {n_layer} 个块 = 每步 {tp_mb:.2f} MB（第 04 课，练习 2）",
    "theory at p=2, m=4: 1F1B {one_f_one_b:.3f}, interleaved (v=2) {interleaved:.3f}":
        "p=2、m=4 时的理论值：1F1B {one_f_one_b:.3f}，交错式（v=2）{interleaved:.3f}",
    "{name:>38}: same losses as one process; bubble measured {bubble:.3f}, step {step_ms:.0f} ms":
        "{name:>38}：损失与单进程相同；实测气泡 {bubble:.3f}，单步 {step_ms:.0f} ms",
    "measured in section 5 (1F1B): {bubble:.3f}": "第 5 节的实测值（1F1B）：{bubble:.3f}",
    # gpututor/lessons/pipeline_parallel/bubble.py
    "{name}: measured {measured:.3f} = {free:.3f} with free hand-offs "
    "{handoff:+.3f} from handing over":
        "{name}：实测 {measured:.3f} = 交接不花时间时的 {free:.3f} {handoff:+.3f}（交接）",
    "{name}: measured {measured:.3f} = theory {theory:.3f} {compute:+.3f} "
    "(unequal and uneven compute) {handoff:+.3f} (handing over): handing over "
    "added more":
        "{name}：实测 {measured:.3f} = 理论值 {theory:.3f} {compute:+.3f}（计算不均等、不均匀）"
        "{handoff:+.3f}（交接）：交接增加得更多",
    "{name}: measured {measured:.3f} = theory {theory:.3f} {compute:+.3f} "
    "(unequal and uneven compute) {handoff:+.3f} (handing over): the unequal "
    "and uneven compute added more":
        "{name}：实测 {measured:.3f} = 理论值 {theory:.3f} {compute:+.3f}（计算不均等、不均匀）"
        "{handoff:+.3f}（交接）：计算的不均等、不均匀增加得更多",
    "from scratch with sends waited {waited:.3f}, pp-torch {torchs:.3f}: a gap within the "
    "step-to-step spread of these runs ({noise:.3f}), so none to close (sends posted: {posted:.3f})":
        "从零实现、等待发送完成 {waited:.3f}，pp-torch {torchs:.3f}：差距在这几次运行逐步之间的波动（{noise:.3f}）之内，"
        "所以没有差距可缩小（发出后不等待：{posted:.3f}）",
    "from scratch {waited:.3f} with sends waited, {posted:.3f} with sends posted, pp-torch "
    "{torchs:.3f}: posting the sends changed the bubble by less than the step-to-step spread of "
    "these runs ({noise:.3f}), no measurable effect":
        "从零实现：等待发送完成 {waited:.3f}，发出后不等待 {posted:.3f}，pp-torch {torchs:.3f}：发出后不等待对气泡的改变"
        "小于这几次运行逐步之间的波动（{noise:.3f}），没有可测出的效果",
    "from scratch with sends waited {waited:.3f}, pp-torch {torchs:.3f}: no gap "
    "to close in this run (sends posted: {posted:.3f})":
        "从零实现（等待发送完成）{waited:.3f}，pp-torch {torchs:.3f}：这次运行中没有需要弥补的差距"
        "（发出后不等待：{posted:.3f}）",
    "from scratch {waited:.3f} with sends waited, {posted:.3f} with sends "
    "posted, pp-torch {torchs:.3f}: posting the sends closed the gap":
        "从零实现：等待发送完成时 {waited:.3f}，发出后不等待时 {posted:.3f}，pp-torch {torchs:.3f}："
        "发出后不等待弥补了这一差距",
    "from scratch {waited:.3f} with sends waited, {posted:.3f} with sends "
    "posted, pp-torch {torchs:.3f}: posting the sends closed {share:.0%} of the "
    "gap; the rest is elsewhere":
        "从零实现：等待发送完成时 {waited:.3f}，发出后不等待时 {posted:.3f}，pp-torch {torchs:.3f}："
        "发出后不等待弥补了差距的 {share:.0%}；其余部分另有原因",
    "from scratch {waited:.3f} with sends waited, {posted:.3f} with sends posted, "
    "pp-torch {torchs:.3f}: posting the sends did not close the gap":
        "从零实现：等待发送完成时 {waited:.3f}，发出后不等待时 {posted:.3f}，pp-torch {torchs:.3f}："
        "发出后不等待并没有弥补这一差距",

    # ---- 06 mixed precision ---------------------------------------------------------------------
    "{name:20} final loss {loss:.4f}, largest gap to fp32 {gap:.1e}, skipped {skipped} steps, "
    "{step_ms:5.0f} ms/step (median of steps 2-{steps})":
        "{name:20} 最终损失 {loss:.4f}，与 fp32 的最大差距 {gap:.1e}，跳过 {skipped} 步，"
        "{step_ms:5.0f} ms/步（第 2-{steps} 步的中位数）",
    "{memory} | {n_params:,} parameters": "{memory} | {n_params:,} 个参数",
    "tokens/s over the steady steps: bf16 / fp32 = {ratio:.2f}":
        "稳定步的 tokens/s：bf16 / fp32 = {ratio:.2f}",
    "peak memory: fp32 {fp32_mb:.1f} MB, bf16 {bf16_mb:.1f} MB":
        "峰值显存：fp32 {fp32_mb:.1f} MB，bf16 {bf16_mb:.1f} MB",
    "largest loss gap over {steps} steps: {gap:.1e}": "{steps} 步中最大的损失差距：{gap:.1e}",
    "{category}: bf16 / fp32 = {ratio:.2f}": "{category}：bf16 / fp32 = {ratio:.2f}",
    "parameters, gradients and optimizer state: the same bytes in both runs (autocast leaves them in fp32)":
        "参数、梯度和优化器状态：两次运行的字节数相同（autocast 让它们保持 fp32）",
    "parameters, gradients or optimizer state differ between the two runs: read the ratios above":
        "两次运行的参数、梯度或优化器状态不同：请看上面的比值",
    "activations: bf16 / fp32 = {ratio:.2f} (0.50 if all that backward keeps were bf16; "
    "autocast's bf16 copies of the weights, kept for backward, add to it)":
        "激活值：bf16 / fp32 = {ratio:.2f}（如果反向传播保留的全是 bf16，就是 0.50；"
        "autocast 为反向传播保留的权重 bf16 副本会让它更大）",
    "CPU matrix instructions found: {features}": "找到的 CPU 矩阵指令：{features}",
    "CPU matrix instructions found: none that /proc/cpuinfo lists":
        "找到的 CPU 矩阵指令：/proc/cpuinfo 中没有列出任何一种",

    # ---- 07 compression -------------------------------------------------------------------------
    "teacher: {n:,} parameters, {mb:.2f} MB, validation loss {loss:.3f}":
        "教师模型：{n:,} 个参数，{mb:.2f} MB，验证损失 {loss:.3f}",
    'torchao is not installed here: pip install "gpututor[compress]" adds its variant':
        '本机没有安装 torchao：pip install "gpututor[compress]" 会加上它的那个变体',
    "{name:28} {mb:5.2f} MB, validation loss {loss:.4f}": "{name:28} {mb:5.2f} MB，验证损失 {loss:.4f}",
    "Linear weights (the head's tied copy counted as the embedding's) hold {share:.0%} of the teacher's bytes: "
    "with them in 1 byte and the rest fp32, the file could shrink at best to {bound:.2f}x (4x smaller would be 0.25x), "
    "plus the scales and, where a variant makes one, an int8 copy of the tied head":
        "Linear 权重（与嵌入绑定的输出层算作嵌入的）占教师模型字节数的 {share:.0%}：它们变成 1 字节、其余保持 fp32 时，"
        "文件最多缩小到 {bound:.2f}x（缩小 4 倍是 0.25x），另加缩放因子，以及某些变体为绑定的输出层另做的一份 int8 副本",
    "{name:28} file {ratio:.2f}x the fp32 one": "{name:28} 文件是 fp32 的 {ratio:.2f}x",
    "sparse CSR was faster than the dense kernel at: {where} pruned":
        "稀疏 CSR 比稠密内核快的剪枝比例：{where}",
    "sparse CSR was slower than the dense kernel at every sparsity measured":
        "在测量的每个稀疏度下，稀疏 CSR 都比稠密内核慢",
    "{name}: file {ratio:.3f}x the unpruned one: zeros are stored like any other number":
        "{name}：文件是未剪枝的 {ratio:.3f}x：零值像其他数字一样被存储",
    "{name}: file {ratio:.3f}x the unpruned one": "{name}：文件是未剪枝的 {ratio:.3f}x",
    "{name}: latency {ratio:.3f}x the unpruned one, within the noise of this measurement "
    "({floor:.1%}: the larger of the gap between two models doing the same work, {same} and "
    "{unpruned}, and of each model's median pass over its fastest): no measurable change":
        "{name}：延迟是未剪枝的 {ratio:.3f}x，在这次测量的噪声之内（{floor:.1%}：取两个计算量相同的模型 {same} 与 "
        "{unpruned} 之间的差距、以及各模型中位数一次前向与最快一次之差，两者中较大的）：没有可测出的变化",
    "{name}: latency {ratio:.3f}x the unpruned one, {change} beyond the noise of this measurement "
    "({floor:.1%}: the larger of the gap between two models doing the same work, {same} and "
    "{unpruned}, and of each model's median pass over its fastest)":
        "{name}：延迟是未剪枝的 {ratio:.3f}x，{change}，超出了这次测量的噪声（{floor:.1%}：取两个计算量相同的模型 {same} 与 "
        "{unpruned} 之间的差距、以及各模型中位数一次前向与最快一次之差，两者中较大的）",
    "faster": "更快",
    "slower": "更慢",
    "{s:4.0%} pruned: validation loss {loss:.3f}": "剪枝 {s:4.0%}：验证损失 {loss:.3f}",
    "{s:.0%}: sparsity reached {sparsity:.2%}, validation loss {before:.3f} -> {after:.3f} "
    "after {steps} steps":
        "{s:.0%}：达到的稀疏度 {sparsity:.2%}，{steps} 步之后验证损失 {before:.3f} -> {after:.3f}",
    "unpruned with the same {steps} steps: {loss:.3f}": "不剪枝、同样经过 {steps} 步：{loss:.3f}",
    "MLP hidden width {width} -> {new_width}, {n:,} -> {new_n:,} parameters":
        "MLP 隐藏层宽度 {width} -> {new_width}，参数 {n:,} -> {new_n:,} 个",
    "validation loss {before:.3f} -> {after:.3f} after {steps} steps":
        "{steps} 步之后验证损失 {before:.3f} -> {after:.3f}",
    "{name:18} {n:,} parameters, validation loss {loss:.3f}":
        "{name:18} {n:,} 个参数，验证损失 {loss:.3f}",

    # ---- 08 choosing hardware -------------------------------------------------------------------
    "calibrate took {seconds:.0f} s here": "calibrate 在这里用了 {seconds:.0f} s",
    # lessons/calibrate.py calibration_table
    "single (reference)": "single（参照）",
    "single, half batch (ref.)": "single，半批次（参照）",
    "single + checkpointing": "single + 激活检查点",
    "off by": "偏差",
    "formula": "公式",
    "peak MB": "峰值 MB",
    "step ms": "单步 ms",
    ", {shared:.1f} per rank with {n} busy (x{slowdown:.2f} slower)":
        "，{n} 个进程同时忙时每个进程 {shared:.1f}（慢 {slowdown:.2f} 倍）",
    ", all-reduce β {beta:.2f} GB/s, α {alpha:.0f} µs": "，全归约 β {beta:.2f} GB/s，α {alpha:.0f} µs",
    "; load average {load:.1f}": "；平均负载 {load:.1f}",
    "machine: {device}, matmul {flops:.1f} GFLOP/s on one rank{shared}; fitted on the references: "
    "efficiency {efficiency:.0%} of the matmul rate + {overhead:.1f} ms per step{comm}{load}":
        "本机：{device}，单个进程的矩阵乘法 {flops:.1f} GFLOP/s{shared}；在两个参照运行上拟合：效率为矩阵乘法速率的 "
        "{efficiency:.0%}，另加每步 {overhead:.1f} ms{comm}{load}",
    "* fitted: the step-time model was fitted to these two runs (their first repeat)":
        "* 拟合：单步时间模型是用这两次运行（它们的第一次重复）拟合出来的",
    "skipped {name}: {why}": "跳过 {name}：{why}",
    "peak memory: largest error {error:.1%} over {runs} runs, within the 10 % target":
        "峰值显存：{runs} 次运行中的最大误差 {error:.1%}，在 10 % 的目标以内",
    "peak memory: largest error {error:.1%} over {runs} runs, outside the 10 % target":
        "峰值显存：{runs} 次运行中的最大误差 {error:.1%}，超出了 10 % 的目标",
    "peak memory by the general formula: largest error {error:.1%}":
        "通用公式给出的峰值显存：最大误差 {error:.1%}",
    "no formula error measured": "没有测得公式误差",
    "step time: median error {median:.0%}, largest {largest:.0%} over {runs} predicted runs":
        "步时间：{runs} 次预测的运行中，误差中位数 {median:.0%}，最大 {largest:.0%}",
    "fitted: efficiency {efficiency:.0%} of the matmul rate, fixed cost {overhead_ms:.1f} ms per step; "
    "load average while measuring: {load:.1f}":
        "拟合结果：效率为矩阵乘法速率的 {efficiency:.0%}，每步固定开销 {overhead_ms:.1f} ms；"
        "测量期间的平均负载：{load:.1f}",
    "fitted: efficiency {efficiency:.0%} of the matmul rate, fixed cost {overhead_ms:.1f} ms per step":
        "拟合结果：效率为矩阵乘法速率的 {efficiency:.0%}，每步固定开销 {overhead_ms:.1f} ms",
    "{name:>18}: {gb:6.2f} GB per GPU": "{name:>18}：每个 GPU {gb:6.2f} GB",
    # lesson 08: V100, A100 or H100; the 70B layout that fits; the published runs
    "{gpu}: {label}: {days:.1f} days, not priced": "{gpu}：{label}：{days:.1f} 天，未定价",
    "{gpu}: {label}: {days:.1f} days, {cost}, meets the deadline and budget":
        "{gpu}：{label}：{days:.1f} 天，{cost}，满足期限和预算",
    "{gpu}: {label}: {days:.1f} days, {cost}, misses the deadline or budget":
        "{gpu}：{label}：{days:.1f} 天，{cost}，不满足期限或预算",
    "{link:>8}: fits, {gb:.0f} GB per GPU of {usable:.0f} GB usable":
        "{link:>8}：放得下，每个 GPU {gb:.0f} GB（可用 {usable:.0f} GB）",
    "{link:>8}: does not fit, {gb:.0f} GB per GPU of {usable:.0f} GB usable":
        "{link:>8}：放不下，每个 GPU {gb:.0f} GB（可用 {usable:.0f} GB）",
    "{run}: predicted / published = {ratio:.2f}, inside the range this lesson states ({low} to {high})":
        "{run}：预测 / 发表 = {ratio:.2f}，在本课给出的范围之内（{low} 到 {high}）",
    "{run}: predicted / published = {ratio:.2f}, outside the range this lesson states ({low} to {high})":
        "{run}：预测 / 发表 = {ratio:.2f}，超出了本课给出的范围（{low} 到 {high}）",
    "{run}: memory per GPU predicted {predicted:.0f} GB, published {published:.0f} GB; an H100-80GB: "
    "{usable:.0f} GB usable":
        "{run}：每个 GPU 的显存，预测 {predicted:.0f} GB，发表 {published:.0f} GB；一张 H100-80GB 可用 {usable:.0f} GB",
    "the planner's prediction fits that": "规划器的预测放得下",
    "the planner's prediction does not fit that": "规划器的预测放不下",
    "the published memory fits that": "发表的显存放得下",
    "the published memory does not fit that either: torchtitan's H100s had 96 GB":
        "发表的显存也放不下：torchtitan 用的 H100 有 96 GB",
    "the published memory does not fit that: torchtitan's H100s had 96 GB":
        "发表的显存放不下：torchtitan 用的 H100 有 96 GB",
    "{link:>8}: step {step:.2f} s (compute {compute:.2f} s, tensor-parallel all-reduces {tp:.2f} s), "
    "{days:.0f} days; communication is half the step or more: the link is the limit":
        "{link:>8}：单步 {step:.2f} s（计算 {compute:.2f} s，张量并行的全归约 {tp:.2f} s），"
        "{days:.0f} 天；通信开销占一步的一半或更多：瓶颈在链路",
    "{link:>8}: step {step:.2f} s (compute {compute:.2f} s, tensor-parallel all-reduces {tp:.2f} s), "
    "{days:.0f} days; communication is under half the step":
        "{link:>8}：单步 {step:.2f} s（计算 {compute:.2f} s，张量并行的全归约 {tp:.2f} s），"
        "{days:.0f} 天；通信开销不到一步的一半",

    # 11 mixture of experts: what expert parallel holds per rank
    "parameter bytes held: one rank {one:.2f} MB; ep=2 rank 0 {first:.2f} MB, rank 1 {second:.2f} MB":
        "持有的参数字节数：单进程 {one:.2f} MB；ep=2 时进程 0 为 {first:.2f} MB，进程 1 为 {second:.2f} MB",
    # ---- 09 composing parallelisms --------------------------------------------------------------
    "{params:,} parameters; one rank held {held}; peak during a step {peak_mb:.1f} MB":
        "{params:,} 个参数；单个进程持有 {held}；一步中的峰值 {peak_mb:.1f} MB",
    "It fitted: this machine's run needed less than the measured peak (unexpected).":
        "放得下：本机的这次运行所需少于实测峰值（出乎意料）。",
    "{name} on 4 ranks: finished; largest per-rank peak {peak_mb:.1f} MB (capacity {capacity_mb:.1f} MB)":
        "{name} 在 4 个进程上：运行完成；各进程峰值中最大的是 {peak_mb:.1f} MB（容量 {capacity_mb:.1f} MB）",
    "{name} on 4 ranks: {failure}": "{name} 在 4 个进程上：{failure}",
    "{name:>6}: setup peak {setup_mb:5.1f} MB per rank ({share:.0%} of the whole model's parameters)":
        "{name:>6}：每个进程的初始化（setup）峰值 {setup_mb:5.1f} MB（整个模型参数的 {share:.0%}）",
    "{name:>8} on {mesh}: largest relative difference from one process's loss {worst:.1e}":
        "{name:>8} 在 {mesh} 上：与单进程损失的最大相对差异 {worst:.1e}",
    "{name:>8}: parameters per rank {params_mb} MB, "
    "sent per rank per step not measured (DTensor's collectives)":
        "{name:>8}：每个进程的参数 {params_mb} MB，每个进程每步的发送量未测量（DTensor 的集合通信）",
    "{name:>8}: parameters per rank {params_mb} MB, sent per rank per step {sent_mb:.2f} MB":
        "{name:>8}：每个进程的参数 {params_mb} MB，每个进程每步发送 {sent_mb:.2f} MB",
    "ddp+tp+pp: largest relative loss difference from one process {worst:.1e}; parameters per rank "
    "{params_mb} MB":
        "ddp+tp+pp：与单进程的最大相对损失差异 {worst:.1e}；每个进程的参数 {params_mb} MB",
    "tp=2 + sequence parallel: activations per rank {measured_mb:5.2f} MB measured, {formula_mb:5.2f} MB "
    "by Korthikanti's formula; sent {sent_mb:.2f} MB per step; loss differs from one process by "
    "{worst:.1e}":
        "tp=2 + 序列并行：每个进程的激活值实测 {measured_mb:5.2f} MB，按 Korthikanti 的公式 "
        "{formula_mb:5.2f} MB；每步发送 {sent_mb:.2f} MB；损失与单进程相差 {worst:.1e}",
    "tp=2                    : activations per rank {measured_mb:5.2f} MB measured, {formula_mb:5.2f} MB "
    "by Korthikanti's formula; sent {sent_mb:.2f} MB per step; loss differs from one process by "
    "{worst:.1e}":   # padded to the width of the line above ("序列并行" is 8 columns wide)
        "tp=2           ：每个进程的激活值实测 {measured_mb:5.2f} MB，按 Korthikanti 的公式 "
        "{formula_mb:5.2f} MB；每步发送 {sent_mb:.2f} MB；损失与单进程相差 {worst:.1e}",
    "The planner finds no layout on 4 ranks that fits this capacity.":
        "规划器在 4 个进程上找不到放得进这个容量的布局。",
    "The planner picked {layout} on {mesh}; launched under the capacity it finished, largest "
    "per-rank peak {peak_mb:.1f} MB of {capacity_mb:.1f} MB.":
        "规划器选择了 {mesh} 上的 {layout}；在这个容量下启动后运行完成，各进程峰值中最大的是 "
        "{peak_mb:.1f} MB（容量 {capacity_mb:.1f} MB）。",
    "tp inside a node (NVLink 4)": "tp 在节点内（NVLink 4）",
    "tp across nodes (InfiniBand NDR)": "tp 跨节点（InfiniBand NDR）",
    "The planner picked {layout}, and the run did not fit: {failure}":
        "规划器选择了 {layout}，但运行时放不下：{failure}",
    "no ZeRO, no recomputation: {gb:.0f} GB per GPU, fits in {usable:.0f} GB":
        "不用 ZeRO、不做重计算：每个 GPU {gb:.0f} GB，放得进 {usable:.0f} GB",
    "no ZeRO, no recomputation: {gb:.0f} GB per GPU, does not fit in {usable:.0f} GB":
        "不用 ZeRO、不做重计算：每个 GPU {gb:.0f} GB，放不下 {usable:.0f} GB",
    "ZeRO-2, selective recomputation: {gb:.0f} GB per GPU, fits in {usable:.0f} GB":
        "ZeRO-2、选择性重计算：每个 GPU {gb:.0f} GB，放得进 {usable:.0f} GB",
    "ZeRO-2, selective recomputation: {gb:.0f} GB per GPU, does not fit in {usable:.0f} GB":
        "ZeRO-2、选择性重计算：每个 GPU {gb:.0f} GB，放不下 {usable:.0f} GB",
    "{where:>34}: step {step:6.1f} s = compute {compute:.1f} s + tensor-parallel all-reduces {tp:.1f} s "
    "+ exposed data-parallel gradient sync {dp:.1f} s":
        "{where:>34}：单步 {step:6.1f} s = 计算 {compute:.1f} s + 张量并行的全归约 {tp:.1f} s "
        "+ 未被重叠掩盖的数据并行梯度同步 {dp:.1f} s",
    # 08 choosing hardware, 10 long context: whether a worked example fits
    "    fits in {usable:.0f} GB, 90 % of an {gpu}": "    放得进 {usable:.0f} GB（{gpu} 的 90 %）",
    "    does not fit in {usable:.0f} GB, 90 % of an {gpu}": "    放不下 {usable:.0f} GB（{gpu} 的 90 %）",
    "{pad}  fits in {usable:.0f} GB, 90 % of an H100-80GB": "{pad}  放得进 {usable:.0f} GB（H100-80GB 的 90 %）",
    "{pad}  does not fit in {usable:.0f} GB, 90 % of an H100-80GB":
        "{pad}  放不下 {usable:.0f} GB（H100-80GB 的 90 %）",
    "{pad}  with full recomputation: {full:.1f} GB, which fits; step {step:.2f} s":
        "{pad}  采用完全重计算：{full:.1f} GB，放得进；单步 {step:.2f} s",
    "{pad}  with full recomputation: {full:.1f} GB, which does not fit either; step {step:.2f} s":
        "{pad}  采用完全重计算：{full:.1f} GB，仍然放不下；单步 {step:.2f} s",
    # lesson 11: one line per capacity factor's finished run
    "capacity factor {cf}: {dropped:5.1%} of slots dropped at the last step, final loss {loss:.4f}":
        "容量因子 {cf}：最后一步有 {dropped:5.1%} 的槽位被丢弃，最终损失 {loss:.4f}",
}
