"""Lesson 04, section 2: what the replicated embedding and head weigh, counted on the model."""

from gpututor import RunSpec
from gpututor.lessons.tensor_parallel.vocabulary import vocabulary_share


def test_the_vocabulary_is_the_datas_and_the_head_flops_are_counted():
    spec = RunSpec(model="gpt", model_size="small", batch_size=32, seq_len=64)
    share = vocabulary_share(spec, batch_size=2)
    assert share["vocab_size"] == 96 and share["d_model"] == 128
    assert share["embedding_params"] == 96 * 128
    assert share["head_flops"] == 2 * 2 * 64 * 128 * 96   # 2·b·s·d·v
    assert 0 < share["embedding_share"] < 0.05 and 0 < share["head_flop_share"] < 0.05
