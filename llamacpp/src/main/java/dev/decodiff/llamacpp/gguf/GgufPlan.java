package dev.decodiff.llamacpp.gguf;

import java.util.List;
import java.util.Map;

/**
 * What a GGUF converted from a Hugging Face checkpoint holds, decided before a byte is written: metadata in the
 * order llama.cpp's converter writes it, and each tensor's GGUF name, ggml shape, type and where its values come from.
 */
public sealed interface GgufPlan permits Gemma4GgufPlan, Qwen35GgufPlan, LlamaGgufPlan {
    Map<String, GgufValue> metadata();

    List<Gemma4GgufPlan.Planned> tensors();

    /** general.architecture: the llama.cpp model the file is for. */
    default String architecture() { return metadata().get("general.architecture").asString(); }

    default List<GgufTensorInfo> tensorInfos() {
        return GgufWriter.layout(tensors().stream().map(t -> new GgufWriter.Tensor(t.name(), t.ne(), t.type(), null)).toList());
    }

    /**
     * Values computed from checkpoint tensors rather than copied: element i of the GGUF tensor is
     * {@code op(source[i / per][index(i % per)])} where the sources are stacked (per = elements / sources) — the
     * converter's head reorderings, expert splits and stacks, and its arithmetic on norms and A_log.
     */
    record Derived(List<String> sources, java.util.function.LongUnaryOperator index, FloatOp op) {
        public static final FloatOp IDENTITY = x -> x;
    }

    @FunctionalInterface
    interface FloatOp {
        float apply(float x);
    }
}
