"""The corpus, tokenizer and sampler, and the models: what every run (and every lesson) stands on.

No processes here: everything runs in the test process on CPU, in a second or two.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from gpututor import RunSpec, batches, build_model
from gpututor.data import corpus_path, load_corpus

CORPUS_PATH = corpus_path("en")
from gpututor.model_sizes import MODEL_SIZES
from gpututor.measure.flops import model_flops_per_token
from gpututor.models import count_parameters


def gpt_spec(**changes) -> RunSpec:
    base = dict(model="gpt", model_size="tiny", strategy="single", world_size=1,
                batch_size=8, seq_len=32, steps=3)
    base.update(changes)
    return RunSpec(**base)


# ---- data ------------------------------------------------------------------------------------

def test_corpus_is_at_least_300_kB():
    assert CORPUS_PATH.stat().st_size >= 300_000
    tokenizer, ids = load_corpus()
    assert len(ids) == CORPUS_PATH.stat().st_size  # one token per character (ASCII)
    assert tokenizer.vocab_size == int(ids.max()) + 1


def test_tokenizer_round_trip():
    tokenizer, ids = load_corpus()
    text = CORPUS_PATH.read_text(encoding="ascii")[:5000]
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.encode(text) == ids[:5000].tolist()  # the corpus ids are that encoding


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_ranks_together_see_the_one_process_batch(world_size):
    """Concatenating what the N data-parallel ranks see gives exactly one process's batch."""
    spec = gpt_spec(batch_size=8, steps=3)
    one_process = list(batches(spec))
    per_rank = [list(batches(spec, rank, world_size)) for rank in range(world_size)]
    for step, (inputs, targets) in enumerate(one_process):
        shards = [per_rank[rank][step] for rank in range(world_size)]
        assert all(s[0].shape[0] == spec.batch_size // world_size for s in shards)
        torch.testing.assert_close(torch.cat([s[0] for s in shards]), inputs, rtol=0, atol=0)
        torch.testing.assert_close(torch.cat([s[1] for s in shards]), targets, rtol=0, atol=0)


def test_batches_are_deterministic_for_the_seed():
    spec = gpt_spec(steps=3)
    first, again = list(batches(spec)), list(batches(spec))
    other_seed = list(batches(spec.replace(seed=1)))
    for (a, ta), (b, tb), (c, _) in zip(first, again, other_seed):
        assert torch.equal(a, b) and torch.equal(ta, tb)
        assert not torch.equal(a, c)
    inputs, targets = first[0]
    assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one
    assert not torch.equal(first[0][0], first[1][0])     # a new batch every step


# ---- models ----------------------------------------------------------------------------------

def test_build_model_gives_identical_weights_for_the_same_seed():
    a, b = build_model(gpt_spec()), build_model(gpt_spec())
    c = build_model(gpt_spec(seed=1))
    for (name, pa), (_, pb), (_, pc) in zip(a.state_dict().items(), b.state_dict().items(),
                                            c.state_dict().items()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0, msg=name)
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


# Documented in gpututor/models.py next to each size ("~0.25 M parameters", ...).
DOCUMENTED_PARAMS = {"tiny": 0.25e6, "small": 0.84e6, "medium": 2.7e6, "large": 6.4e6}


@pytest.mark.parametrize("size", list(MODEL_SIZES["gpt"]))
def test_parameter_counts_match_the_documented_sizes(size):
    n = count_parameters(build_model(gpt_spec(model_size=size)))
    assert n == pytest.approx(DOCUMENTED_PARAMS[size], rel=0.05), f"{size}: {n:,} parameters"


@pytest.mark.parametrize("size,seq_len", [("tiny", 32), ("small", 64)])
def test_counted_flops_match_the_6N_plus_attention_formula(size, seq_len):
    """FlopCounterMode on one forward+backward equals model_flops_per_token x tokens.

    The two agree exactly, not just roughly, because they count the same things: every matmul
    (the linear layers, the tied LM head, Q·K^T and scores·V) at 2 FLOPs per multiply-add, with
    backward = 2 x forward (gradient of the input and of the weight). Neither counts the
    embedding lookups (a gather, no multiply), bias adds (addmm is counted as its matmul only),
    LayerNorm, softmax or GELU: elementwise work, small next to the matmuls and usually
    limited by memory traffic rather than arithmetic.
    """
    spec = gpt_spec(model_size=size, seq_len=seq_len, batch_size=2)
    model = build_model(spec)
    inputs, targets = next(batches(spec))
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
    counted = counter.get_total_flops()
    predicted = model_flops_per_token(model, seq_len) * inputs.numel()
    torch.testing.assert_close(float(counted), float(predicted), rtol=1e-9, atol=0)


def test_activation_checkpointing_gives_the_same_loss_and_gradients():
    """Checkpointing recomputes a block's insides in backward: same numbers, less kept memory."""
    spec = gpt_spec(model_size="tiny")
    inputs, targets = next(batches(spec))
    results = []
    for checkpointing in (False, True):
        model = build_model(spec.replace(activation_checkpointing=checkpointing))
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (loss_a, grads_a), (loss_b, grads_b) = results
    # The recomputed forward runs the same ops on the same inputs: equal up to float rounding.
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-6, atol=1e-7)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_b[name], grads_a[name], rtol=1e-5, atol=1e-7, msg=name)


