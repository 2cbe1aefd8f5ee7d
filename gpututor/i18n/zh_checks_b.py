"""Simplified Chinese for the exercise checkers of lessons 06 to 11, and lesson 05's 1F1B
order (the first part, lessons 00 to 05: ``zh_checks.py``)."""

CHECKS_B = {
    # 06 mixed precision, 08 choosing hardware
    "bytes per parameter": "每个参数的字节数",
    # 06 mixed precision (its checkers, gpututor/lessons/mixed_precision/exercises.py)
    "bytes held between steps, fp16 trainer with loss scaling and AdamW":
        "两步之间保存的字节数（fp16 训练器，带损失缩放，AdamW 优化器）",
    "fp16 flush threshold of a gradient with loss scale 1000":
        "损失缩放因子为 1000 时，梯度在 fp16 中被冲刷为 0 的阈值",
    "section 3's stream": "第 3 节的那串梯度",
    "the checker's stream {number}": "检查器的第 {number} 串梯度",
    "an overflow": "溢出",
    "a clean step": "正常的一步",
    "not a number": "不是一个数",
    "too high": "偏高",
    "too low": "偏低",
    "loss scaler: on {where} (start scale {start:g}, growth_interval={interval}), after step "
    "{step} ({event}) your rule's scale is {mine!r}, {how} against GradScaler's. Try again.":
        "损失缩放器：在{where}上（起始缩放因子 {start:g}，growth_interval={interval}），第 {step} 步"
        "（{event}）之后，你的规则给出的缩放因子是 {mine!r}，与 GradScaler 的相比{how}。请再试一次。",
    "loss scaler: on {where}, your rule failed at step {step}: {error}":
        "损失缩放器：在{where}上，你的规则在第 {step} 步出错：{error}",
    "loss scaler: your rule ran the package's scaler or GradScaler's own update: write the rule "
    "yourself.": "损失缩放器：你的规则调用了本软件包的缩放器或 GradScaler 自己的更新：请自己写出这条规则。",
    "loss scaler: your rule did not return a pair (scale, clean_steps): {error}":
        "损失缩放器：你的规则没有返回 (scale, clean_steps) 这一对值：{error}",
    "Correct: the same scale as GradScaler at every step of section 3's stream and of {count} "
    "streams of the checker's (other start scales and growth intervals).":
        "正确：在第 3 节的那串梯度和检查器的 {count} 串梯度（起始缩放因子和增长间隔各不相同）上，"
        "每一步的缩放因子都与 GradScaler 相同。",
    # 07 compression (its checkers, gpututor/lessons/compression/exercises.py)
    "weights of row 3 whose int8 code differs under torchao's rule":
        "第 3 行中按 torchao 的规则得到不同 int8 编码的权重个数",
    "parameters removed with 25% of the MLP neurons": "去掉 25% 的 MLP 神经元时移除的参数个数",
    "bytes of int8 weights and scales": "int8 权重与缩放因子的字节数",
    "a 6x10 weight": "一个 6x10 的权重",
    "a 5x12 weight with negative extremes and a row of zeros": "一个 5x12 的权重（含绝对值最大的负数和一行全零）",
    "a 5x7 weight whose rows differ in size by 10^7": "一个 5x7 的权重（各行大小相差 10^7 倍）",
    "an nn.Linear(16, 8) weight (a Parameter)": "一个 nn.Linear(16, 8) 的权重（一个 Parameter）",
    "too large": "偏大",
    "too small": "偏小",
    " (its largest |w| is a negative weight)": "（这一行 |w| 最大的是一个负权重）",
    "quantize: not answered yet. Define your function and pass it in.":
        "量化：尚未作答。请定义你的函数并把它传进来。",
    "quantize: your function called the package's quantizer or one of torch's quantize ops: write "
    "it yourself.": "量化：你的函数调用了本软件包的量化函数或 torch 的某个量化算子：请自己写出来。",
    "quantize: for {case} your function failed: {error}": "量化：对{case}，你的函数出错：{error}",
    "quantize: for {case} your function returned {got}, not two tensors (q, scale).":
        "量化：对{case}，你的函数返回了 {got}，而不是两个张量 (q, scale)。",
    "quantize: for {case} q is {dtype}, not torch.int8 (one byte per weight is what int8 stores).":
        "量化：对{case}，q 的类型是 {dtype}，不是 torch.int8（int8 存储的就是每个权重一个字节）。",
    "quantize: for {case} q has shape {shape}, not the weight's {want}.":
        "量化：对{case}，q 的形状是 {shape}，而不是权重的形状 {want}。",
    "quantize: for {case} scale must hold one float per output row ({rows}); yours holds {n} of "
    "{dtype}.": "量化：对{case}，scale 必须为每个输出行保存一个浮点数（共 {rows} 个）；你的 scale 保存了 "
                "{n} 个 {dtype}。",
    "quantize: for {case} every row has the same scale: per-channel quantization gives each output "
    "row its own.": "量化：对{case}，每一行的缩放因子都相同：按通道量化要给每个输出行各自的缩放因子。",
    "quantize: for {case} the scale of row {row}, a row of zeros, is {value}: max|w| is 0 there, "
    "and 0 / 0 is nan, whose int8 value is undefined; give such a row a scale above 0.":
        "量化：对{case}，第 {row} 行全为零，它的缩放因子是 {value}：这一行的 max|w| 是 0，而 0 / 0 是 nan，"
        "nan 转成 int8 的结果没有定义；请给这样的行一个大于 0 的缩放因子。",
    "quantize: for {case} row {row} is all zeros but its q is not.":
        "量化：对{case}，第 {row} 行全为零，但它的 q 不全为零。",
    "quantize: for {case} the scale of row {row}{hint} is {how}. A row's scale maps its largest |w| "
    "onto the largest int8 level.":
        "量化：对{case}，第 {row} 行{hint}的缩放因子{how}。一行的缩放因子要把这一行最大的 |w| 映射到"
        "最大的 int8 级别上。",
    "quantize: for {case} q uses -128: symmetric int8 keeps [-127, 127], so that both signs have "
    "the same range and 0 is exact.":
        "量化：对{case}，q 用到了 -128：对称 int8 只用 [-127, 127]，这样正负两边的范围相同，0 也能精确表示。",
    " They all lie nearer 0: truncated, not rounded to the nearest level?":
        "它们都更靠近 0：是不是截断了，而不是舍入到最近的级别？",
    "quantize: for {case} the scales are right but {n} of row {row}'s int8 values are not.{hint}":
        "量化：对{case}，缩放因子是对的，但第 {row} 行有 {n} 个 int8 值不对。{hint}",
    "Correct: your int8 values and scales equal the package's on {count} weights (a row of zeros, "
    "negative extremes, rows 10^7 apart in size, a layer's Parameter).":
        "正确：在 {count} 个权重上（一行全零、绝对值最大的负数、大小相差 10^7 倍的行、一个层的 "
        "Parameter），你的 int8 值和缩放因子都与本软件包的一致。",
    # 08 choosing hardware
    "relative error of the formula's peak for DDP": "DDP 的公式峰值的相对误差",
    "bytes per parameter per GPU, ZeRO-2 on 8 GPUs": "8 张 GPU 上用 ZeRO-2 时每张 GPU 每个参数的字节数",
    "fewest H200-141GB for the states with ZeRO-3": "用 ZeRO-3 放下模型状态所需的最少 H200-141GB 数",
    "days of the smallest cluster at 30% HFU": "硬件 FLOPs 利用率（HFU）为 30% 时最小集群所需的天数",
    "implied MFU: not answered yet. Define your function and pass it in.":
        "隐含 MFU：尚未作答。请定义你的函数并把它传进来。",
    "implied MFU: your function called the package's FLOPs formula: write it yourself.":
        "隐含 MFU：你的函数调用了本包的 FLOPs 公式：请自己写出它。",
    "implied MFU [{case}]: your function returned {got}, not a number.":
        "隐含 MFU [{case}]：你的函数返回了 {got}，不是一个数。",
    "implied MFU [{case}]: yours is not the formula's. Are the FLOPs the model's (no "
    "recomputation), with attention counted causal, and the time in GPU-seconds?":
        "隐含 MFU [{case}]：你的结果与公式不符。FLOPs 是否只算模型本身（不含重计算）、注意力是否按因果"
        "计数、时间是否以 GPU·秒为单位？",
    "Correct: your implied MFU equals the package's for {cases} runs, the published ones of "
    "section 5 among them.":
        "正确：你的隐含 MFU 在 {cases} 次运行上都与本包的结果相同，其中包括第 5 节的已发表运行。",
    "Correct. {what}: None, no count fits": "正确。{what}：None，多少张都放不下",
    "model-state bytes: not answered yet. Define your function and pass it in.":
        "模型状态字节数：尚未作答。请定义你的函数并把它传进来。",
    "model-state bytes: your function called the planner's model_state_bytes: write the formula "
    "yourself.": "模型状态字节数：你的函数调用了规划器的 model_state_bytes：请自己写出这个公式。",
    "ZeRO stage {stage} on {dp} GPUs, {n:g} parameters, {p:g}+{g:g}+{o:g} bytes per parameter "
    "({name})": "ZeRO 阶段 {stage}，{dp} 张 GPU，{n:g} 个参数，每个参数 {p:g}+{g:g}+{o:g} 字节（{name}）",
    "model-state bytes [{case}]: your function returned {got}, not a number of bytes.":
        "模型状态字节数 [{case}]：你的函数返回了 {got}，而不是一个字节数。",
    "model-state bytes [{case}]: your bytes per GPU are not the formula's. Which of weights, "
    "gradients and optimizer state does stage {stage} divide over the GPUs?":
        "模型状态字节数 [{case}]：你算出的每张 GPU 字节数与公式不符。阶段 {stage} 把权重、梯度和优化器状态中的"
        "哪些切分到各张 GPU 上？",
    "Correct: your bytes per GPU equal the planner's model_state_bytes for ZeRO stages 0 to 3, in "
    "{cases} cases with {conventions} conventions.":
        "正确：在 {conventions} 种约定的 {cases} 个情形中，你算出的每张 GPU 字节数都与规划器的 "
        "model_state_bytes 一致，ZeRO 阶段 0 到 3 都对。",
    # 09 composing parallelisms (gpututor/lessons/composing_parallelisms/exercises.py)
    "parameter bytes of ddp+tp's rank 0 beyond half the model": "ddp+tp 的进程 0 超出半个模型的参数字节数",
    "layouts predicted to fit {share} of the capacity": "预计放得进 {share} 容量的布局",
    "rank {rank}'s {dim} group: not answered yet. Replace ... with a list of ranks and run the "
    "cell again.": "进程 {rank} 的 {dim} 组：尚未作答。请把 ... 换成一个进程编号列表，然后重新运行本单元格。",
    "{answer} is not a list of ranks. Try again.": "{answer} 不是进程编号的列表。请再试一次。",
    "{answer} leaves out rank {rank} itself: a rank's group holds it too. Try again.":
        "{answer} 漏掉了进程 {rank} 本身：一个进程所在的组也包含它自己。请再试一次。",
    "{answer} is not rank {rank}'s {dim} group in the grid {grid}. Try again: which ranks differ "
    "from it only in the {dim} index?":
        "{answer} 不是网格 {grid} 中进程 {rank} 的 {dim} 组。请再试一次：哪些进程与它只在 {dim} 下标上不同？",
    "Correct: rank {rank}'s {dim} group in the grid {grid} is {group}.":
        "正确：网格 {grid} 中进程 {rank} 的 {dim} 组是 {group}。",
    "{what}: {name!r} is not a layout the planner knows: its layouts are the names in section 8's "
    "rows.": "{what}：{name!r} 不是规划器知道的布局：它的布局就是第 8 节各行中的名称。",
    "{what}: {given} is not the set the planner predicts. Compare each layout's predicted total "
    "(section 8) with {headroom:.0%} of {share} x the capacity.":
        "{what}：{given} 不是规划器预测的那个集合。请把每个布局的预测总量（第 8 节）与容量的 {share} 的 "
        "{headroom:.0%} 相比较。",
    "groups of a grid: not answered yet. Define your function and pass it in.":
        "网格的分组：尚未作答。请定义你的函数并把它传进来。",
    "groups of a grid: your function used the package's RankGrid: work the groups out yourself.":
        "网格的分组：你的函数用了本软件包的 RankGrid：请自己算出这些组。",
    "groups of a grid: for {grid} along {dim} your function did not return a list of groups of "
    "ranks: {error}": "网格的分组：对 {grid} 沿 {dim}，你的函数返回的不是由进程编号组组成的列表：{error}",
    "groups of a grid: for {grid} along {dim}, every rank 0 to {last} must be in exactly one "
    "group, and each group must hold {degree} ranks (the degree of {dim}); yours do not.":
        "网格的分组：对 {grid} 沿 {dim}，进程 0 到 {last} 中的每一个都必须恰好属于一个组，并且每个组必须有 "
        "{degree} 个进程（{dim} 的并行度）；你的分组不满足这一点。",
    "groups of a grid: for {grid} along {dim}, rank {rank}'s group is not the grid's. Its group "
    "holds the ranks that differ from it only in the {dim} index: how far apart are two ranks whose "
    "{dim} index differs by one?":
        "网格的分组：对 {grid} 沿 {dim}，进程 {rank} 所在的组与网格的不同。它的组由与它只在 {dim} "
        "下标上不同的进程组成：{dim} 下标相差 1 的两个进程，编号相差多少？",
    "groups of a grid: for {grid} along {dim} your groups hold the right ranks, but not each in "
    "order along {dim} (member i is the rank at index i: pipeline stage i, tensor-parallel shard "
    "i).": "网格的分组：对 {grid} 沿 {dim}，你的组包含的进程是对的，但组内不是按 {dim} 的顺序排列"
           "（第 i 个成员是下标为 i 的进程：流水线的第 i 个阶段、张量并行的第 i 个分片）。",
    "groups of a grid: the check in {world} real ranks failed: {error}":
        "网格的分组：在 {world} 个真实进程中的检查失败了：{error}",
    "groups of a grid: in {world} real ranks, rank {rank}'s {dim} group is not torch's "
    "DeviceMesh's mesh['{dim}'].":
        "网格的分组：在 {world} 个真实进程中，进程 {rank} 的 {dim} 组与 torch 的 DeviceMesh 的 "
        "mesh['{dim}'] 不同。",
    "Correct: your groups are RankGrid's along every dim of {count} grids, and on {grid} the same "
    "as torch's DeviceMesh in {world} real ranks.":
        "正确：在 {count} 个网格的每个维度上，你的分组都与 RankGrid 的一致；在 {grid} 上，与 torch 的 "
        "DeviceMesh 在 {world} 个真实进程中的分组也一致。",
    # 10 long context
    "visible pairs of rank 0, contiguous split": "连续切分下进程 0 的可见 query-key 对数",
    "activations, one process / a cp=2 rank": "激活值之比：单进程 / cp=2 的一个进程",
    "bytes sent per step by cp=2": "cp=2 每步发送的字节数",
    "merge: not answered yet. Define your function and pass it in.":
        "合并：尚未作答。请定义你的函数并把它传进来。",
    "merge: your function called the package's merge (ring attention's own): write the merge "
    "yourself.": "合并：你的函数调用了本软件包的 merge（环形注意力自己的合并）：请自己写出这个合并。",
    "merge [{case}]: your function failed: {error}": "合并 [{case}]：你的函数出错了：{error}",
    "merge [{case}]: your merge gives inf or nan.": "合并 [{case}]：你的合并得出了 inf 或 nan。",
    "merge [{case}]: your merged output is not attention's over all the keys. What share of the "
    "whole softmax does each block's partial output stand for?":
        "合并 [{case}]：你合并出的输出不等于对所有键计算的注意力。每个块的部分输出代表整个 softmax 的多大份额？",
    "merge [{case}]: the output is right, but your lse is not the log-sum-exp of the scores over "
    "all the keys.": "合并 [{case}]：输出是对的，但你的 lse 不是所有键上分数的 log-sum-exp。",
    "Correct: your merge gives attention over all the keys, output and log-sum-exp, in {cases} "
    "cases: causal blocks a query does not see, large scores, four blocks in turn; and as "
    "ring_forward's merge on {world} ranks.":
        "正确：在 {cases} 个情形中，你的合并都得出了对所有键计算的注意力，输出和 log-sum-exp 都对："
        "包括查询看不到的因果块、很大的分数、依次合并的四个块；在 {world} 个进程上作为 ring_forward "
        "的合并也正确。",
    "merge: as ring_forward's merge on {world} ranks your function failed: {error}":
        "合并：在 {world} 个进程上作为 ring_forward 的合并时，你的函数出错了：{error}",
    "merge: as ring_forward's merge on {world} ranks your function does not give causal attention "
    "over the whole sequence.":
        "合并：在 {world} 个进程上作为 ring_forward 的合并时，你的函数得出的不是整个序列上的因果注意力。",
    "A query that sees no key of a block has lse = -inf and out = 0 there: its weight must come "
    "out 0, not nan.": "看不到某个块中任何键的查询，在该块上 lse = -inf、out = 0：它的权重必须是 0，而不是 nan。",
    "exp of a log-sum-exp this large overflows: exponentiate only differences of log-sum-exps.":
        "对这么大的 log-sum-exp 取 exp 会溢出：只对 log-sum-exp 之间的差取指数。",
    "11 keys in blocks of 4 and 7, no mask": "11 个键分成 4 个和 7 个两块，无掩码",
    "causal, the earlier half of the keys first (the first 6 queries see none of the second "
    "block: lse_b = -inf, out_b = 0)":
        "因果，前一半键在先（前 6 个查询看不到第二块中的任何键：lse_b = -inf，out_b = 0）",
    "causal, the later half of the keys first (lse_a = -inf for the first 6 queries)":
        "因果，后一半键在先（前 6 个查询的 lse_a = -inf）",
    "causal, zig-zag blocks: chunks 0 and 3 against chunks 1 and 2":
        "因果，锯齿形的块：第 0、3 段对第 1、2 段",
    "large scores in float32 (log-sum-exps of a few hundred)":
        "float32 下很大的分数（log-sum-exp 达几百）",
    "four blocks merged in turn from out = 0, lse = -inf, as ring_forward does":
        "从 out = 0、lse = -inf 开始依次合并四个块，与 ring_forward 的做法相同",
    # 11 mixture of experts
    "slots per expert": "每个专家的槽位数",
    "dropped share, layer 0, step 0": "被丢弃的比例（第 0 层，第 0 步）",
    "dropped share of layer 0": "第 0 层被丢弃的槽位比例",
    # 05 pipeline parallel: the 1F1B order
    "1F1B order: not answered yet. Define your function and pass it in.":
        "1F1B 顺序：尚未作答。请定义你的函数并把它传进来。",
    "1F1B order: your function ran the package's 1F1B schedule: write the order yourself.":
        "1F1B 顺序：你的函数运行了本软件包自己的 1F1B 调度：请自己写出这个顺序。",
    "1F1B order: stage {stage} of {stages} with m={m} must run each micro-batch's forward and "
    "backward exactly once, {count} operations; yours runs other operations ({got_count} of them).":
        "1F1B 顺序：{stages} 个阶段中的阶段 {stage} 在 m={m} 时，每个微批次的前向和反向必须各运行恰好一次，"
        "共 {count} 个操作；你的函数运行的是别的操作（共 {got_count} 个）。",
    "1F1B order: for stage {stage} of {stages} with m={m} your function did not return a list of "
    "(kind, micro-batch) pairs: {error}":
        "1F1B 顺序：对 {stages} 个阶段中的阶段 {stage}、m={m}，你的函数返回的不是由 (种类, 微批次) 对组成的列表：{error}",
    "balancing loss: your function called gpututor.moe.load_balancing_loss: write the loss "
    "yourself.": "负载均衡损失：你的函数调用了 gpututor.moe.load_balancing_loss：请自己写出这个损失。",
    "1F1B order: stage {stage} of {stages} with m={m} runs the right operations, but from "
    "position {position} on in another order. How many forwards does a stage run before its first "
    "backward?":
        "1F1B 顺序：{stages} 个阶段中的阶段 {stage} 在 m={m} 时运行的操作是对的，但从第 {position} 个位置起"
        "顺序不同。一个阶段在第一次反向之前要运行多少次前向？",
    "Correct: your order is 1F1B's for every stage of 2, 3 and 4-stage pipelines, also with fewer "
    "micro-batches than stages.":
        "正确：对 2、3、4 个阶段的流水线的每个阶段，你的顺序都与 1F1B 一致，微批次比阶段少时也一致。",
    "{what}: {answer} is not what the formula gives. Try again.": "{what}：{answer} 不是公式给出的值。请再试一次。",
    "Correct. {what}: {number} (the formula gives {expected})": "正确。{what}：{number}（公式给出 {expected}）",
    "dropped share: there are no records yet (did section 3's run finish?): nothing to compare "
    "your answer with.": "被丢弃的比例：还没有记录（第 3 节的运行结束了吗？），无从比较你的答案。",
    "dropped share: this run dropped no slot of layer {layer}, so any 0 would pass; run section 3 "
    "again with a smaller capacity_factor (e.g. 0.8) and answer for that run.":
        "被丢弃的比例：这次运行在第 {layer} 层没有丢弃任何槽位，任何 0 都能通过；请用更小的 "
        "capacity_factor（例如 0.8）重新运行第 3 节，并针对那次运行作答。",
    "balancing loss: not answered yet. Define your function and pass it in.":
        "负载均衡损失：尚未作答。请定义你的函数并把它传进来。",
    "balancing loss: for {shape} your function returned {got!r}, not a one-number tensor.":
        "负载均衡损失：在 {shape} 的情况下，你的函数返回了 {got!r}，而不是只含一个数的张量。",
    "balancing loss: for {shape} your loss is {got:.6g}, not the reference's value. Check what "
    "f_e and P_e average over, and the factor in front.":
        "负载均衡损失：在 {shape} 的情况下，你的损失是 {got:.6g}，与参考值不同。检查 f_e 和 P_e "
        "各自是对什么求平均的，以及前面的系数。",
    "balancing loss: for {shape} the value is right but its gradient to the router probabilities "
    "is not: the loss must reach the router through P_e (f_e only counts choices).":
        "负载均衡损失：在 {shape} 的情况下，数值正确，但它对路由概率的梯度不对：损失必须通过 P_e "
        "传到路由器（f_e 只是在数选择的次数）。",
    "Correct: your balancing loss equals gpututor.moe.load_balancing_loss, value and gradient, on "
    "three routings.": "正确：你的负载均衡损失在三种路由上与 gpututor.moe.load_balancing_loss 一致，"
                       "数值和梯度都一致。",
}
