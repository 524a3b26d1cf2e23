package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Path;
import java.util.ArrayList;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * llama.cpp (the library itself) on a quantized GGUF against decodiff's reference of the same weights: what is left
 * is llama.cpp's own arithmetic, and attribution must name it with no cell unexplained. ggml quantizes each matmul's
 * input to its weights' vec-dot type — q8_K blocks of 256 for the K-quants (ffn_down, the full layers' attn_output),
 * q8_0 blocks of 32 for the Q5_0 / Q8_0 matrices the quantizer falls back to on 128-wide rows — and GELU goes through
 * its fp16 table. A hypothesis that quantized every input to q8_0 leaves the K-quant matrices' cells unexplained.
 */
class LlamaCppQuantizedTest {
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void setUp() {
        root = LlamaCppSetUp.repoRootAsHome();
    }


    /** The verdict's attributed cells: all exact or precision; returns the explanations of the precision ones, by point kind. */
    static java.util.Map<String, java.util.Set<String>> assertEveryCellExplained(JsonNode j) {
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("precision");
        var cells = j.get("attribution").get("cells");
        assertThat(cells.size()).as("every compared cell is attributed").isEqualTo(j.get("cells").asInt());
        var byKind = new java.util.TreeMap<String, java.util.Set<String>>();
        for (var c : cells) {
            assertThat(c.get("status").asText()).as(c.toString()).isIn("exact", "precision");
            if (c.get("status").asText().equals("precision")) {
                String p = c.get("point").asText();
                byKind.computeIfAbsent(p.replaceFirst("^layers\\.\\d+\\.", ""), k -> new java.util.TreeSet<>()).add(c.get("explanation").asText());
            }
        }
        return byKind;
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-ple-e2b"})
    void llamaCppOnTheQ4_KGgufIsPrecisionWithItsVecDotInputsAndGeluTableNamed(String ck) throws Exception {
        Path ref = root.resolve("reference-dumps/" + ck + "-q4_k_m/long");
        Path gguf = ReferenceCases.ggufOf(ref);
        var r = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("tokens").get("flip").asInt()).isZero();
        var byKind = assertEveryCellExplained(j);
        var names = new ArrayList<String>();
        for (var e : j.get("attribution").get("precision_effects")) names.add(e.get("explanation").asText());
        assertThat(names).anyMatch(n -> n.startsWith("matmul inputs quantized to the weights' vec-dot blocks"));
        // the MLP output (its down_proj a K-quant: q8_K inputs) is reproduced with the GELU table, the projections by
        // their inputs' q8_0 blocks
        assertThat(byKind.get("mlp.out")).isNotEmpty().allMatch(e -> e.contains("vec-dot") && e.contains("GELU through an fp16 table"));
        assertThat(byKind.get("attn.q")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        if (ck.contains("moe")) assertThat(byKind.get("moe.out")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        // the effect is what quantization of the inputs adds: 1e-3 … 5e-2 at an op, far above fp32 noise
        for (var c : j.get("attribution").get("cells"))
            if (c.get("point").asText().equals("layers.0.mlp.out") && c.get("step").asInt() == 0)
                assertThat(c.get("local_rel_l2").asDouble()).isBetween(1e-3, 5e-2);
    }

    /**
     * Qwen3.5 through llama_model_quantize (Q4_K_M) and decodiff's q8_0: the tiny checkpoints' rows of 48 hold no whole
     * 256-value super-block, nor a whole 32-value block, so llama.cpp's quantizer falls back to F16 for every
     * hidden-wide matrix and to Q5_0 / Q5_1 / Q8_0 only where rows are 32-multiples (ssm_out, attn_output). A Q5_1
     * matrix takes q8_1 inputs, whose fp16 block sums meet its minimums (without that term the MoE file's layer-3
     * attention output is off by 4e-4 and a near-tie routing decision after it goes the other way). llama.cpp
     * runs the file against the fp32 transformers reference: every cell over tolerance must be accounted for by ggml's
     * matmuls on the GGUF's own stored matrices (read back from the file, not quantized again), so the verdict is
     * precision with that effect named, and no cell is unexplained.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"qwen35-tiny-llamacpp q4_k_m", "qwen35-tiny-moe-llamacpp q4_k_m", "qwen35-tiny-llamacpp q8_0", "qwen35-tiny-moe-llamacpp q8_0"})
    void aQuantizedQwen35GgufIsPrecisionWithTheStoredMatricesNamed(String spec) throws Exception {
        String ck = spec.split(" ")[0], type = spec.split(" ")[1];
        Path gguf = tmp.resolve(ck + "-" + type + ".gguf");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/" + ck).toString(), "--out", gguf.toString(), "--type", type);
        assertThat(c.code()).as(c.toString()).isZero();
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(dev.decodiff.llamacpp.gguf.GgufFile.read(gguf));
        assertThat(types).containsKey("F16").doesNotContainKey("Q4_K");
        assertThat(types).containsKey(type.equals("q8_0") ? "Q8_0" : "Q5_0");
        var r = Cli.run("compare", root.resolve("reference-dumps/" + ck + "/long").toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("precision");
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("only_in_reference")).as("every reference point is captured").isEmpty();
        int over = 0;
        for (var cell : j.get("attribution").get("cells")) {
            assertThat(cell.get("status").asText()).as(cell.toString()).isIn("exact", "precision");
            if (cell.get("status").asText().equals("precision")) {
                over++;
                assertThat(cell.get("explanation").asText()).as(cell.toString()).contains("GGUF's matrices as stored");
            }
        }
        assertThat(over).as("the rounded weights are seen").isPositive();
    }

    /**
     * The Llama family (llama-tiny: llama's q/k head permutation, biases, its own head; qwen3-tiny: q/k norms, a tied
     * head) through decodiff's reference quantizers (q8_0, q4_0) and llama.cpp's own (Q4_K_M, which falls back to Q5_0
     * and Q8_0 on these 64-wide rows) against transformers' float32 reference of the unquantized checkpoint: every cell
     * is over tolerance from the embedding on (the quantization itself, 5e-3 at q8_0, 8e-2 at q4_0), and every one must
     * be accounted for by ggml's matmuls and embedding lookups on the GGUF's own stored matrices — precision, with no
     * cell unexplained and no matrix refused. A flipped greedy token after such an account is drift, not a finding.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny q8_0", "llama-tiny q4_0", "llama-tiny q4_k_m", "qwen3-tiny q8_0", "qwen3-tiny q4_0"})
    void aQuantizedLlamaFamilyGgufIsPrecisionWithTheStoredMatricesNamed(String spec) throws Exception {
        String ck = spec.split(" ")[0], type = spec.split(" ")[1];
        Path gguf = quantized(ck, type);
        var r = Cli.run("compare", root.resolve("reference-dumps/" + ck + "/short").toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("precision");
        assertThat(j.get("observer_effect").asText()).isEqualTo("none");
        assertThat(j.get("only_in_reference")).as("every reference point is captured").isEmpty();
        assertThat(j.get("notes").toString()).doesNotContain("not the checkpoint's matrix");
        var cells = j.get("attribution").get("cells");
        assertThat(cells.size()).as("every compared cell is attributed").isEqualTo(j.get("cells").asInt());
        int over = 0;
        for (var cell : cells) {
            assertThat(cell.get("status").asText()).as(cell.toString()).isIn("exact", "precision");
            if (!cell.get("status").asText().equals("precision")) continue;
            over++;
            assertThat(cell.get("explanation").asText()).as(cell.toString()).contains("GGUF's matrices as stored");
            // reproduced, not merely inside an envelope: what is left of the op is far below what quantization adds
            assertThat(cell.get("leftover").asDouble()).as(cell.toString()).isLessThan(1e-4);
            if (cell.get("point").asText().equals("embed"))
                assertThat(cell.get("local_rel_l2").asDouble()).as("the quantized embedding itself").isGreaterThan(1e-3);
        }
        // the embedding, every projection, MLP and the head of every step: the quantization is seen everywhere
        assertThat(over).isGreaterThanOrEqualTo(j.get("cells").asInt() / 2);
    }

    /**
     * A fault planted in the stored matrices: layer 0's attn_q of a clean quantized GGUF rewritten with the project's
     * GGUF writer (its rows reversed, or one row's block scales multiplied by 1.25), everything else byte for byte. That
     * matrix is not the checkpoint's within its type's rounding, so it is refused and named, and the cell its op makes
     * is the divergence — an excuse taken from the candidate's own file would have called it precision.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-tiny q8_0 reversed", "llama-tiny q4_0 scaled", "qwen3-tiny q8_0 reversed"})
    void aGgufWhoseLayer0AttnQRowsAreRewrittenIsDivergentThere(String spec) throws Exception {
        String ck = spec.split(" ")[0], type = spec.split(" ")[1], fault = spec.split(" ")[2];
        Path clean = quantized(ck, type), faulted = tmp.resolve(ck + "-" + type + "-" + fault + ".gguf");
        rewriteRows(clean, faulted, "blk.0.attn_q.weight", fault.equals("reversed"));
        var r = Cli.run("compare", root.resolve("reference-dumps/" + ck + "/short").toString(), "--engine", "llama.cpp", "--gguf", faulted.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("divergence");
        var first = j.get("first_divergence");
        assertThat(first.get("point").asText()).as(j.get("verdict_text").asText()).isEqualTo("layers.0.attn.q");
        assertThat(first.get("step").asInt()).isZero();
        assertThat(j.get("notes").toString()).contains("blk.0.attn_q.weight (" + type.toUpperCase(java.util.Locale.ROOT) + ")")
                .contains("rounding bound").contains("not the checkpoint's matrix");
        // the embedding before it is still accounted for by the (untouched) stored token_embd
        for (var cell : j.get("attribution").get("cells"))
            if (cell.get("point").asText().equals("embed")) assertThat(cell.get("status").asText()).isEqualTo("precision");
    }

    /**
     * Every stored matrix of the bundled Q4_K_M GGUFs (Q4_K, Q6_K, Q5_0, Q8_0, F16) and of Qwen3.5's quantized files
     * is within its type's rounding of the checkpoint it was made from: the bounds, K-quants included, refuse nothing
     * a quantizer writes.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-moe", "gemma4-tiny-ple-e2b", "qwen35-tiny-moe-llamacpp q4_k_m", "llama-tiny q4_k_m"})
    void theBundledAndMadeQuantizedGgufsAreWithinTheirTypesRounding(String spec) throws Exception {
        String ck = spec.split(" ")[0];
        Path gguf = spec.contains(" ") ? quantized(ck, spec.split(" ")[1]) : root.resolve("checkpoints/gguf/" + ck + "-Q4_K_M.gguf");
        var m = dev.decodiff.harness.llamacpp.GgufStoredTensors.read(gguf, root.resolve("checkpoints/" + ck)).matrices();
        assertThat(m.rejected()).isEmpty();
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(dev.decodiff.llamacpp.gguf.GgufFile.read(gguf));
        if (ck.startsWith("gemma4")) assertThat(types).containsKeys("Q4_K", "Q6_K");
    }

    /** {@code decodiff gguf --type type} of a bundled checkpoint. */
    private Path quantized(String ck, String type) throws Exception {
        Path gguf = tmp.resolve(ck + "-" + type + ".gguf");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/" + ck).toString(), "--out", gguf.toString(), "--type", type);
        assertThat(c.code()).as(c.toString()).isZero();
        return gguf;
    }

    /**
     * A copy of {@code src} written by {@link dev.decodiff.llamacpp.gguf.GgufWriter} with tensor {@code name}'s rows
     * reversed, or (not reversed) the fp16 block scales of its row 5 multiplied by 1.25 (Q8_0 and Q4_0 blocks begin
     * with their scale); every other byte as it was.
     */
    static void rewriteRows(Path src, Path dst, String name, boolean reversed) throws Exception {
        var file = dev.decodiff.llamacpp.gguf.GgufFile.read(src);
        byte[] all = java.nio.file.Files.readAllBytes(src);
        var tensors = new ArrayList<dev.decodiff.llamacpp.gguf.GgufWriter.Tensor>();
        for (var t : file.tensors()) {
            int at = Math.toIntExact(file.dataOffset() + t.offset()), n = Math.toIntExact(t.byteSize());
            byte[] data = java.util.Arrays.copyOfRange(all, at, at + n);
            if (t.name().equals(name)) {
                var type = t.type();
                assertThat(type).isIn(dev.decodiff.llamacpp.gguf.GgmlType.Q8_0, dev.decodiff.llamacpp.gguf.GgmlType.Q4_0);
                int rowBytes = Math.toIntExact(type.rowBytes(t.ne()[0])), rows = n / rowBytes, block = type == dev.decodiff.llamacpp.gguf.GgmlType.Q8_0 ? 34 : 18;
                byte[] out = data.clone();
                if (reversed) for (int r = 0; r < rows; r++) System.arraycopy(data, r * rowBytes, out, (rows - 1 - r) * rowBytes, rowBytes);
                else {
                    var b = java.nio.ByteBuffer.wrap(out).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                    for (int o = 5 * rowBytes; o < 6 * rowBytes; o += block)
                        b.putShort(o, Float.floatToFloat16(Float.float16ToFloat(b.getShort(o)) * 1.25f));
                }
                data = out;
            }
            byte[] bytes = data;
            tensors.add(new dev.decodiff.llamacpp.gguf.GgufWriter.Tensor(t.name(), t.ne(), t.type(), sink -> sink.bytes(bytes)));
        }
        dev.decodiff.llamacpp.gguf.GgufWriter.write(dst, file.metadata(), tensors, false);
        assertThat(dev.decodiff.llamacpp.gguf.GgufFile.read(dst).floats(name)).isNotEqualTo(file.floats(name));
    }

    /**
     * Q4_0 (q8_0 inputs) and llama.cpp's Q4_K_S, whose fallback on 128-wide rows includes Q5_1: its q8_1 inputs carry
     * an fp16 block sum that meets the weights' minimum, which the hypothesis must model (without it attn.v of a
     * Q5_1 matrix is left at 5e-4, unexplained).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"q4_0", "q4_k_s"})
    void aQuantizedGgufAgainstDecodiffsOwnReferenceOfItIsPrecisionToo(String type) throws Exception {
        Path gguf = tmp.resolve("tiny-" + type + ".gguf"), ref = tmp.resolve(type + "-ref");
        var c = Cli.run("gguf", "--model", root.resolve("checkpoints/gemma4-tiny").toString(), "--out", gguf.toString(), "--type", type);
        assertThat(c.code()).as(c.toString()).isZero();
        var types = dev.decodiff.llamacpp.gguf.GgufToCheckpoint.matrixTypes(dev.decodiff.llamacpp.gguf.GgufFile.read(gguf));
        if (type.equals("q4_k_s")) assertThat(types).containsKeys("Q4_K", "Q5_1", "Q5_0");
        var d = Cli.run("dump", "--model", gguf.toString(), "--tokens", "2,367,598,689,870,760,435,434,308,358,337", "-n", "6", "--out", ref.toString());
        assertThat(d.code()).as(d.toString()).isZero();
        var r = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--gguf", gguf.toString(), "--model", gguf.toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var byKind = assertEveryCellExplained(r.json());
        assertThat(byKind.get("attn.q")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        assertThat(byKind.get("attn.v")).isNotEmpty().allMatch(e -> e.contains("vec-dot"));
        // without --gguf llama.cpp runs the GGUF the reference's folder was made from, not a conversion of its floats
        var own = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--model", gguf.toString(), "--json", "--no-attribution");
        assertThat(own.code()).as(own.toString()).isEqualTo(1);
        var oj = own.json();
        assertThat(oj.get("candidate").asText()).contains(gguf.toString()).doesNotContain("converted");
        assertThat(oj.get("first_divergence").get("rel_l2").asDouble()).as("the same divergence as with --gguf").isGreaterThan(1e-3);
        // moved away, it is not silently replaced by the folder's float weights
        Path folder = dev.decodiff.harness.llamacpp.GgufCheckpointCache.of(gguf);
        java.nio.file.Files.move(gguf, tmp.resolve("moved-" + type + ".gguf"));
        var gone = Cli.run("compare", ref.toString(), "--engine", "llama.cpp", "--model", folder.toString(), "--no-attribution");
        assertThat(gone.code()).as(gone.toString()).isEqualTo(dev.decodiff.harness.cli.Main.BAD_INPUT);
        assertThat(gone.err().strip().lines().count()).isEqualTo(1);
        assertThat(gone.err()).contains("was made from a GGUF", "--gguf FILE", "--gguf-type f32");
    }
}
