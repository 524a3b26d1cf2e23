package dev.decodiff.llamacpp;

import dev.decodiff.llamacpp.ffi.GgufPreflight;
import dev.decodiff.llamacpp.ffi.LlamaCppException;
import dev.decodiff.llamacpp.ffi.LlamaCppHome;

import java.nio.file.Path;

/**
 * Qwen3.5 files the pinned llama.cpp cannot load, refused with the reason instead of its tensor-shape error: its
 * loader (src/models/qwen35.cpp, qwen35moe.cpp: head_v_dim = ssm_d_state) sizes the linear-attention value heads with
 * the key head width, so a checkpoint with linear_value_head_dim ≠ linear_key_head_dim (no released Qwen3.5 has one)
 * has attn_qkv, attn_gate, ssm_conv1d and ssm_out of other shapes than it expects.
 */
public final class Qwen35Limits {
    private Qwen35Limits() {}

    public static void check(Path gguf, GgufPreflight.Header h) {
        String a = h.architecture();
        if (!a.equals("qwen35") && !a.equals("qwen35moe")) return;
        long dk = h.integer("ssm.state_size", -1), inner = h.integer("ssm.inner_size", -1), hv = h.integer("ssm.time_step_rank", -1);
        if (dk <= 0 || inner <= 0 || hv <= 0 || inner == dk * hv) return;
        throw new LlamaCppException("llama.cpp " + LlamaCppHome.RELEASE + " cannot load " + gguf + ": its linear-attention value heads are "
                + inner / hv + " wide and its key heads " + dk + ", but llama.cpp's " + a + " loader sizes value heads with the key head width"
                + " (linear_value_head_dim must equal linear_key_head_dim); compare a checkpoint with equal widths"
                + " (checkpoints/qwen35-tiny-llamacpp, qwen35-tiny-moe-llamacpp)");
    }
}
