package dev.decodiff.harness.cli;

import dev.decodiff.harness.BadInputException;
import dev.decodiff.harness.dump.DumpManifest;
import dev.decodiff.harness.llamacpp.GgufCache;
import dev.decodiff.llamacpp.ffi.LlamaContext;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.Locale;

/** The engine choice of compare and dump (picocli mixin): decodiff's own engine, or llama.cpp on a GGUF. */
public final class LlamaCppFlags {
    static final String LLAMA_CPP = "llama.cpp", DECODIFF = "decodiff";

    @Option(names = "--engine", paramLabel = "ENGINE", defaultValue = DECODIFF,
            description = "The engine run live: decodiff (the Java engine, default) or llama.cpp (its C API through FFM; set up once by scripts/llamacpp.sh, which the launcher runs).")
    String engine;

    @Option(names = "--gguf", paramLabel = "FILE",
            description = "--engine llama.cpp: the GGUF to run (default: the checkpoint converted with decodiff gguf, cached under ~/.cache/decodiff/gguf; "
                    + "for a reference of a GGUF's weights, that GGUF itself, found by its hash).")
    Path gguf;

    @Option(names = "--gguf-type", paramLabel = "TYPE",
            description = "--engine llama.cpp without --gguf: weight type of the conversion, f32 (default, exact), bf16 or f16.")
    String ggufType;

    @Option(names = "--threads", paramLabel = "N",
            description = "--engine llama.cpp: threads (default 1; llama.cpp's results do not depend on it).")
    Integer threads;

    @Option(names = "--flash-attn", description = "--engine llama.cpp: flash attention on (default off: exact fp32 attention).")
    boolean flashAttn;

    boolean isLlamaCpp() {
        if (engine.equalsIgnoreCase(LLAMA_CPP) || engine.equalsIgnoreCase("llamacpp")) return true;
        if (!engine.equalsIgnoreCase(DECODIFF)) throw new BadInputException("--engine must be decodiff or llama.cpp, got '" + engine + "'");
        if (gguf != null || ggufType != null || threads != null || flashAttn)
            throw new BadInputException("--gguf, --gguf-type, --threads and --flash-attn apply to --engine llama.cpp; add it, or drop them");
        return false;
    }

    /** The context options: KV types from --kv-cache (llama.cpp also takes f16), room for every token of the run. */
    LlamaContext.Options options(EngineFlags flags, int tokens) {
        if (!flags.faults.isEmpty())
            throw new BadInputException("--fault switches on bugs of decodiff's own engine; it does not apply to --engine llama.cpp");
        if (flags.matmul != null)
            throw new BadInputException("--matmul sets decodiff's own engine's products; with --engine llama.cpp the GGUF's weight type decides (--gguf-type)");
        if (flags.matmul != null)
            throw new BadInputException("--matmul sets how decodiff's own engine multiplies; it does not apply to --engine llama.cpp (its GGUF's weight type decides)");
        String k = "f32", v = "f32";
        if (flags.kvCache != null) {
            var parts = flags.kvCache.split(",", -1);
            if (parts.length > 2) throw new BadInputException("--kv-cache takes one type or K,V, got '" + flags.kvCache + "'");
            k = parts[0].strip().toLowerCase(Locale.ROOT);
            v = parts.length == 2 ? parts[1].strip().toLowerCase(Locale.ROOT) : k;
        }
        int n = threads == null ? 1 : threads;
        if (n < 1) throw new BadInputException("--threads must be ≥ 1, got " + n);
        int ctx = LlamaContext.Options.lengthFor(tokens);
        try {
            return new LlamaContext.Options(ctx, n, k, v, flashAttn);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("--kv-cache: " + e.getMessage());
        }
    }

    /** The GGUF a checkpoint folder was made from, when {@link #resolveGguf} ran that file itself. */
    private Path fromSource;

    /**
     * The GGUF to run: --gguf as given (checked against the checkpoint's config.json unless {@code allowMismatch});
     * for a folder decodiff made of a GGUF (`--model FILE.gguf`, or a GGUF's reference) without --gguf-type, that
     * GGUF itself (llama.cpp runs the quantized blocks the reference dequantized), found by its hash; else
     * {@code checkpoint} converted (cached).
     */
    Path resolveGguf(Path checkpoint, boolean allowMismatch) {
        if (gguf != null) {
            if (ggufType != null) throw new BadInputException("--gguf-type applies to the on-the-fly conversion; drop it with --gguf");
            try {
                var diff = dev.decodiff.llamacpp.GgufMatch.differences(gguf, checkpoint);
                if (!diff.isEmpty() && !allowMismatch)
                    throw new BadInputException(gguf, "is not a GGUF of " + checkpoint + " (" + String.join(", ", diff)
                            + "); pass the GGUF of the reference's checkpoint (decodiff gguf --model " + checkpoint + " --out FILE), or --allow-mismatch");
            } catch (dev.decodiff.llamacpp.ffi.LlamaCppException e) {
                throw new BadInputException(e.getMessage(), e);
            }
            return gguf;
        }
        if (ggufType == null && dev.decodiff.harness.llamacpp.GgufCheckpointCache.sourceSha256(checkpoint) != null) {
            fromSource = dev.decodiff.harness.llamacpp.GgufCheckpointCache.sourceOf(checkpoint,
                    dev.decodiff.harness.live.ModelLocator.bundledGgufs(dev.decodiff.harness.Home.get()));
            if (fromSource == null)
                throw new BadInputException(checkpoint, "was made from a GGUF (sha256 " + dev.decodiff.harness.llamacpp.GgufCheckpointCache.sourceSha256(checkpoint).substring(0, 12)
                        + "…) that is no longer where it was; pass --gguf FILE (that GGUF), or --gguf-type f32 to run its dequantized weights");
            return fromSource;
        }
        GgufOutputType t;
        try {
            t = GgufOutputType.parse(ggufType == null ? "f32" : ggufType);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("--gguf-type: " + e.getMessage());
        }
        return GgufCache.of(checkpoint, t);
    }

    /** The source of the GGUF for report headers. */
    String describeSource(Path file, Path checkpoint) {
        if (gguf != null) return file.toString();
        if (fromSource != null && fromSource.equals(file)) return file + " (the GGUF " + checkpoint.getFileName() + " was made from)";
        return checkpoint + " converted to GGUF " + (ggufType == null ? "f32" : ggufType.toLowerCase(Locale.ROOT));
    }

    /** The dump producer entry of a llama.cpp dump. */
    static DumpManifest.Producer producer(String fileType, LlamaContext.Options o, java.util.List<String> commandOptions) {
        var lib = dev.decodiff.llamacpp.ffi.LlamaLibrary.get();
        return new DumpManifest.Producer(LLAMA_CPP, dev.decodiff.llamacpp.ffi.LlamaCppHome.RELEASE + " ("
                + dev.decodiff.llamacpp.LlamaCppRunner.buildLabel() + ")", fileType, o.flashAttention() == LlamaContext.FlashAttention.ON ? "flash" : "eager",
                "llama.cpp, " + o.threads() + " thread" + (o.threads() == 1 ? "" : "s"), lib.backend(), null,
                new DumpManifest.KvCache(o.typeK(), o.typeV()), null, commandOptions);
    }
}
