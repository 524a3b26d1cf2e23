package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.file.Path;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * llama.cpp's own quantizer ({@code llama_model_quantize}, what its llama-quantize tool calls): a GGUF of F32 weights
 * into one of its K-quant file types, with llama.cpp's per-tensor choices (which matrices get the larger type, the
 * fallback to a 32-value type where a row holds no whole 256-value super-block) and its rounding. Through the loaded
 * library rather than our own code because the file is only what users run if llama.cpp wrote it.
 */
public final class LlamaQuantizer {
    private LlamaQuantizer() {}

    /** The file types of enum llama_ftype that decodiff asks for (include/llama.h). */
    public enum FileType {
        Q4_K_S(14), Q4_K_M(15);

        final int value;

        FileType(int value) { this.value = value; }
    }

    /** Quantizes {@code in} (a GGUF llama.cpp loads) into {@code out} with {@code threads} threads. */
    public static void quantize(Path in, Path out, FileType type, int threads) {
        var lib = LlamaLibrary.get();
        var layout = lib.layouts().quantizeParams();
        try (var a = Arena.ofConfined()) {
            var params = (MemorySegment) lib.quantizeDefaultParams.invokeExact((SegmentAllocator) a);
            params.set(JAVA_INT, offset(layout, "nthread"), threads);
            params.set(JAVA_INT, offset(layout, "ftype"), type.value);
            lib.log().mark();
            int rc = (int) lib.modelQuantize.invokeExact(a.allocateFrom(in.toString()), a.allocateFrom(out.toString()), params);
            if (rc != 0) {
                String why = lib.log().errorsSinceMark();
                throw new LlamaCppException("llama.cpp could not quantize " + in + " to " + type + (why.isEmpty() ? "" : ": " + why)
                        + "; check that llama.cpp " + LlamaCppHome.RELEASE + " loads the file (decodiff compare --engine llama.cpp --gguf FILE)");
            }
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("llama_model_quantize failed: " + t, t);
        }
    }
}
