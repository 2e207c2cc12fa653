"""Whole models from tiny configs (random weights, no downloads): graphs, breaks, compile
time and speed of refcomp against eager, and Dynamo's graph count for the same call.

`python -m bench.models [--reps N]` prints the markdown table kept in bench/MODELS.md.
The models are torch.nn's own (TransformerEncoder, Transformer, LSTM, GRU) and two
CNNs written in torchvision's style (BasicBlock ResNet, MobileNetV2 inverted residuals):
torchvision and timm are not installable next to the CPU build of torch 2.13 here (the
PyPI torchvision for 2.13 is a CUDA build whose C ops fail to load; timm imports
torchvision), so their model files cannot be used (bench/MODELS.md says more).
tests/frontend/test_real_models.py runs the same builders and checks the forward equals
eager with the graph counts below.  `HF_MODELS` are Hugging Face transformers models from
tiny configs (GPT-2, Llama, BERT, T5, BART, ViT), shared with tests/models.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn


# --- models ---------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNetTiny(nn.Module):
    """torchvision's ResNet-18 layout at width 16, one block per stage."""

    def __init__(self, num_classes=10, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        chans = [width, width * 2, width * 4, width * 8]
        layers, cin = [], width
        for i, c in enumerate(chans):
            layers.append(nn.Sequential(BasicBlock(cin, c, 1 if i == 0 else 2)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class InvertedResidual(nn.Module):
    """torchvision.models.mobilenetv2.InvertedResidual."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(True),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden), nn.ReLU6(True),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetTiny(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(True),
            InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 2, 4),
            InvertedResidual(24, 24, 1, 4), InvertedResidual(24, 32, 2, 4))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, num_classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab=100, dim=32, hidden=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, 2, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


class GRUClassifier(nn.Module):
    def __init__(self, dim=16, hidden=32, classes=5):
        super().__init__()
        self.gru = nn.GRU(dim, hidden, 1, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out.mean(dim=1))


class Seq2SeqTransformer(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.model = nn.Transformer(dim, 4, 2, 2, 64, dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.model(src, tgt, tgt_mask=mask, tgt_is_causal=True)


def _encoder():
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    return nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)


# name -> (build the model, make its inputs); eval mode, fixed seed.
MODELS = {
    "resnet_tiny": (ResNetTiny, lambda: (torch.randn(2, 3, 64, 64),)),
    "mobilenet_v2_tiny": (MobileNetTiny, lambda: (torch.randn(2, 3, 64, 64),)),
    "transformer_encoder": (_encoder, lambda: (torch.randn(2, 16, 64),)),
    "seq2seq_transformer": (Seq2SeqTransformer,
                            lambda: (torch.randn(2, 10, 32), torch.randn(2, 7, 32))),
    "lstm_lm": (LSTMLanguageModel, lambda: (torch.randint(0, 100, (4, 12)),)),
    "gru_classifier": (GRUClassifier, lambda: (torch.randn(4, 12, 16),)),
}


# --- Hugging Face transformers models from tiny configs (tests/models/test_transformers.py
# runs the same builders): name -> () -> (model, keyword inputs, the output compared).
def _ids(*shape, vocab=100):
    return torch.randint(2, vocab, shape)


def hf_gpt2():
    import transformers

    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100,
                                  n_positions=64, bos_token_id=0, eos_token_id=1)
    ids = _ids(2, 8)
    return transformers.GPT2LMHeadModel(cfg), dict(input_ids=ids, labels=ids), "logits"


def hf_llama():
    import transformers

    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=100, max_position_embeddings=64,
                                   bos_token_id=0, eos_token_id=1, pad_token_id=0)
    return transformers.LlamaForCausalLM(cfg), dict(input_ids=_ids(2, 8)), "logits"


def hf_bert():
    import transformers

    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                  num_attention_heads=2, vocab_size=100,
                                  max_position_embeddings=64)
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    return transformers.BertModel(cfg), dict(input_ids=_ids(2, 8), attention_mask=mask), \
        "last_hidden_state"


def hf_t5():
    import transformers

    cfg = transformers.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_ff=64,
                                num_heads=2, d_kv=16, vocab_size=100, decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg), \
        dict(input_ids=_ids(2, 8), decoder_input_ids=_ids(2, 4)), "logits"


def hf_bart():
    import transformers

    cfg = transformers.BartConfig(encoder_layers=2, decoder_layers=2, d_model=32,
                                  encoder_ffn_dim=64, decoder_ffn_dim=64,
                                  encoder_attention_heads=2, decoder_attention_heads=2,
                                  vocab_size=100, max_position_embeddings=64)
    return transformers.BartForConditionalGeneration(cfg), \
        dict(input_ids=_ids(2, 8), decoder_input_ids=_ids(2, 4)), "logits"


def hf_vit():
    import transformers

    cfg = transformers.ViTConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                 num_attention_heads=2, image_size=16, patch_size=4)
    return transformers.ViTModel(cfg), dict(pixel_values=torch.randn(2, 3, 16, 16)), \
        "last_hidden_state"


def hf_resnet():
    import transformers

    cfg = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32, 64],
                                    depths=[1, 1, 1, 1], layer_type="basic", num_labels=10)
    return transformers.ResNetForImageClassification(cfg), \
        dict(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([1, 7])), "logits"


def hf_convnext():
    import transformers

    cfg = transformers.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                      num_labels=10)
    return transformers.ConvNextForImageClassification(cfg), \
        dict(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([1, 7])), "logits"


def hf_distilbert():
    import transformers

    cfg = transformers.DistilBertConfig(n_layers=2, dim=32, hidden_dim=64, n_heads=2,
                                        vocab_size=100, max_position_embeddings=64)
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    return transformers.DistilBertForSequenceClassification(cfg), \
        dict(input_ids=_ids(2, 8), attention_mask=mask, labels=torch.tensor([0, 1])), "logits"


def hf_roberta():
    import transformers

    cfg = transformers.RobertaConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                     num_attention_heads=2, vocab_size=100,
                                     max_position_embeddings=64, pad_token_id=1)
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    ids = _ids(2, 8)
    return transformers.RobertaForMaskedLM(cfg), \
        dict(input_ids=ids, attention_mask=mask, labels=ids), "logits"


def hf_mistral():
    import transformers

    cfg = transformers.MistralConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     vocab_size=100, max_position_embeddings=64,
                                     sliding_window=4, bos_token_id=0, eos_token_id=1,
                                     pad_token_id=0)
    return transformers.MistralForCausalLM(cfg), dict(input_ids=_ids(2, 8)), "logits"


def hf_qwen2():
    import transformers

    cfg = transformers.Qwen2Config(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=100, max_position_embeddings=64,
                                   bos_token_id=0, eos_token_id=1, pad_token_id=0)
    ids = _ids(2, 8)
    return transformers.Qwen2ForCausalLM(cfg), dict(input_ids=ids, labels=ids), "logits"


def hf_whisper():
    import transformers

    cfg = transformers.WhisperConfig(encoder_layers=2, decoder_layers=2, d_model=32,
                                     encoder_ffn_dim=64, decoder_ffn_dim=64,
                                     encoder_attention_heads=2, decoder_attention_heads=2,
                                     num_mel_bins=8, max_source_positions=16,
                                     max_target_positions=32, vocab_size=100,
                                     decoder_start_token_id=0, pad_token_id=0,
                                     bos_token_id=0, eos_token_id=1)
    return transformers.WhisperForConditionalGeneration(cfg), \
        dict(input_features=torch.randn(2, 8, 32), decoder_input_ids=_ids(2, 4)), "logits"


def hf_wav2vec2():
    import transformers

    cfg = transformers.Wav2Vec2Config(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                      num_attention_heads=2, conv_dim=(16, 16),
                                      conv_stride=(5, 2), conv_kernel=(10, 3),
                                      num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                                      vocab_size=20, do_stable_layer_norm=True)
    return transformers.Wav2Vec2ForCTC(cfg), dict(input_values=torch.randn(2, 400)), "logits"


def hf_clip():
    import transformers

    cfg = transformers.CLIPConfig(
        text_config=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                         num_attention_heads=2, vocab_size=100, max_position_embeddings=16,
                         bos_token_id=0, eos_token_id=2, pad_token_id=1),
        vision_config=dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                           num_attention_heads=2, image_size=16, patch_size=4),
        projection_dim=16)
    return transformers.CLIPModel(cfg), \
        dict(input_ids=_ids(2, 8), pixel_values=torch.randn(2, 3, 16, 16),
             return_loss=True), "logits_per_image"


def hf_swin():
    import transformers

    cfg = transformers.SwinConfig(image_size=32, patch_size=2, embed_dim=16, depths=[1, 2],
                                  num_heads=[2, 4], window_size=4, num_labels=10)
    return transformers.SwinForImageClassification(cfg), \
        dict(pixel_values=torch.randn(2, 3, 32, 32), labels=torch.tensor([1, 7])), "logits"


def _lm(**extra):  # the decoder-only and encoder configs below: 2 layers, d=32
    return dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                num_attention_heads=4, vocab_size=100, max_position_embeddings=64, **extra)


def _text(model, key="last_hidden_state", labels=False):
    ids = _ids(2, 8)
    inputs = dict(input_ids=ids, attention_mask=torch.tensor([[1] * 8, [1] * 5 + [0] * 3]))
    return model, dict(inputs, labels=ids) if labels else inputs, key


def hf_albert():
    import transformers

    return _text(transformers.AlbertModel(transformers.AlbertConfig(**_lm(embedding_size=16))))


def hf_electra():
    import transformers

    return _text(transformers.ElectraModel(transformers.ElectraConfig(**_lm(embedding_size=16))))


def hf_mobilebert():
    import transformers

    cfg = transformers.MobileBertConfig(**_lm(embedding_size=16, intra_bottleneck_size=16,
                                              true_hidden_size=16))
    return _text(transformers.MobileBertModel(cfg))


def hf_opt():
    import transformers

    cfg = transformers.OPTConfig(num_hidden_layers=2, hidden_size=32, ffn_dim=64,
                                 num_attention_heads=4, vocab_size=100,
                                 max_position_embeddings=64, word_embed_proj_dim=32)
    return _text(transformers.OPTForCausalLM(cfg), "logits", labels=True)


def hf_gpt_neox():
    import transformers

    ids = _ids(2, 8)
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**_lm())), \
        dict(input_ids=ids, labels=ids), "logits"


def hf_phi():
    import transformers

    ids = _ids(2, 8)
    return transformers.PhiForCausalLM(transformers.PhiConfig(**_lm())), \
        dict(input_ids=ids, labels=ids), "logits"


def hf_falcon():
    import transformers

    cfg = transformers.FalconConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                    vocab_size=100)
    return transformers.FalconForCausalLM(cfg), dict(input_ids=_ids(2, 8)), "logits"


def hf_gemma2():
    import transformers

    cfg = transformers.Gemma2Config(**_lm(head_dim=8, num_key_value_heads=2))
    return transformers.Gemma2ForCausalLM(cfg), dict(input_ids=_ids(2, 8)), "logits"


def hf_deit():
    import transformers

    cfg = transformers.DeiTConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                  num_attention_heads=2, image_size=16, patch_size=4,
                                  num_labels=10)
    return transformers.DeiTForImageClassification(cfg), \
        dict(pixel_values=torch.randn(2, 3, 16, 16), labels=torch.tensor([1, 7])), "logits"


HF_MODELS = {"gpt2": hf_gpt2, "llama": hf_llama, "bert": hf_bert, "t5": hf_t5,
             "bart": hf_bart, "vit": hf_vit, "resnet": hf_resnet, "convnext": hf_convnext,
             "distilbert": hf_distilbert, "roberta": hf_roberta, "mistral": hf_mistral,
             "qwen2": hf_qwen2, "whisper": hf_whisper, "wav2vec2": hf_wav2vec2,
             "clip": hf_clip, "swin": hf_swin, "albert": hf_albert, "electra": hf_electra,
             "mobilebert": hf_mobilebert, "opt": hf_opt, "gpt_neox": hf_gpt_neox,
             "phi": hf_phi, "falcon": hf_falcon, "gemma2": hf_gemma2, "deit": hf_deit}


def build(name):
    torch.manual_seed(0)
    make, inputs = MODELS[name]
    return make().eval(), inputs()


def build_hf(name):
    """(model in eval mode, keyword inputs, output key) of a transformers model, seeded."""
    import warnings

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, inputs, key = HF_MODELS[name]()
    return model.eval(), inputs, key


# --- measuring ------------------------------------------------------------------------------
def _time(fn, args, n):
    start = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - start) / n


def measure(name, reps=7, dynamo=True) -> dict:
    import refcomp

    if name in HF_MODELS:
        model, kwargs, key = build_hf(name)
        args = ()
        pick = (lambda out: out[key])  # noqa: E731
    else:
        (model, args), kwargs = build(name), {}
        pick = (lambda out: out)  # noqa: E731
    run_model = (lambda *a: model(*a, **kwargs))  # noqa: E731
    with torch.no_grad():
        want = pick(model(*args, **kwargs))
        refcomp.reset()
        report = refcomp.explain(model, *args, **kwargs)
        compiled = refcomp.compile(model)
        run_compiled = (lambda *a: compiled(*a, **kwargs))  # noqa: E731
        start = time.perf_counter()
        got = pick(compiled(*args, **kwargs))
        cold = time.perf_counter() - start
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        n = max(1, int(0.05 / max(_time(run_model, args, 1), 1e-6)))
        eager_t, comp_t = [], []
        for _ in range(reps):  # interleaved rounds
            eager_t.append(_time(run_model, args, n))
            comp_t.append(_time(run_compiled, args, n))
        row = {"model": name, "graphs": report.graph_count, "breaks": report.graph_break_count,
               "reasons": sorted({b["id"] for b in report.break_reasons}),
               "compile_s": cold, "eager_ms": 1e3 * statistics.median(eager_t),
               "refcomp_ms": 1e3 * statistics.median(comp_t)}
        if dynamo:
            from torch import _dynamo

            _dynamo.reset()
            ex = _dynamo.explain(model)(*args, **kwargs)
            row["dynamo_graphs"] = ex.graph_count
            row["dynamo_breaks"] = ex.graph_break_count
    return row


def table(rows) -> str:
    lines = ["| model | graphs | breaks | Dynamo graphs/breaks | compile s | eager ms |"
             " refcomp ms | speed vs eager |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reasons = f" ({', '.join(r['reasons'])})" if r["reasons"] else ""
        dynamo = f"{r.get('dynamo_graphs', '-')}/{r.get('dynamo_breaks', '-')}"
        if r.get("dynamo_graphs") == 0:  # Dynamo runs the frame eagerly (RNNs: allow_rnn)
            dynamo = "0 (frame skipped)"
        lines.append(f"| {r['model']} | {r['graphs']} | {r['breaks']}{reasons} | {dynamo} |"
                     f" {r['compile_s']:.2f} | {r['eager_ms']:.2f} | {r['refcomp_ms']:.2f} |"
                     f" {r['eager_ms'] / r['refcomp_ms']:.2f}x |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--no-dynamo", action="store_true")
    a = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = a.only.split(",") if a.only else list(MODELS) + list(HF_MODELS)
    rows = [measure(n, a.reps, not a.no_dynamo) for n in names]
    print(f"torch {torch.__version__}, 1 thread, median of {a.reps} interleaved rounds")
    print(table(rows))


if __name__ == "__main__":
    main()
