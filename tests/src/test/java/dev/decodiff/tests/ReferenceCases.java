package dev.decodiff.tests;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

/** The committed reference dumps (made by transformers) and the repository paths tests need. */
final class ReferenceCases {
    private ReferenceCases() {}

    static Path repoRoot() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.isDirectory(p.resolve("reference-dumps"))) p = p.getParent();
        if (p == null) throw new IllegalStateException("cannot find the repository root (a folder with reference-dumps/) above " + Path.of("").toAbsolutePath());
        return p;
    }

    /** Every Gemma 4 case folder reference-dumps/CHECKPOINT/CASE with a manifest, fp32 references only. */
    static List<Path> fp32Cases() { return fp32Cases("gemma4_text"); }

    /** Every Qwen3.5 case (dense and MoE), fp32. */
    static List<Path> qwen35Cases() {
        var out = new java.util.ArrayList<>(fp32Cases("qwen3_5_text"));
        out.addAll(fp32Cases("qwen3_5_moe_text"));
        return out;
    }

    /** Every Llama-family case (llama, qwen3), fp32. */
    static List<Path> llamaCases() {
        var out = new java.util.ArrayList<>(fp32Cases("llama"));
        out.addAll(fp32Cases("qwen3"));
        return out;
    }

    /** Every case of the given text model_type, fp32 references only. */
    static List<Path> fp32Cases(String modelType) {
        try (Stream<Path> s = Files.walk(repoRoot().resolve("reference-dumps"), 2)) {
            var cases = s.filter(p -> Files.isRegularFile(p.resolve("manifest.json")))
                    .filter(p -> !p.getFileName().toString().contains("bf16"))
                    .filter(p -> modelType.equals(modelTypeOf(p)))
                    .sorted().toList();
            if (cases.isEmpty()) throw new IllegalStateException("no reference dumps under reference-dumps/");
            return cases;
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String modelTypeOf(Path caseDir) {
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().readTree(caseDir.resolve("manifest.json").toFile()).path("model").path("model_type").asText();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Suffix of the references of the bundled GGUFs: reference-dumps/CK-q4_k_m are of checkpoints/gguf/CK-Q4_K_M.gguf. */
    static final String GGUF_SUFFIX = "-q4_k_m";

    /**
     * The checkpoint folder a bundled reference was made from: checkpoints/NAME, or for a GGUF's reference the folder
     * decodiff makes of checkpoints/gguf/CK-Q4_K_M.gguf.
     */
    static Path checkpointOf(Path caseDir) {
        String name = caseDir.getParent().getFileName().toString();
        if (name.endsWith(GGUF_SUFFIX))
            return dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(ggufOf(caseDir));
        return repoRoot().resolve("checkpoints").resolve(name);
    }

    /** The bundled GGUF of a GGUF's reference. */
    static Path ggufOf(Path caseDir) {
        String name = caseDir.getParent().getFileName().toString();
        return repoRoot().resolve("checkpoints/gguf").resolve(name.substring(0, name.length() - GGUF_SUFFIX.length()) + "-Q4_K_M.gguf");
    }
}
