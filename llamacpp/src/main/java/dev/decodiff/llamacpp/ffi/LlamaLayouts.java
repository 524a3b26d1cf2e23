package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.util.List;

import static java.lang.foreign.MemoryLayout.paddingLayout;
import static java.lang.foreign.MemoryLayout.sequenceLayout;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C structs decodiff passes to or reads from llama.cpp, as one loaded build has them. The static layouts are the
 * bindings' own, written by hand from the headers of the pinned release (llama.cpp v0.5.0 as shipped by node-llama-cpp
 * 3.22.1) for x86-64 Linux: the fields the bindings touch, with their C types (enums are C ints, bools one byte) and
 * the padding the System V ABI inserts. The layouts of a loaded build come from its own headers ({@link LayoutProbe}
 * compiles sizeof/offsetof of exactly these fields): the same fields at that build's offsets, whatever else lies
 * between them kept as padding, so the struct a build's {@code *_default_params} returns passes through whole.
 */
public record LlamaLayouts(StructLayout modelParams, StructLayout contextParams, StructLayout batch, StructLayout tensor,
                           StructLayout threadpoolParams, StructLayout quantizeParams, String origin) {
    /** The structs in the order of {@link #all()}. */
    public List<StructLayout> all() { return List.of(modelParams, contextParams, batch, tensor, threadpoolParams, quantizeParams); }

    /** The bindings' own layouts: those of the pinned release. */
    public static LlamaLayouts pinned() {
        return new LlamaLayouts(MODEL_PARAMS, CONTEXT_PARAMS, BATCH, TENSOR, THREADPOOL_PARAMS, QUANTIZE_PARAMS, "the bindings' layouts of llama.cpp v0.5.0");
    }

    /** {@code struct llama_model_params} (include/llama.h). */
    public static final StructLayout MODEL_PARAMS = MemoryLayout.structLayout(
            ADDRESS.withName("devices"),
            ADDRESS.withName("tensor_buft_overrides"),
            JAVA_INT.withName("n_gpu_layers"),
            JAVA_INT.withName("split_mode"),
            JAVA_INT.withName("load_mode"),
            JAVA_INT.withName("lazy_mode"),
            JAVA_INT.withName("main_gpu"),
            paddingLayout(4),
            ADDRESS.withName("tensor_split"),
            ADDRESS.withName("progress_callback"),
            ADDRESS.withName("progress_callback_user_data"),
            ADDRESS.withName("kv_overrides"),
            JAVA_BOOLEAN.withName("vocab_only"),
            JAVA_BOOLEAN.withName("check_tensors"),
            JAVA_BOOLEAN.withName("use_extra_bufts"),
            JAVA_BOOLEAN.withName("no_host"),
            JAVA_BOOLEAN.withName("no_alloc"),
            JAVA_BOOLEAN.withName("load_mtp"),
            paddingLayout(2)
    ).withName("llama_model_params");

    /** {@code struct llama_context_params} (include/llama.h). */
    public static final StructLayout CONTEXT_PARAMS = MemoryLayout.structLayout(
            JAVA_INT.withName("n_ctx"),
            JAVA_INT.withName("n_batch"),
            JAVA_INT.withName("n_ubatch"),
            JAVA_INT.withName("n_seq_max"),
            JAVA_INT.withName("n_rs_seq"),
            JAVA_INT.withName("n_outputs_max"),
            JAVA_INT.withName("n_outputs_max_per_seq"),
            JAVA_INT.withName("n_threads"),
            JAVA_INT.withName("n_threads_batch"),
            JAVA_INT.withName("ctx_type"),
            JAVA_INT.withName("rope_scaling_type"),
            JAVA_INT.withName("pooling_type"),
            JAVA_INT.withName("attention_type"),
            JAVA_INT.withName("flash_attn_type"),
            JAVA_FLOAT.withName("rope_freq_base"),
            JAVA_FLOAT.withName("rope_freq_scale"),
            JAVA_FLOAT.withName("yarn_ext_factor"),
            JAVA_FLOAT.withName("yarn_attn_factor"),
            JAVA_FLOAT.withName("yarn_beta_fast"),
            JAVA_FLOAT.withName("yarn_beta_slow"),
            JAVA_INT.withName("yarn_orig_ctx"),
            JAVA_FLOAT.withName("defrag_thold"),
            ADDRESS.withName("cb_eval"),
            ADDRESS.withName("cb_eval_user_data"),
            JAVA_INT.withName("type_k"),
            JAVA_INT.withName("type_v"),
            ADDRESS.withName("abort_callback"),
            ADDRESS.withName("abort_callback_data"),
            JAVA_BOOLEAN.withName("embeddings"),
            JAVA_BOOLEAN.withName("offload_kqv"),
            JAVA_BOOLEAN.withName("no_perf"),
            JAVA_BOOLEAN.withName("op_offload"),
            JAVA_BOOLEAN.withName("swa_full"),
            JAVA_BOOLEAN.withName("kv_unified"),
            paddingLayout(2),
            ADDRESS.withName("samplers"),
            JAVA_LONG.withName("n_samplers"),
            ADDRESS.withName("ctx_other")
    ).withName("llama_context_params");

    /** {@code struct llama_batch} (include/llama.h). */
    public static final StructLayout BATCH = MemoryLayout.structLayout(
            JAVA_INT.withName("n_tokens"),
            paddingLayout(4),
            ADDRESS.withName("token"),
            ADDRESS.withName("embd"),
            ADDRESS.withName("pos"),
            ADDRESS.withName("n_seq_id"),
            ADDRESS.withName("seq_id"),
            ADDRESS.withName("logits")
    ).withName("llama_batch");

    /** GGML_MAX_DIMS, GGML_MAX_SRC, GGML_MAX_NAME, GGML_MAX_OP_PARAMS, GGML_MAX_N_THREADS of ggml/include/ggml.h. */
    public static final int MAX_DIMS = 4, MAX_SRC = 10, MAX_NAME = 64, MAX_OP_PARAMS = 64, MAX_N_THREADS = 512;

    /** {@code struct ggml_threadpool_params} (ggml/include/ggml.h): filled by ggml_threadpool_params_init, then the poll level set. */
    public static final StructLayout THREADPOOL_PARAMS = MemoryLayout.structLayout(
            sequenceLayout(MAX_N_THREADS, JAVA_BOOLEAN).withName("cpumask"),
            JAVA_INT.withName("n_threads"),
            JAVA_INT.withName("prio"),
            JAVA_INT.withName("poll"),
            JAVA_BOOLEAN.withName("strict_cpu"),
            JAVA_BOOLEAN.withName("paused"),
            paddingLayout(2)
    ).withName("ggml_threadpool_params");

    /**
     * {@code struct llama_model_quantize_params} (include/llama.h): filled by llama_model_quantize_default_params, then
     * the thread count and the file type set; everything else (output and embedding types left to the file type,
     * requantizing refused, the output tensor quantized) stays llama.cpp's default, as its llama-quantize tool has it.
     */
    public static final StructLayout QUANTIZE_PARAMS = MemoryLayout.structLayout(
            JAVA_INT.withName("nthread"),
            JAVA_INT.withName("ftype"),
            JAVA_INT.withName("output_tensor_type"),
            JAVA_INT.withName("token_embedding_type"),
            JAVA_BOOLEAN.withName("allow_requantize"),
            JAVA_BOOLEAN.withName("quantize_output_tensor"),
            JAVA_BOOLEAN.withName("only_copy"),
            JAVA_BOOLEAN.withName("pure"),
            JAVA_BOOLEAN.withName("keep_split"),
            JAVA_BOOLEAN.withName("dry_run"),
            paddingLayout(2),
            ADDRESS.withName("imatrix"),
            ADDRESS.withName("kv_overrides"),
            ADDRESS.withName("tt_overrides"),
            ADDRESS.withName("prune_layers"),
            JAVA_LONG.withName("max_buf_size")
    ).withName("llama_model_quantize_params");

    /** {@code struct ggml_tensor} (ggml/include/ggml.h): read in the eval callback for name, type, shape and strides. */
    public static final StructLayout TENSOR = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            paddingLayout(4),
            ADDRESS.withName("buffer"),
            sequenceLayout(MAX_DIMS, JAVA_LONG).withName("ne"),
            sequenceLayout(MAX_DIMS, JAVA_LONG).withName("nb"),
            JAVA_INT.withName("op"),
            sequenceLayout(MAX_OP_PARAMS / 4, JAVA_INT).withName("op_params"),
            JAVA_INT.withName("flags"),
            sequenceLayout(MAX_SRC, ADDRESS).withName("src"),
            ADDRESS.withName("view_src"),
            JAVA_LONG.withName("view_offs"),
            ADDRESS.withName("data"),
            sequenceLayout(MAX_NAME, JAVA_BYTE).withName("name"),
            ADDRESS.withName("extra"),
            sequenceLayout(8, JAVA_BYTE).withName("padding")
    ).withName("ggml_tensor");

    /** The structs above, with the C name of each (the probe and the layout test iterate over these). */
    public static final List<StructLayout> ALL = List.of(MODEL_PARAMS, CONTEXT_PARAMS, BATCH, TENSOR, THREADPOOL_PARAMS, QUANTIZE_PARAMS);

    /**
     * The C constants the bindings pass or compare (enum values and macros, under their C names): a build whose
     * headers give any other value is refused.
     */
    public static java.util.SequencedMap<String, Long> constants() {
        var c = new java.util.LinkedHashMap<String, Long>();
        c.put("GGML_TYPE_F32", (long) GgmlTensor.F32);
        c.put("GGML_TYPE_F16", (long) GgmlTensor.F16);
        c.put("GGML_TYPE_BF16", (long) GgmlTensor.BF16);
        c.put("GGML_TYPE_Q8_0", (long) GgmlTensor.Q8_0);
        c.put("GGML_TYPE_Q4_0", (long) GgmlTensor.Q4_0);
        c.put("GGML_OP_MUL_MAT", (long) GgmlTensor.OP_MUL_MAT);
        c.put("GGML_OP_FLASH_ATTN_EXT", (long) GgmlTensor.OP_FLASH_ATTN_EXT);
        for (var m : LlamaModel.LoadMode.values()) c.put("LLAMA_LOAD_MODE_" + m.name(), (long) m.value);
        for (var fa : LlamaContext.FlashAttention.values()) c.put("LLAMA_FLASH_ATTN_TYPE_" + switch (fa) {
            case OFF -> "DISABLED";
            case ON -> "ENABLED";
            case AUTO -> "AUTO";
        }, (long) fa.value);
        for (var f : LlamaQuantizer.FileType.values()) c.put("LLAMA_FTYPE_MOSTLY_" + f.name(), (long) f.value);
        c.put("GGML_BACKEND_DEVICE_TYPE_CPU", (long) LlamaLibrary.GGML_BACKEND_DEVICE_TYPE_CPU);
        c.put("GGML_LOG_LEVEL_WARN", (long) LlamaLog.WARN);
        c.put("GGML_LOG_LEVEL_ERROR", (long) LlamaLog.ERROR);
        c.put("GGML_LOG_LEVEL_CONT", (long) LlamaLog.CONT);
        c.put("GGML_MAX_DIMS", (long) MAX_DIMS);
        c.put("GGML_MAX_SRC", (long) MAX_SRC);
        c.put("GGML_MAX_NAME", (long) MAX_NAME);
        c.put("GGML_MAX_OP_PARAMS", (long) MAX_OP_PARAMS);
        c.put("GGML_MAX_N_THREADS", (long) MAX_N_THREADS);
        return c;
    }

    public static long offset(StructLayout s, String field) {
        return s.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }
}
