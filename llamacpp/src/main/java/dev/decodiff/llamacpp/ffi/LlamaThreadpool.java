package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static dev.decodiff.llamacpp.ffi.LlamaLayouts.offset;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A ggml threadpool that lives as long as its context, as llama-bench makes one: its workers wait for the next graph
 * by polling (level {@code poll}, 0–100) before they sleep. Without one, ggml starts a pool for every graph it
 * computes, which a single-token decode step pays each time.
 */
final class LlamaThreadpool implements AutoCloseable {
    private static MethodHandle create, free;

    private MemorySegment pool;
    private final LlamaLibrary lib;

    private LlamaThreadpool(LlamaLibrary lib, MemorySegment pool) {
        this.lib = lib;
        this.pool = pool;
    }

    static LlamaThreadpool start(LlamaLibrary lib, int threads, int poll) {
        synchronized (LlamaThreadpool.class) {
            if (create == null) {
                create = lib.cpuBackendFunction("ggml_threadpool_new", FunctionDescriptor.of(ADDRESS, ADDRESS));
                free = lib.cpuBackendFunction("ggml_threadpool_free", FunctionDescriptor.ofVoid(ADDRESS));
            }
        }
        try (var a = Arena.ofConfined()) {
            var layout = lib.layouts().threadpoolParams();
            var params = a.allocate(layout);
            lib.threadpoolParamsInit.invokeExact(params, threads);
            params.set(JAVA_INT, offset(layout, "poll"), poll);
            var pool = (MemorySegment) create.invokeExact(params);
            if (pool.equals(MemorySegment.NULL)) throw new LlamaCppException("ggml_threadpool_new refused " + threads + " threads");
            return new LlamaThreadpool(lib, pool);
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("ggml_threadpool_new failed: " + t, t);
        }
    }

    /** Makes this pool compute every graph of {@code ctx} (single-token and batch alike). */
    void attachTo(MemorySegment ctx) {
        try {
            lib.attachThreadpool.invokeExact(ctx, pool, pool);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_attach_threadpool failed: " + t, t);
        }
    }

    /** Frees the workers; the context it served must be freed first. */
    @Override
    public void close() {
        if (pool == null) return;
        try {
            free.invokeExact(pool);
        } catch (Throwable t) {
            throw new LlamaCppException("ggml_threadpool_free failed: " + t, t);
        } finally {
            pool = null;
        }
    }
}
