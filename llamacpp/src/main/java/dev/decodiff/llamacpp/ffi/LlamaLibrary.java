package dev.decodiff.llamacpp.ffi;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BOOLEAN;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The loaded llama.cpp: its C functions as method handles, its log routed into a {@link LlamaLog}, the struct
 * layouts of this build (from its own headers, {@link LayoutProbe}), and the CPU backend: the one ggml picked for this
 * machine from a prebuilt package's variants, or the one a native build linked in. Loaded once per JVM (a native
 * library cannot be unloaded).
 */
public final class LlamaLibrary {
    private static LlamaLibrary instance;

    private final LlamaCppHome home;
    private final LlamaLog log = new LlamaLog();
    private final String backend;
    private final LlamaLayouts layouts;

    final MethodHandle modelDefaultParams, contextDefaultParams, modelLoad, modelFree, initFromModel, free, decode,
            logitsIth, tensorSet, getMemory, memoryClear, memorySeqRm, modelGetVocab, vocabNTokens, modelNEmbd, modelNLayer,
            modelMetaValStr, tensorGet, devCount, devGet, devDescription, systemInfo, devByType, devBackendReg, regProcAddress,
            threadpoolParamsInit, attachThreadpool, quantizeDefaultParams, modelQuantize, memorySeqCp, memorySeqAdd, memorySeqPosMin,
            memorySeqPosMax, memoryCanShift, stateSeqGetSize, stateSeqGetData, stateSeqSetData;

