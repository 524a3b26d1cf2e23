package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;

/** A model llama.cpp loaded from a GGUF file, on the CPU; close to free it. */
public final class LlamaModel implements AutoCloseable {
    private final LlamaLibrary lib;
    private final Path file;
    private final GgufPreflight.Header header;
    private MemorySegment model;

    private LlamaModel(LlamaLibrary lib, Path file, GgufPreflight.Header header, MemorySegment model) {
        this.lib = lib;
        this.file = file;
        this.header = header;
        this.model = model;
    }

    /**
     * How llama.cpp holds the weights ({@code enum llama_load_mode}): its default AUTO maps the file on a CPU; NONE
     * reads it into its own buffers.
     */
    public enum LoadMode {
        AUTO(-1), NONE(0), MMAP(1);

        public final int value;

        LoadMode(int value) { this.value = value; }
    }

    /** Loads the weights (or, with {@code vocabOnly}, only the vocabulary) after checking the file is a GGUF. */
    public static LlamaModel load(LlamaLibrary lib, Path file, boolean vocabOnly) { return load(lib, file, vocabOnly, LoadMode.AUTO); }

    /** {@link #load(LlamaLibrary, Path, boolean)} with the weights held as {@code mode} says. */
    public static LlamaModel load(LlamaLibrary lib, Path file, boolean vocabOnly, LoadMode mode) {
        var header = GgufPreflight.check(file);
        try (var arena = Arena.ofConfined()) {
            var params = (MemorySegment) lib.modelDefaultParams.invokeExact((java.lang.foreign.SegmentAllocator) arena);
            var mp = lib.layouts().modelParams();
            params.set(ValueLayout.JAVA_INT, offset(mp, "n_gpu_layers"), 0);
            params.set(ValueLayout.JAVA_BOOLEAN, offset(mp, "vocab_only"), vocabOnly);
            params.set(ValueLayout.JAVA_INT, offset(mp, "load_mode"), mode.value);
            lib.log().mark();
            var m = (MemorySegment) lib.modelLoad.invokeExact(arena.allocateFrom(file.toString()), params);
            if (m.equals(MemorySegment.NULL)) {
                String why = lib.log().errorsSinceMark();
                throw new LlamaCppException("llama.cpp " + LlamaCppHome.RELEASE + " refused " + file + " (architecture '" + header.architecture() + "')"
                        + (why.isEmpty() ? "" : ": " + why) + "; convert the checkpoint again with decodiff gguf, or pass a GGUF this release reads");
            }
            return new LlamaModel(lib, file, header, m);
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_load_from_file failed on " + file + ": " + t, t);
        }
    }

    public Path file() { return file; }

    public String architecture() { return header.architecture(); }

    MemorySegment pointer() {
        if (model == null) throw new IllegalStateException("model " + file + " is closed");
        return model;
    }

    LlamaLibrary library() { return lib; }

    public int vocabSize() {
        try {
            var vocab = (MemorySegment) lib.modelGetVocab.invokeExact(pointer());
            return (int) lib.vocabNTokens.invokeExact(vocab);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_vocab_n_tokens failed: " + t, t);
        }
    }

    public int hiddenSize() {
        try {
            return (int) lib.modelNEmbd.invokeExact(pointer());
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_n_embd failed: " + t, t);
        }
    }

    public int layerCount() {
        try {
            return (int) lib.modelNLayer.invokeExact(pointer());
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_n_layer failed: " + t, t);
        }
    }

    /** A metadata value as llama.cpp reports it (e.g. "gemma4.block_count"), or null when absent. */
    public String meta(String key) {
        try (var arena = Arena.ofConfined()) {
            var buf = arena.allocate(4096);
            int n = (int) lib.modelMetaValStr.invokeExact(pointer(), arena.allocateFrom(key), buf, 4096L);
            return n < 0 ? null : buf.getString(0);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_meta_val_str failed: " + t, t);
        }
    }

    /** The weights' precision as a dump's producer dtype, from general.file_type (llama_ftype): float32, float16, bfloat16. */
    public String weightDtype() {
        String ft = meta("general.file_type");
        if (ft == null) return "unknown";
        return switch (ft.strip()) {
            case "0" -> "float32";
            case "1" -> "float16";
            case "32" -> "bfloat16";
            default -> "llama_ftype " + ft.strip();
        };
    }

    @Override
    public void close() {
        if (model == null) return;
        try {
            lib.modelFree.invokeExact(model);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_free failed: " + t, t);
        } finally {
            model = null;
        }
    }
}
