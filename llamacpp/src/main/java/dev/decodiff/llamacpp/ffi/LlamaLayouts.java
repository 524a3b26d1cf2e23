package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;

import static java.lang.foreign.MemoryLayout.paddingLayout;
import static java.lang.foreign.MemoryLayout.sequenceLayout;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The C structs decodiff passes to or reads from llama.cpp, written by hand from the headers of the pinned release
 * (llama.cpp v0.5.0 as shipped by node-llama-cpp 3.22.1) for x86-64 Linux. Enums are C ints, bools one byte; the
 * padding is what the System V ABI inserts. LayoutTest compiles a C program against the same headers and checks every
 * size and field offset here against the compiler's; a new release must pass it before its library is used.
 */
public final class LlamaLayouts {
    private LlamaLayouts() {}

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

    /** The structs above, with the C name of each (the layout test iterates over these). */
    public static final java.util.List<StructLayout> ALL = java.util.List.of(MODEL_PARAMS, CONTEXT_PARAMS, BATCH, TENSOR, THREADPOOL_PARAMS);

    public static long offset(StructLayout s, String field) {
        return s.byteOffset(MemoryLayout.PathElement.groupElement(field));
    }
}