    private LlamaLibrary(LlamaCppHome home) {
        this.home = home;
        this.layouts = LayoutProbe.of(home);
        this.tensorFields = GgmlTensor.Fields.of(layouts.tensor());
        var linker = Linker.nativeLinker();
        var arena = Arena.global();
        SymbolLookup lookup;
        try {
            lookup = SymbolLookup.libraryLookup(home.libggmlBase(), arena)
                    .or(SymbolLookup.libraryLookup(home.libggml(), arena))
                    .or(SymbolLookup.libraryLookup(home.libllama(), arena));
        } catch (IllegalArgumentException e) {
            throw new LlamaCppException("cannot load llama.cpp from " + home.lib() + ": " + e.getMessage()
                    + (home.kind() == LlamaCppHome.Kind.PREBUILT ? "; run scripts/llamacpp.sh again to restore it"
                    : "; build that folder again (scripts/llamacpp-native.sh, or cmake --build for your own build)"), e);
        }
        var h = new Handles(linker, lookup);
        modelDefaultParams = h.get("llama_model_default_params", FunctionDescriptor.of(layouts.modelParams()));
        contextDefaultParams = h.get("llama_context_default_params", FunctionDescriptor.of(layouts.contextParams()));
        modelLoad = h.get("llama_model_load_from_file", FunctionDescriptor.of(ADDRESS, ADDRESS, layouts.modelParams()));
        modelFree = h.get("llama_model_free", FunctionDescriptor.ofVoid(ADDRESS));
        initFromModel = h.get("llama_init_from_model", FunctionDescriptor.of(ADDRESS, ADDRESS, layouts.contextParams()));
        free = h.get("llama_free", FunctionDescriptor.ofVoid(ADDRESS));
        decode = h.get("llama_decode", FunctionDescriptor.of(JAVA_INT, ADDRESS, layouts.batch()));
        logitsIth = h.get("llama_get_logits_ith", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        getMemory = h.get("llama_get_memory", FunctionDescriptor.of(ADDRESS, ADDRESS));
        memoryClear = h.get("llama_memory_clear", FunctionDescriptor.ofVoid(ADDRESS, JAVA_BOOLEAN));
        memorySeqRm = h.get("llama_memory_seq_rm", FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT));
        memorySeqCp = h.get("llama_memory_seq_cp", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
        memorySeqAdd = h.get("llama_memory_seq_add", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
        memorySeqPosMin = h.get("llama_memory_seq_pos_min", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        memorySeqPosMax = h.get("llama_memory_seq_pos_max", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
        memoryCanShift = h.get("llama_memory_can_shift", FunctionDescriptor.of(JAVA_BOOLEAN, ADDRESS));
        stateSeqGetSize = h.get("llama_state_seq_get_size", FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_INT));
        stateSeqGetData = h.get("llama_state_seq_get_data", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        stateSeqSetData = h.get("llama_state_seq_set_data", FunctionDescriptor.of(JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        modelGetVocab = h.get("llama_model_get_vocab", FunctionDescriptor.of(ADDRESS, ADDRESS));
        vocabNTokens = h.get("llama_vocab_n_tokens", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        modelNEmbd = h.get("llama_model_n_embd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        modelNLayer = h.get("llama_model_n_layer", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        modelMetaValStr = h.get("llama_model_meta_val_str", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_LONG));
        tensorGet = h.get("ggml_backend_tensor_get", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG));
        tensorSet = h.get("ggml_backend_tensor_set", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG));
        devCount = h.get("ggml_backend_dev_count", FunctionDescriptor.of(JAVA_LONG));
        devGet = h.get("ggml_backend_dev_get", FunctionDescriptor.of(ADDRESS, JAVA_LONG));
        devDescription = h.get("ggml_backend_dev_description", FunctionDescriptor.of(ADDRESS, ADDRESS));
        systemInfo = h.get("llama_print_system_info", FunctionDescriptor.of(ADDRESS));
        devByType = h.get("ggml_backend_dev_by_type", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        devBackendReg = h.get("ggml_backend_dev_backend_reg", FunctionDescriptor.of(ADDRESS, ADDRESS));
        regProcAddress = h.get("ggml_backend_reg_get_proc_address", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
        threadpoolParamsInit = h.get("ggml_threadpool_params_init", FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT));
        attachThreadpool = h.get("llama_attach_threadpool", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, ADDRESS));
        quantizeDefaultParams = h.get("llama_model_quantize_default_params", FunctionDescriptor.of(layouts.quantizeParams()));
        modelQuantize = h.get("llama_model_quantize", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        var logSet = h.get("llama_log_set", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS));
        var loadAll = h.get("ggml_backend_load_all_from_path", FunctionDescriptor.ofVoid(ADDRESS));
        var backendInit = h.get("llama_backend_init", FunctionDescriptor.ofVoid());
        if (!h.missing.isEmpty())
            throw new LlamaCppException("llama.cpp's API differs from what decodiff's bindings support (" + LlamaCppHome.RELEASE + "): "
                    + home.lib() + " lacks " + String.join(", ", h.missing) + "; use a build of llama.cpp " + LlamaCppHome.RELEASE
                    + " (scripts/llamacpp-native.sh builds one; scripts/llamacpp.sh fetches the prebuilt)");
        try {
            var target = MethodHandles.lookup().bind(log, "acceptNative",
                    MethodType.methodType(void.class, int.class, MemorySegment.class, MemorySegment.class));
            var stub = linker.upcallStub(target, FunctionDescriptor.ofVoid(JAVA_INT, ADDRESS, ADDRESS), arena);
            logSet.invokeExact(stub, MemorySegment.NULL);
            log.mark();
            // A build with its CPU backend linked in has registered it already; a prebuilt package loads one of its
            // libggml-cpu-*.so variants from the folder.
            boolean linkedIn = (long) devCount.invokeExact() > 0;
            if (!linkedIn) {
                try (var a = Arena.ofConfined()) {
                    loadAll.invokeExact(a.allocateFrom(home.lib().toString()));
                }
            }
            backendInit.invokeExact();
            long devices = (long) devCount.invokeExact();
            if (devices == 0) {
                String why = log.errorsSinceMark();
                throw new LlamaCppException("no CPU backend in " + home.lib() + " runs on this CPU (" + cpuName()
                        + "): none of its libggml-cpu-*.so variants matched" + (why.isEmpty() ? "" : " (" + why + ")")
                        + "; llama.cpp needs a build for this micro-architecture: scripts/llamacpp-native.sh builds one from the pinned source"
                        + " (GGML_NATIVE=ON); point $" + LlamaCppHome.ENV + " (or -D" + LlamaCppHome.PROPERTY + ") at the folder it prints");
            }
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("cannot start llama.cpp from " + home.lib() + ": " + t, t);
        }
        this.backend = backendName(log, home);
    }

    private static String backendName(LlamaLog log, LlamaCppHome home) {
        String loaded = log.find("loaded CPU backend from");
        if (loaded != null) return loaded.replaceFirst(".*loaded CPU backend from\\s*", "").replaceFirst(".*/", "");
        return java.nio.file.Files.exists(home.lib().resolve("libggml-cpu.so")) ? "built-in libggml-cpu.so" : "built-in CPU backend";
    }

    private final GgmlTensor.Fields tensorFields;

    GgmlTensor.Fields tensorFields() { return tensorFields; }

    /** The struct layouts of this build, from its own headers. */
    public LlamaLayouts layouts() { return layouts; }

    /** The one loaded llama.cpp of this JVM, loaded on first use from {@link LlamaCppHome#locate()}. */
    public static synchronized LlamaLibrary get() {
        if (instance == null) instance = new LlamaLibrary(LlamaCppHome.locate());
        return instance;
    }

    public LlamaCppHome home() { return home; }

    public LlamaLog log() { return log; }

    /** The CPU backend variant ggml picked for this machine (e.g. "libggml-cpu-zen4.so"). */
    public String backend() { return backend; }

    /**
     * A function the CPU backend exports only through its registry (the backend is a library loaded at run time, so
     * its symbols are not in the lookup): {@code ggml_backend_reg_get_proc_address} on the CPU device's registry.
     */
    MethodHandle cpuBackendFunction(String name, FunctionDescriptor fd) {
        try (var a = Arena.ofConfined()) {
            var dev = (MemorySegment) devByType.invokeExact(GGML_BACKEND_DEVICE_TYPE_CPU);
            if (dev.equals(MemorySegment.NULL)) throw new LlamaCppException("llama.cpp has no CPU device (backend " + backend + ")");
            var reg = (MemorySegment) devBackendReg.invokeExact(dev);
            var fn = (MemorySegment) regProcAddress.invokeExact(reg, a.allocateFrom(name));
            if (fn.equals(MemorySegment.NULL))
                throw new LlamaCppException("llama.cpp's CPU backend " + backend + " does not export " + name + ", which the bindings call; use a build of llama.cpp "
                        + LlamaCppHome.RELEASE + " (scripts/llamacpp-native.sh builds one)");
            return Linker.nativeLinker().downcallHandle(fn, fd);
        } catch (LlamaCppException e) {
            throw e;
        } catch (Throwable t) {
            throw new LlamaCppException("looking up " + name + " in llama.cpp's CPU backend failed: " + t, t);
        }
    }

    /** {@code GGML_BACKEND_DEVICE_TYPE_CPU} of enum ggml_backend_dev_type (ggml-backend.h). */
    static final int GGML_BACKEND_DEVICE_TYPE_CPU = 0;

    /** llama.cpp's own summary of the CPU features it uses. */
    public String systemInfo() {
        try {
            return ((MemorySegment) systemInfo.invokeExact()).reinterpret(Long.MAX_VALUE).getString(0);
        } catch (Throwable t) {
            throw new LlamaCppException("llama_print_system_info failed: " + t, t);
        }
    }

    private static String cpuName() {
        try (var lines = java.nio.file.Files.lines(java.nio.file.Path.of("/proc/cpuinfo"))) {
            return lines.filter(l -> l.startsWith("model name")).map(l -> l.replaceFirst("^[^:]*:\\s*", "")).findFirst().orElse("unknown CPU");
        } catch (Exception e) {
            return "unknown CPU";
        }
    }

    /** Looks symbols up, collecting the missing ones so that one error can list them all. */
    private static final class Handles {
        final Linker linker;
        final SymbolLookup lookup;
        final List<String> missing = new ArrayList<>();

        Handles(Linker linker, SymbolLookup lookup) {
            this.linker = linker;
            this.lookup = lookup;
        }

        MethodHandle get(String name, FunctionDescriptor fd) {
            var sym = lookup.find(name);
            if (sym.isEmpty()) {
                missing.add(name);
                return null;
            }
            return linker.downcallHandle(sym.get(), fd);
        }
    }
}
