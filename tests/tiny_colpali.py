"""Tiny, randomly initialised ColPali-family models and processors, built at test time.

No weights are committed and nothing is downloaded: a byte-level BPE tokenizer is trained on two
sentences, each family's config is shrunk to one layer of width 32, and the processors' image
sizes are cut to a handful of patches. The point is to run lookalike's whole colpali path
(load from a folder offline, encode pages and queries, cache, MaxSim) on every family.
"""

from __future__ import annotations

from pathlib import Path

import torch

FAMILIES = ("ColPali", "ColQwen2", "ColIdefics3", "ColModernVBert")


def _tokenizer(special):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<pad>", "<s>", "</s>", *special],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["Describe the image. Query: revenue by segment quarter", "User: Assistant:"], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")


def _small(**extra):
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=2, **extra)


def build(family: str):
    """(model, processor) of the family, tiny and random (seeded)."""
    import colpali_engine.models as cm
    import transformers as tf

    torch.manual_seed(0)
    if family == "ColPali":
        tok = _tokenizer(["<image>"])
        ip = tf.SiglipImageProcessor(size={"height": 32, "width": 32})
        ip.image_seq_length = 4
        proc = cm.ColPaliProcessor(image_processor=ip, tokenizer=tok)
        cfg = tf.PaliGemmaConfig(
            vision_config=_small(image_size=32, patch_size=16, projection_dim=32),
            text_config=_small(model_type="gemma", num_key_value_heads=1, head_dim=16, vocab_size=len(proc.tokenizer)),
            image_token_id=proc.tokenizer.convert_tokens_to_ids("<image>"), projection_dim=32,
            vocab_size=len(proc.tokenizer))
        return cm.ColPali(cfg).eval(), proc
    if family == "ColQwen2":
        tok = _tokenizer(["<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|endoftext|>", "<|im_start|>",
                          "<|im_end|>", "<|video_pad|>"])
        ip = tf.Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=56 * 56 * 4, patch_size=14, merge_size=2,
                                      temporal_patch_size=2)
        proc = cm.ColQwen2Processor(image_processor=ip, tokenizer=tok, video_processor=tf.Qwen2VLVideoProcessor())
        cfg = tf.Qwen2VLConfig(
            vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=1, patch_size=14,
                               spatial_merge_size=2, in_chans=3, temporal_patch_size=2),
            text_config=_small(num_key_value_heads=2, vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                               rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
            image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
            vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"), vocab_size=len(tok))
        return cm.ColQwen2(cfg).eval(), proc
    idefics_tokens = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>", "<|begin_of_text|>"]
    tok = _tokenizer(idefics_tokens)
    ip = tf.Idefics3ImageProcessor(do_image_splitting=False, size={"longest_edge": 64}, max_image_size={"longest_edge": 64})
    vision = _small(image_size=64, patch_size=16)
    if family == "ColIdefics3":
        proc = cm.ColIdefics3Processor(image_processor=ip, tokenizer=tok, image_seq_len=4)
        cfg = tf.Idefics3Config(vision_config=vision,
                                text_config=_small(model_type="llama", num_key_value_heads=2, vocab_size=len(tok),
                                                   pad_token_id=tok.pad_token_id),
                                scale_factor=2, image_token_id=tok.convert_tokens_to_ids("<image>"),
                                vocab_size=len(tok), pad_token_id=tok.pad_token_id)
        return cm.ColIdefics3(cfg).eval(), proc
    if family == "ColModernVBert":
        proc = cm.ColModernVBertProcessor(image_processor=ip, tokenizer=tok, image_seq_len=4)
        cfg = tf.ModernVBertConfig(
            vision_config=vision,
            text_config=_small(vocab_size=len(tok), pad_token_id=tok.pad_token_id, sep_token_id=tok.eos_token_id,
                               cls_token_id=tok.bos_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id),
            pixel_shuffle_factor=2, image_token_id=tok.convert_tokens_to_ids("<image>"), vocab_size=len(tok))
        return cm.ColModernVBert(cfg).eval(), proc
    raise ValueError(family)


def save(family: str, folder: Path):
    model, proc = build(family)
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return model, proc


BI_FAMILIES = ("BiPali", "BiQwen2", "BiIdefics3", "BiModernVBert")


def save_bi(family: str, folder: Path):
    """A tiny random colpali-engine Bi* model (single-vector) of the family, with its Col* twin's
    processor files (the Bi* processors mirror them), saved to folder."""
    import colpali_engine.models as cm

    col, proc = build(family.replace("Bi", "Col", 1))
    torch.manual_seed(0)
    model = getattr(cm, family)(col.config).eval()
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return model, proc


DUAL_KINDS = ("clip", "siglip", "siglip2")


def save_dual(kind: str, folder: Path):
    """A tiny random CLIP / SigLIP / SigLIP-2 model and processor saved to folder (width 32, one layer)."""
    import transformers as tf

    torch.manual_seed(0)
    tok = _tokenizer([])
    small = _small()
    text = dict(small, vocab_size=len(tok), max_position_embeddings=64)
    if kind == "clip":
        cfg = tf.CLIPConfig(text_config=dict(text, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                             bos_token_id=tok.bos_token_id),
                            vision_config=dict(small, image_size=32, patch_size=16), projection_dim=16)
        model = tf.CLIPModel(cfg)
        proc = tf.CLIPProcessor(image_processor=tf.CLIPImageProcessor(size={"shortest_edge": 32},
                                                                      crop_size={"height": 32, "width": 32}),
                                tokenizer=tok)
    elif kind == "siglip":
        model = tf.SiglipModel(tf.SiglipConfig(text_config=text, vision_config=dict(small, image_size=32, patch_size=16)))
        proc = tf.SiglipProcessor(image_processor=tf.SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok)
    elif kind == "siglip2":
        model = tf.Siglip2Model(tf.Siglip2Config(text_config=text, vision_config=dict(small, num_patches=4, patch_size=16)))
        proc = tf.Siglip2Processor(image_processor=tf.Siglip2ImageProcessor(max_num_patches=4, patch_size=16),
                                   tokenizer=tok)
    else:
        raise ValueError(kind)
    model.eval().save_pretrained(folder)
    proc.save_pretrained(folder)
    return model, proc