def test_recomputation_policies_give_the_same_gradients_and_keep_less():
    """none, selective (the attention core recomputed, Korthikanti et al. 2022), the
    matmul-outputs variant and full (block inputs only): same gradients; what forward leaves for
    backward, measured by the live-tensor probe, falls from none to selective to full;
    selective drops at least the T x T probabilities, matmul-outputs keeps the T x T scores."""
    from gpututor.measure.memory import LiveBytesProbe
    from gpututor.models import GPT
    spec = RunSpec(model="gpt", model_size="tiny", batch_size=8, seq_len=64, world_size=1)
    x, y = next(iter(batches(spec)))
    saved, grads = {}, {}
    for policy in ("none", "selective", "matmul-outputs", "full"):
        model = GPT(spec.model_config, seed=0, recompute=policy)
        with LiveBytesProbe(list(model.parameters()) + list(model.buffers())) as probe:
            loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
            probe.set_phase("backward")
            loss.backward()
        saved[policy] = probe.forward_end
        grads[policy] = [p.grad for p in model.parameters()]
    for policy in ("selective", "matmul-outputs", "full"):
        for got, want in zip(grads[policy], grads["none"]):
            torch.testing.assert_close(got, want)
    assert saved["none"] > saved["selective"] > saved["full"], saved
    cfg = spec.model_config
    square = cfg.n_layer * spec.batch_size * cfg.n_head * spec.seq_len ** 2 * 4   # fp32 T x T per layer
    assert saved["none"] - saved["selective"] >= square, saved
    assert saved["matmul-outputs"] - saved["full"] >= square, saved
    with pytest.raises(ValueError, match="recompute='some' is invalid"):
        GPT(spec.model_config, recompute="some")


def test_sdpa_attention_gives_the_naive_gpt_its_numbers():
    spec = RunSpec(model="gpt", model_size="tiny", batch_size=4, seq_len=32, world_size=1)
    x, y = next(iter(batches(spec)))
    grads = {}
    for attention in ("naive", "sdpa"):
        model = build_model(spec.replace(attention=attention))
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        grads[attention] = (loss.detach(), [p.grad for p in model.parameters()])
    torch.testing.assert_close(grads["sdpa"][0], grads["naive"][0])
    for got, want in zip(grads["sdpa"][1], grads["naive"][1]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="attention='flash' is invalid"):
        RunSpec(attention="flash")


def test_sdpa_runs_count_the_same_flops_as_naive_ones():
    """FlopCounterMode counts 0 for CPU SDPA; the worker adds attention's FLOPs back."""
    from gpututor import launch
    spec = RunSpec(model="gpt", model_size="tiny", strategy="single", world_size=1, batch_size=4,
                   seq_len=32, steps=3, device="cpu")
    naive = launch(spec).wait()["flops_per_step"]
    sdpa = launch(spec.replace(attention="sdpa")).wait()["flops_per_step"]
    assert sdpa == pytest.approx(naive, rel=0.01)


def test_sdpa_is_refused_where_model_parallel_splits_attention():
    from conftest import tiny_spec
    with pytest.raises(ValueError, match="attention='sdpa' is invalid for strategy='tp'"):
        tiny_spec(strategy="tp", world_size=2, attention="sdpa")


def test_the_chinese_corpus_is_utf8_text_the_tokenizer_round_trips():
    tokenizer, ids = load_corpus("zh")
    text = corpus_path("zh").read_text(encoding="utf-8")
    assert tokenizer.vocab_size == len(set(text)) > 2000 and "诗" in tokenizer.chars
    assert len(ids) == len(text) and int(ids.max()) == tokenizer.vocab_size - 1
    assert tokenizer.decode(ids[:200]) == text[:200]
    assert tokenizer.encode("床前明月光") == [tokenizer.chars.index(c) for c in "床前明月光"]
    with pytest.raises(ValueError, match="corpus='fr' is invalid: allowed values are 'en', 'zh'"):
        load_corpus("fr")


def test_the_english_ids_do_not_change_with_unicode_reading():
    tokenizer, ids = load_corpus()
    raw = CORPUS_PATH.read_bytes()
    assert tokenizer.chars == "".join(sorted(set(raw.decode("ascii"))))
    assert ids[:1000].tolist() == [tokenizer.chars.index(chr(b)) for b in raw[:1000]]


def test_a_run_on_the_chinese_corpus_trains_with_its_vocabulary():
    from gpututor import RunSpec, build_model, launch
    spec = RunSpec(model="gpt", model_size="tiny", corpus="zh", world_size=2, strategy="ddp",
                   batch_size=8, seq_len=32, steps=3)
    assert build_model(spec).tok_emb.num_embeddings == load_corpus("zh")[0].vocab_size
    summary = launch(spec).wait()
    assert summary["losses"][0] > summary["losses"][-1]
    with pytest.raises(ValueError, match="corpus='x' is invalid"):
        RunSpec(corpus="x")


def test_the_corpus_is_read_once_however_it_is_named():
    assert load_corpus() is load_corpus("en")   # the worker preloads load_corpus(); ranks ask by name


def test_live_probe_does_not_count_garbage_waiting_for_the_cycle_collector():
    """A tensor dropped in a reference cycle is freed only when Python's cycle collector runs,
    at a moment of its choosing: the probe collects at the end of forward, so what it counts as
    kept for backward is the same from one try to the next (the same run once read 11.1 MB and
    once 11.5 MB of activations)."""
    import gc
    from gpututor.measure.memory import LiveBytesProbe
    x = torch.ones(1000, requires_grad=True)
    enabled = gc.isenabled()
    gc.disable()                # the collector may not run on its own during the test
    try:
        with LiveBytesProbe([x]) as probe:
            kept = x * 2                              # 4000 bytes, reachable
            cycle = [x * 3]                           # 4000 bytes, unreachable after del
            cycle.append(cycle)
            del cycle
            probe.set_phase("backward")
            kept.sum().backward()
    finally:
        if enabled:
            gc.enable()
    assert probe.forward_end == 4000, probe.forward_end
