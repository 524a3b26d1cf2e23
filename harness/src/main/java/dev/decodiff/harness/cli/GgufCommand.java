package dev.decodiff.harness.cli;

import dev.decodiff.harness.OutputPaths;
import dev.decodiff.llamacpp.gguf.GgmlType;
import dev.decodiff.llamacpp.gguf.GgufOutputType;
import dev.decodiff.llamacpp.gguf.HfToGguf;
import dev.decodiff.llamacpp.gguf.KvSharing;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;

@Command(name = "gguf", mixinStandardHelpOptions = true,
        description = {"Converts a Hugging Face Gemma 4 checkpoint into a GGUF file for llama.cpp.",
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
            description = "Type of the weight matrices: f32 (default, exact), bf16, f16, q8_0 or q4_0 (ggml's reference quantizers; rows that are no whole number of 32-value blocks stay f16).")
    String type;

    @Option(names = "--force", description = "Replace --out if it exists.")
    boolean force;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        GgufOutputType t;
        try {
            t = GgufOutputType.parse(type);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        OutputPaths.refuseOverlap("--out", out, OutputPaths.withBundledData(model));
        long start = System.nanoTime();
        var plan = HfToGguf.convert(model, out, t, force);
        var o = spec.commandLine().getOut();
        var byType = new java.util.TreeMap<GgmlType, Long>();
        plan.tensors().forEach(p -> byType.merge(p.type(), 1L, Long::sum));
        var types = new java.util.StringJoiner(", ");
        byType.forEach((k, v) -> types.add(v + " " + k));
        boolean vocab = !plan.metadata().get("tokenizer.ggml.model").asString().equals("none");
        o.printf(Locale.ROOT, "wrote %s: gemma4, %d tensors (%s), %d metadata keys, %s, %.1fs%n", out,
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
}
