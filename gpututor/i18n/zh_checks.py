"""Simplified Chinese for the exercise checkers (``gpututor/lessons/exercises.py``): their
messages, and the ``what`` of every question the English notebooks ask with ``check_answer`` or
``check_names`` (tests/test_i18n.py finds them there)."""

CHECKS = {
    # ---- the checkers' messages ---------------------------------------------------------------
    "{what}: not answered yet. Replace ... with your answer and run the cell again.":
        "{what}：尚未作答。请把 ... 换成你的答案，然后重新运行本单元。",
    "{what}: this notebook has not measured it yet (did every cell above run and finish?): "
    "nothing to compare your answer with.":
        "{what}：本笔记本还没有测出这个量（上面的单元都运行完了吗？），无法与你的答案比较。",
    "{what}: {answer} is not what this notebook measured. Try again.":
        "{what}：{answer} 与本笔记本测得的结果不符。请再试一次。",
    "Correct. {what}: {number} (measured: {expected})": "正确。{what}：{number}（实测：{expected}）",
    "{what}: not answered yet. Replace ... with a list of names and run the cell again.":
        "{what}：尚未作答。请把 ... 换成一个名称列表，然后重新运行本单元。",
    "{what}: {answer} is not a list of names. Try again.": "{what}：{answer} 不是名称列表。请再试一次。",
    "{what}: {given} is not it ({right} of yours are right, {missing} missing). Try again.":
        "{what}：{given} 不对（其中 {right} 个正确，缺少 {missing} 个）。请再试一次。",
    "Correct. {what}: {names}": "正确。{what}：{names}",
    "Not answered yet: define my_update and run the cell again.": "尚未作答：请定义 my_update，然后重新运行本单元。",

    # ---- what the notebooks ask, by lesson -------------------------------------------------------
    # 00 start here
    "sequences per rank per step": "每个进程每步的序列数",
    "speedup of 2 ranks over 1": "2 个进程相对 1 个进程的加速比",
    "AdamW state bytes on rank 0": "进程 0 上 AdamW 状态的字节数",
    # 01 single device
    "AdamW state in bytes": "AdamW 状态的字节数",
    "activation ratio": "激活值之比",
    "hours for 1e9 tokens": "处理 1e9 个 token 所需的小时数",
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
    # 02 data parallel
    "bytes all-reduced per step": "每步全归约的字节数",
    "bytes sent per rank on 8 ranks": "8 个进程时每个进程发送的字节数",
    "ring all-reduce: not answered yet. Define your function and pass it in.":
        "环形全归约：尚未作答。请定义你的函数并把它传进来。",
    "on {world} ranks your function failed: {first_line}": "在 {world} 个进程上你的函数出错：{first_line}",
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
    # 03 sharding
    "first strategy whose measured peak fits": "实测峰值放得下的第一个策略",
    "bytes sent per rank per step": "每个进程每步发送的字节数",
    # 04 tensor parallel
    "bytes all-reduced per step by tp": "tp 每步全归约的字节数",
    # 05 pipeline parallel
    "bubble for p=2, m=8": "p=2、m=8 时的气泡占比",
    "fewest micro-batches for a bubble <= 10 % on 4 stages": "4 个阶段时使气泡 <= 10 % 的最少微批次数",
    "measured bubble of the m=8 run's last step": "m=8 那次运行最后一步的实测气泡占比",
    # 06 mixed precision, 08 choosing hardware
    "bytes per parameter": "每个参数的字节数",
    "smallest surviving gradient": "不会丢失的最小梯度",
    # 07 compression
    "int8 scale of row 3": "第 3 行的 int8 缩放因子",
    "parameters removed": "移除的参数个数",
    "bytes of int8 weights and scales": "int8 权重与缩放因子的字节数",
    # 08 choosing hardware
    "smallest GPU count": "最少的 GPU 数",
    "GPUs in the smallest cluster": "最小集群中的 GPU 数",
    "relative error of the formula's peak for DDP": "DDP 的公式峰值的相对误差",
    # 09 composing parallelisms
    "parameter bytes of ddp+tp's rank 0 beyond half the model": "ddp+tp 的进程 0 超出半个模型的参数字节数",
    "layouts predicted to fit 3/4 of the capacity": "预计放得进 3/4 容量的布局",
    # 10 long context
    "visible pairs of rank 0, contiguous split": "连续切分下进程 0 的可见 query-key 对数",
    "activations, one process / a cp=2 rank": "激活值之比：单进程 / cp=2 的一个进程",
    "bytes sent per step by cp=2": "cp=2 每步发送的字节数",
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
