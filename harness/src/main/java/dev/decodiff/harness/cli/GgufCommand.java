package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import dev.decodiff.llamacpp.ffi.LlamaQuantizer;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufFile;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.llamacpp.gguf.HfToGguf;
import dev.decodiff.llamacpp.gguf.KvSharing;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;

@Command(name = "gguf", mixinStandardHelpOptions = true,
        description = {"Converts a Hugging Face Gemma 4, Qwen3.5 or Llama-family (llama, mistral, qwen3) checkpoint into a GGUF file for llama.cpp.",
                "It holds what llama.cpp's own converter writes. f32 (the default) copies",
                "the weights exactly; norms, 1-D tensors and the MoE router stay F32 at every",
                "--type. Without tokenizer.json the file has no vocabulary: llama.cpp then",
                "takes token ids, which is all a comparison needs. See docs/engines/llama.cpp.md."})
final class GgufCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, paramLabel = "HFDIR", description = "Checkpoint folder (config.json + *.safetensors).")
    Path model;

    @Option(names = "--out", required = true, paramLabel = "FILE", description = "The .gguf file to write (not replaced unless --force).")
    Path out;

    @Option(names = "--type", paramLabel = "TYPE", defaultValue = "f32",
            description = "Type of the weight matrices: f32 (default, exact), bf16, f16, q8_0 or q4_0 (ggml's reference quantizers; rows that are no whole number of 32-value blocks stay f16), "
                    + "or q4_k_m / q4_k_s: llama.cpp's own quantizer (llama_model_quantize, as its llama-quantize tool) on the f32 file, with its per-tensor "
                    + "choices (Q6_K for some matrices; Q5_0, Q5_1 or Q8_0 where a row holds no whole 256-value super-block); needs the llama.cpp library.")
    String type;

    @Option(names = "--force", description = "Replace --out if it exists.")
    boolean force;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        GgufOutputType t;
        LlamaQuantizer.FileType kQuant = null;
        try {
            kQuant = java.util.Arrays.stream(LlamaQuantizer.FileType.values()).filter(f -> f.name().equalsIgnoreCase(type)).findFirst().orElse(null);
            t = kQuant != null ? GgufOutputType.F32 : GgufOutputType.parse(type);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        OutputPaths.refuseOverlap("--out", out, OutputPaths.withBundledData(model));
        long start = System.nanoTime();
        var plan = kQuant == null ? HfToGguf.convert(model, out, t, force) : quantizedByLlamaCpp(kQuant);
        var o = spec.commandLine().getOut();
        var byType = new java.util.TreeMap<GgmlType, Long>();
        if (kQuant == null) plan.tensors().forEach(p -> byType.merge(p.type(), 1L, Long::sum));
        else GgufFile.read(out).tensors().forEach(p -> byType.merge(p.type(), 1L, Long::sum));
        var types = new java.util.StringJoiner(", ");
        byType.forEach((k, v) -> types.add(v + " " + k));
        boolean vocab = !plan.metadata().get("tokenizer.ggml.model").asString().equals("none");
        o.printf(Locale.ROOT, "wrote %s: %s, %d tensors (%s), %d metadata keys, %s, %.1fs%n", out, plan.architecture(),
                plan.tensors().size(), types, plan.metadata().size(),
                vocab ? "vocabulary from tokenizer.json" : "no vocabulary (token ids only)", (System.nanoTime() - start) / 1e9);
        var mismatches = KvSharing.llamaCppMismatches(plan.metadata());
        if (!mismatches.isEmpty()) {
            var err = spec.commandLine().getErr();
            err.println("decodiff: warning: llama.cpp " + dev.decodiff.llamacpp.ffi.LlamaCppHome.RELEASE + " pairs KV-shared layers with their sources by position, not by type: "
                    + String.join("; ", mismatches.stream().map(Object::toString).toList()) + ".");
            err.flush();
        }
        o.flush();
        return Main.MATCH;
    }

    /** The f32 conversion in a temporary file beside --out, then llama.cpp's quantizer into --out (moved there whole). */
    private dev.decodiff.llamacpp.gguf.GgufPlan quantizedByLlamaCpp(LlamaQuantizer.FileType kQuant) {
        if (!force && java.nio.file.Files.exists(out)) throw new dev.decodiff.llamacpp.gguf.GgufException(out, "already exists; pass --force to replace it");
        Path dir = out.toAbsolutePath().getParent();
        Path f32 = null, quantized = null;
        try {
            f32 = java.nio.file.Files.createTempFile(dir, out.getFileName().toString(), ".f32.partial");
            quantized = java.nio.file.Files.createTempFile(dir, out.getFileName().toString(), ".partial");
            var plan = HfToGguf.convert(model, f32, GgufOutputType.F32, true);
            LlamaQuantizer.quantize(f32, quantized, kQuant, Runtime.getRuntime().availableProcessors());
            java.nio.file.Files.move(quantized, out, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            return plan;
        } catch (java.io.IOException e) {
            throw new dev.decodiff.llamacpp.gguf.GgufException(out, "cannot write beside it (" + e.getMessage() + "); choose a writable --out");
        } finally {
            try {
                if (f32 != null) java.nio.file.Files.deleteIfExists(f32);
                if (quantized != null) java.nio.file.Files.deleteIfExists(quantized);
            } catch (java.io.IOException ignored) {
                // a leftover .partial beside --out is harmless
            }
        }
    }
}
