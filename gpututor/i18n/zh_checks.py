"""Simplified Chinese for the exercise checkers (``gpututor/lessons/*_exercises.py`` and
``exercises.check_answer``): their messages and the ``what`` of their questions, lessons 00 to
05 here, 06 to 11 (and 05's 1F1B order) in ``zh_checks_b.py``."""

CHECKS = {
    # ---- the checkers' messages ---------------------------------------------------------------
    "{what}: not answered yet. Replace ... with your answer and run the cell again.":
        "{what}：尚未作答。请把 ... 换成你的答案，然后重新运行本单元格。",
    "{what}: this notebook has not measured it yet (did every cell above run and finish?): "
    "nothing to compare your answer with.":
        "{what}：本笔记本还没有测出这个量（上面的单元格都运行完了吗？），无法与你的答案比较。",
    "{what}: {answer} is not what this notebook measured. Try again.":
        "{what}：{answer} 与本笔记本测得的结果不符。请再试一次。",
    "Correct. {what}: {number} (measured: {expected})": "正确。{what}：{number}（实测：{expected}）",
    "{what}: {answer} is not what this run's measurements give. Try again.":
        "{what}：{answer} 与由本次运行的测量结果算出的值不符。请再试一次。",
    "Correct. {what}: {number} (from this run's measurements: {expected})":
        "正确。{what}：{number}（由本次运行的测量结果算出：{expected}）",
    "{what}: {answer} is not what counting on the model gives. Try again.":
        "{what}：{answer} 与在模型上数出的值不符。请再试一次。",
    "Correct. {what}: {number} (counted on the model: {expected})":
        "正确。{what}：{number}（在模型上数出：{expected}）",
    "{what}: not answered yet. Replace ... with a list of names and run the cell again.":
        "{what}：尚未作答。请把 ... 换成一个名称列表，然后重新运行本单元格。",
    "{what}: {answer} is not a list of names. Try again.": "{what}：{answer} 不是名称列表。请再试一次。",
    "Correct. {what}: {names}": "正确。{what}：{names}",
    "Not answered yet: define my_update and run the cell again.": "尚未作答：请定义 my_update，然后重新运行本单元格。",

    # ---- what the notebooks ask, by lesson -------------------------------------------------------
    # 00 start here
    "sequences per rank per step": "每个进程每步的序列数",
    "speedup of 2 ranks over 1": "2 个进程相对 1 个进程的加速比",
    "AdamW state bytes on rank 0": "进程 0 上 AdamW 状态的字节数",
    "tokens/s of the data-parallel run at the ideal speedup": "理想加速比下数据并行运行的 tokens/s",
    "{what}: {answer} is not how many gpututor.batches gives rank 0. Try again.":
        "{what}：{answer} 不是 gpututor.batches 分给进程 0 的数量。请再试一次。",
    "Correct. {what}: {number} (gpututor.batches gives rank 0 {expected})":
        "正确。{what}：{number}（gpututor.batches 分给进程 0 的是 {expected}）",
    "rank indices: not answered yet. Define your function and pass it in.":
        "各进程的样本下标：尚未作答。请定义你的函数并把它传进来。",
    "rank indices: your function used DistributedSampler: deal the indices out yourself.":
        "各进程的样本下标：你的函数用了 DistributedSampler：请自己把下标分发给各进程。",
    "rank indices: for n={n} on {world} ranks, rank {rank}, your function returned {got!r}, not a "
    "list of whole numbers.":
        "各进程的样本下标：n={n}、{world} 个进程时，对进程 {rank}，你的函数返回了 {got!r}，而不是整数列表。",
    "rank indices: for n={n} on {world} ranks, rank {rank} gets {count} indices from yours; every "
    "rank must get the same number, enough that together the ranks cover all {n} samples.":
        "各进程的样本下标：n={n}、{world} 个进程时，你的函数给进程 {rank} {count} 个下标；每个进程必须得到"
        "同样多的下标，而且合起来要覆盖全部 {n} 个样本。",
    "rank indices: for n={n} on {world} ranks, rank {rank} gets the right indices in another order.":
        "各进程的样本下标：n={n}、{world} 个进程时，进程 {rank} 得到的下标是对的，但顺序不同。",
    "rank indices: for n={n} on {world} ranks, rank {rank} gets other indices than "
    "DistributedSampler's, from position {position} on. Does rank r take r, r + N, r + 2N, ...? "
    "Where do the extra ones come from when n does not divide?":
        "各进程的样本下标：n={n}、{world} 个进程时，进程 {rank} 从第 {position} 个位置起得到的下标与 "
        "DistributedSampler 的不同。进程 r 取的是 r、r + N、r + 2N、……吗？n 不能整除时，补上的下标从哪里来？",
    "Correct: your indices are DistributedSampler's for every rank of {sizes}.":
        "正确：在 {sizes} 的每个进程上，你的下标都与 DistributedSampler 的一致。",
    # 01 single device
    "AdamW state in bytes": "AdamW 状态的字节数",
    "activation ratio": "激活值之比",
    "hours for 1e9 tokens": "处理 1e9 个 token 所需的小时数",
    "FLOPs per step: not answered yet. Define your function and pass it in.":
        "每步 FLOPs：尚未作答。请定义你的函数并把它传进来。",
    "FLOPs per step: your function called the package's FLOPs formula (gpututor.measure.flops or "
    "gpututor.formulas), ran the model or a FLOP counter: write the formula yourself.":
        "每步 FLOPs：你的函数调用了本软件包的 FLOPs 公式（gpututor.measure.flops 或 "
        "gpututor.formulas），或运行了模型或 FLOP 计数器：请自己写出这个公式。",
    "FLOPs per step: for the {size} GPT, batch {batch}, {seq} tokens per sequence, your function "
    "returned {got!r}, not a number.":
        "每步 FLOPs：对 {size} GPT、批次大小 {batch}、每条序列 {seq} 个 token，你的函数返回了 {got!r}，"
        "而不是一个数。",
    "FLOPs per step: for the {size} GPT, batch {batch}, {seq} tokens per sequence, yours is more "
    "than the formula gives. Count only the weights that take part in a matmul (the nn.Linear "
    "layers), 6 FLOPs per weight and token, and attention's term once.":
        "每步 FLOPs：对 {size} GPT、批次大小 {batch}、每条序列 {seq} 个 token，你的结果比公式给出的多。"
        "只数参与矩阵乘法的权重（nn.Linear 层），每个权重每个 token 6 FLOPs，注意力项只算一次。",
    "FLOPs per step: for the {size} GPT, batch {batch}, {seq} tokens per sequence, yours is less "
    "than the formula gives. Did you count the backward (twice the forward), attention's term, "
    "and every token of the step?":
        "每步 FLOPs：对 {size} GPT、批次大小 {batch}、每条序列 {seq} 个 token，你的结果比公式给出的少。"
        "反向传播（前向的两倍）、注意力项、这一步的每个 token 都算进去了吗？",
    "Correct: your FLOPs per step equal the formula's (which FlopCounterMode counts too) for the "
    "tiny and the medium GPT, at batch and sequence lengths other than the lesson's.":
        "正确：对 tiny 和 medium 两个 GPT、在与本课不同的批次大小和序列长度下，你的每步 FLOPs 与公式"
        "（FlopCounterMode 数出的也是它）一致。",
    # 01b one device
    "bytes of P at T = 512": "T = 512 时 P 的字节数",
    "8-bit state bytes per parameter": "8-bit 状态下每个参数的字节数",
    "kept without recomputation / kept with full recomputation":
        "不重计算时保留的数据 / 完全重计算时保留的数据",
    "bytes over the link per step, 16-bit": "每步经过链路的字节数（16 位）",
    "measured, all naive attention kept at T = {T}: {nbytes:,} bytes, of which P is {share:.0%}":
        "实测：T = {T} 时普通注意力一共保留了 {nbytes:,} 字节，其中 P 占 {share:.0%}",
    "section 3's run measured {measured:.4f} bytes per parameter: the padding of each tensor to "
    "whole blocks and the step counters add the rest":
        "第 3 节的运行实测每个参数 {measured:.4f} 字节：多出来的是每个张量补齐到整块的部分和步数计数器",
    "section 4's fp32 run counted {counted:,} bytes per step: {per_number} bytes a number instead "
    "of {bytes}":
        "第 4 节的 fp32 运行每步统计到 {counted:,} 字节：每个数 {per_number} 字节，而不是 {bytes} 字节",
    "online softmax: your update called the package's attention (gpututor.attention): write the "
    "update yourself.":
        "在线 softmax：你的更新调用了本软件包自己的注意力实现（gpututor.attention）：请自己写出这个更新。",
    "online softmax: your update failed with key blocks of {block}: {kind}: {error}":
        "在线 softmax：键块大小为 {block} 时你的更新出错：{kind}：{error}",
    "online softmax: with key blocks of {block}, acc / l is not softmax(S) @ V (did you rescale l "
    "and acc by exp(m_old - m_new) when the maximum rose?). Try again.":
        "在线 softmax：键块大小为 {block} 时，acc / l 不等于 softmax(S) @ V（最大值变大时，你是否用 "
        "exp(m_old - m_new) 重新缩放了 l 和 acc？）。请再试一次。",
    "online softmax: your update failed on one block after a running state it did not make: "
    "{kind}: {error}":
        "在线 softmax：在一个不是由它自己算出的运行状态之后处理一个块时，你的更新出错：{kind}：{error}",
    "online softmax: given the running state of keys 0-{last} and the block of keys "
    "{split}-{end_last}, your {name} is not that of keys 0-{end_last}: the update must use the m, l "
    "and acc it is given, nothing kept from earlier calls.":
        "在线 softmax：给定键 0-{last} 的运行状态和键 {split}-{end_last} 这一块，你的 {name} 不是键 "
        "0-{end_last} 的值：更新只能使用传给它的 m、l 和 acc，不能用之前调用时保存下来的东西。",
    "Correct: the same as softmax(S) @ V whole, for key blocks of 23, 8, 5 and 1, and from running "
    "states your update did not make":
        "正确：键块大小为 23、8、5 和 1 时都与整体计算的 softmax(S) @ V 相同，从不是由你的更新算出的"
        "运行状态出发也相同",
    # 01c one device, speed
    "Not answered yet: define my_matmul_intensity and run the cell again.":
        "尚未作答：请定义 my_matmul_intensity，然后再运行这个单元格。",
    "my_matmul_intensity must be a function of (m, k, n, bytes_per_element).":
        "my_matmul_intensity 必须是一个以 (m, k, n, bytes_per_element) 为参数的函数。",
    "matmul intensity: your function called the package's own count "
    "(gpututor.measure.roofline): write the count yourself.":
        "矩阵乘法的算术强度：你的函数调用了本软件包自己的计数（gpututor.measure.roofline）：请自己写出这个计数。",
    "matmul intensity: your function failed for m, k, n = {m}, {k}, {n} at {size} bytes: "
    "{kind}: {error}":
        "矩阵乘法的算术强度：m、k、n = {m}、{k}、{n}，每个元素 {size} 字节时你的函数出错：{kind}：{error}",
    "matmul intensity: for m, k, n = {m}, {k}, {n} at {size} bytes per element your function "
    "gives {got}, not the roofline's FLOPs per byte. {hint}":
        "矩阵乘法的算术强度：m、k、n = {m}、{k}、{n}，每个元素 {size} 字节时，你的函数给出 {got}，"
        "不是屋顶线模型的每字节 FLOPs。{hint}",
    "m·k·n FLOPs? A multiply and an add are two FLOPs per term: 2·m·k·n.":
        "算成了 m·k·n 个 FLOPs？每一项是一次乘法加一次加法，即两个 FLOPs：2·m·k·n。",
    "the output forgotten? The matmul also writes its m×n result once.":
        "漏掉了输出？矩阵乘法还要把 m×n 的结果写一次。",
    "bytes_per_element ignored? The bytes are the elements times bytes_per_element.":
        "忽略了 bytes_per_element？字节数是元素个数乘以 bytes_per_element。",
    "Count the FLOPs of every multiply-add and the bytes of every element read or written once.":
        "数一数每次乘加的 FLOPs，以及每个只读一次或只写一次的元素的字节数。",
    "Correct: the roofline's FLOPs per byte for {shapes} shapes, at 4 and at 2 bytes per element":
        "正确：在 {shapes} 种形状下、每个元素 4 字节和 2 字节时，都与屋顶线模型的每字节 FLOPs 一致",
    "fewest rows: {answer} is not a number of rows. Solved for 4-byte elements? Then no m reaches "
    "the ridge: the roof is bf16, 2 bytes an element.":
        "最少行数：{answer} 不是一个行数。你是按每个元素 4 字节求解的吗？那样的话没有哪个 m 能到达"
        "脊点：这条屋顶是 bf16 的，每个元素 2 字节。",
    "fewest rows at which the MLP up-projection is compute-bound":
        "MLP 升维投影成为计算受限时的最少行数",
    # 02 data parallel
    "bytes all-reduced per step": "每步全归约的字节数",
    "bytes sent per rank on 8 ranks": "8 个进程时每个进程发送的字节数",
    "ring all-reduce: not answered yet. Define your function and pass it in.":
        "环形全归约：尚未作答。请定义你的函数并把它传进来。",
    "on {world} ranks your function failed: {error}": "在 {world} 个进程上你的函数出错：{error}",
    "your function called the package's ring_allreduce: write the ring yourself":
        "你的函数调用了本软件包自己的 ring_allreduce：请自己写出这个环",
    "your function called the built-in collective {name}: build the sum from dist.isend / "
    "dist.recv only":
        "你的函数调用了内置的集合通信 {name}：只能用 dist.isend / dist.recv 求和",
    "your function returned the sum but left the tensor it was given unchanged: sum into that "
    "tensor, in place":
        "你的函数返回了求和结果，但传给它的张量没有变：请原地把和写进那个张量",
    "on {world} ranks, rank {rank}: a tensor of {numel} elements differs from dist.all_reduce by "
    "{error:.3g}":
        "在 {world} 个进程上，进程 {rank}：一个 {numel} 个元素的张量与 dist.all_reduce 的结果相差 {error:.3g}",
    "{sizes} and {last}": "{sizes} 和 {last}",
    "Correct: equals dist.all_reduce on {sizes} ranks, from point-to-point messages only":
        "正确：在 {sizes} 个进程上与 dist.all_reduce 相同，且只用了点对点消息",
    # 03 sharding (gpututor/lessons/sharding/exercises.py)
    "model state zero2 saves on rank 0 against ddp": "与 ddp 相比，zero2 在进程 0 上省下的模型状态字节数",
    "model state per rank of the first stage that fits": "第一个放得下的阶段下每个进程的模型状态字节数",
    "That is stage {stage}.": "也就是阶段 {stage}。",
    "Correct: by the formula no stage fits (even stage 3's model state and the rest exceed the "
    "device).": "正确：按公式没有哪个阶段放得下（即使是阶段 3 的模型状态加上其余部分也超出了设备容量）。",
    "bytes each rank sends per step under zero3 on 4 ranks": "4 个进程上 zero3 每个进程每步发送的字节数",
    "pass the zero3 run of section 8 (four), not a {strategy} run.":
        "请传入第 8 节的 zero3 运行（four），而不是一次 {strategy} 运行。",
    "reduce-scatter: not answered yet. Define your function and pass it in.":
        "归约分散：尚未作答。请定义你的函数并把它传进来。",
    "reduce-scatter: on {world} ranks your function failed: {error}":
        "归约分散：在 {world} 个进程上你的函数运行失败：{error}",
    "reduce-scatter: your function called the built-in collective {name}: build it from "
    "dist.isend / dist.recv only.":
        "归约分散：你的函数调用了内置的集合通信 {name}：请只用 dist.isend / dist.recv 来构建它。",
    "reduce-scatter: your function ran the package's own reduce-scatter or ring: write the "
    "messages yourself.": "归约分散：你的函数运行了本软件包自己的归约分散或环形算法：请自己写出这些消息。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank}'s piece is "
    "the sum over the ranks, not their average (ZeRO averages the gradients, as data parallel "
    "does).": "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 的那一份是各进程之和，"
              "而不是平均值（ZeRO 对梯度求平均，和数据并行一样）。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank} returned "
    "rank {other}'s piece; rank r keeps the r-th piece (as FlatShard.my_slice).":
        "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 返回的是进程 {other} 的那一份；"
        "进程 r 保留的是第 r 份（与 FlatShard.my_slice 一样）。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank} returned a "
    "{type}, not a tensor (its piece of the average).":
        "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 返回的是一个 {type}，"
        "而不是张量（它那一份平均值）。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank} returned a "
    "tensor of shape {shape}, not its piece (the rank-th of world pieces, by tensor_split or "
    "chunk).": "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 返回的张量形状为 "
               "{shape}，不是它那一份（用 tensor_split 或 chunk 切成 world 份后的第 rank 份）。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank}'s piece "
    "differs from the average by {error:.3g}.":
        "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 的那一份与平均值相差 {error:.3g}。",
    "reduce-scatter: on {world} ranks, a flat vector of {numel} elements: rank {rank} sent "
    "{sent:,} bytes, more than a reduce-scatter must: each rank needs to send only what the "
    "others keep, (N-1)/N of the vector. Did you send whole vectors, or all-reduce and then slice?":
        "归约分散：在 {world} 个进程上、长度为 {numel} 的扁平向量：进程 {rank} 发送了 {sent:,} 字节，"
        "比归约分散所必需的多：每个进程只需发送其他进程保留的部分，即向量的 (N-1)/N。你是不是发送了整个向量，"
        "或者先做全归约再切片？",
    "Correct: each rank's piece of the average, as the package's reduce-scatter gives it, on "
    "{worlds} ranks, from point-to-point messages only and no more bytes than a reduce-scatter "
    "must send.": "正确：在 {worlds} 个进程上，每个进程得到的那一份平均值都与本软件包的归约分散一致，"
                  "只用了点对点消息，发送的字节也不多于归约分散所必需的。",
    # 04 tensor parallel (gpututor/lessons/tensor_parallel/exercises.py)
    "bytes all-reduced per step by the exercise's tp run": "练习中那次 tp 运行每步全归约的字节数",
    "row-parallel forward: not answered yet. Define your function and pass it in.":
        "行并行前向：尚未作答。请定义你的函数并把它传进来。",
    "row-parallel forward: on {world} ranks your function failed: {error}":
        "行并行前向：在 {world} 个 rank 上你的函数运行失败：{error}",
    "row-parallel forward: your function ran the package's RowParallelLinear: write the forward "
    "yourself.": "行并行前向：你的函数运行了本软件包的 RowParallelLinear：请自己写出前向传播。",
    "row-parallel forward: on {world} ranks rank {rank} returned {returned}, not the layer's "
    "output (a tensor shaped like the dense layer's).":
        "行并行前向：在 {world} 个 rank 上，rank {rank} 返回了 {returned}，而不是该层的输出（一个与稠密层输出形状相同的张量）。",
    "row-parallel forward: on {world} ranks, rank {rank}: the output differs from the dense "
    "layer's by {error:.3g}.": "行并行前向：在 {world} 个 rank 上，rank {rank}：输出与稠密层的相差 {error:.3g}。",
    "row-parallel forward: on {world} ranks, rank {rank}: the input gradient differs from the "
    "dense layer's by {error:.3g}.":
        "行并行前向：在 {world} 个 rank 上，rank {rank}：输入梯度与稠密层的相差 {error:.3g}。",
    "row-parallel forward: on {world} ranks, rank {rank}: the weight gradient differs from the "
    "dense layer's by {error:.3g}.":
        "行并行前向：在 {world} 个 rank 上，rank {rank}：权重梯度与稠密层的相差 {error:.3g}。",
    "Correct: on {worlds} ranks the output and the input and weight gradients equal one dense "
    "nn.Linear.": "正确：在 {worlds} 个 rank 上，输出以及输入和权重的梯度都与一个稠密的 nn.Linear 一致。",
    # 05 pipeline parallel
    "bubble for p=2, m=8": "p=2、m=8 时的气泡占比",
    "fewest micro-batches for a bubble <= 10 % on 4 stages": "4 个阶段时使气泡 <= 10 % 的最少微批次数",
    "measured bubble of the m=8 run's last step": "m=8 那次运行最后一步的实测气泡占比",
}
