package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.cli.Main;
import dev.decodiff.metal.SafetensorsFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Consumer;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A broken MLX-quantized checkpoint is refused with one line that names the tensor (or config key) and the fix, exit
 * 2: never a silent fallback to unquantized or zero weights. Each case is the committed 4-bit checkpoint with one
 * thing changed.
 */
class QuantizedCheckpointBadInputTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String P = "language_model.model.";

    @TempDir Path tmp;
    int variants;

    record Raw(String dtype, long[] shape, byte[] bytes) {}

    /** A copy of checkpoints/gemma4-tiny-mlx4 with its config and tensors edited. */
    Path variant(Consumer<ObjectNode> quantization, Consumer<Map<String, Raw>> tensors) throws IOException {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny-mlx4");
        Path dst = Files.createDirectories(tmp.resolve("ck" + (++variants)));
        var cfg = (ObjectNode) JSON.readTree(src.resolve("config.json").toFile());
        quantization.accept((ObjectNode) cfg.get("quantization"));
        JSON.writeValue(dst.resolve("config.json").toFile(), cfg);
        var map = new LinkedHashMap<String, Raw>();
        try (var f = SafetensorsFile.open(src.resolve("model.safetensors"))) {
            for (var t : f.tensors().values())
                map.put(t.name(), new Raw(t.dtype().safetensorsName(), t.shape(), t.data().toArray(ValueLayout.JAVA_BYTE)));
        }
        tensors.accept(map);
        write(dst.resolve("model.safetensors"), map);
        Files.copy(src.resolve("tokenizer.json"), dst.resolve("tokenizer.json"));
        return dst;
    }

    static void write(Path file, Map<String, Raw> tensors) throws IOException {
        var header = JSON.createObjectNode();
        var data = new ByteArrayOutputStream();
        for (var e : tensors.entrySet()) {
            var h = header.putObject(e.getKey());
            h.put("dtype", e.getValue().dtype());
            var s = h.putArray("shape");
            for (long d : e.getValue().shape()) s.add(d);
            var o = h.putArray("data_offsets");
            o.add(data.size());
            data.write(e.getValue().bytes());
            o.add(data.size());
        }
        byte[] hb = JSON.writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
        var len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(hb.length).array();
        try (var out = Files.newOutputStream(file)) {
            out.write(len);
            out.write(hb);
            data.writeTo(out);
        }
    }

    static void assertRefused(Path ck, String... mustContain) {
        for (String[] cmd : new String[][]{{"inspect", ck.toString()}, {"run", "--model", ck.toString(), "--prompt", "The garden", "-n", "1"}}) {
            var r = Cli.run(cmd);
            assertThat(r.code()).as(r.toString()).isEqualTo(Main.BAD_INPUT);
            assertThat(r.err().strip().lines().count()).as(r.toString()).isEqualTo(1);
            assertThat(r.err()).as(r.toString()).contains(mustContain);
            assertThat(r.out()).as(r.toString()).doesNotContain("MATCH");
        }
    }

    @Test
    void theCommittedCheckpointLoads() throws Exception {
        var r = Cli.run("inspect", variant(q -> {}, t -> {}).toString());
        assertThat(r.code()).as(r.toString()).isZero();
        // Packed where the CPU has the affine kernels (AVX-512 with VBMI and VNNI, or AVX2 with F16C), else dequantized once at load.
        String held = dev.decodiff.metal.NativeKernels.affineAvailable() ? "41 tensors kept packed (dequantized in the kernels)" : "41 tensors dequantized to fp32 at load";
        assertThat(r.out()).contains("quantized  MLX 4-bit, group 64, affine; 1 per-tensor override; " + held)
                .contains("4-bit, group 64: 40 tensors").contains("8-bit, group 64: 1 tensor")
                .contains("override " + P + "layers.0.mlp.down_proj: 8-bit, group 64");
    }

    @Test
    void unknownBitsAreRefused() throws Exception {
        assertRefused(variant(q -> q.put("bits", 7), t -> {}), "quantization.bits = 7 is not supported", "fix config.json");
        assertRefused(variant(q -> ((ObjectNode) q.get(P + "layers.0.mlp.down_proj")).put("bits", 1), t -> {}),
                "quantization." + P + "layers.0.mlp.down_proj.bits = 1 is not supported");
    }

    @Test
    void anUnknownModeIsRefused() throws Exception {
        assertRefused(variant(q -> q.put("mode", "mxfp4"), t -> {}), "quantization mode 'mxfp4' is not supported", "mode affine");
    }

    @Test
    void aGroupSizeThatDoesNotDivideTheRowIsRefused() throws Exception {
        // q_proj of layer 1 re-packed as 16 columns (2 words of 4-bit codes) with one group: 64 cannot divide 16
        String m = P + "layers.1.self_attn.q_proj";
        assertRefused(variant(q -> {}, t -> {
            t.put(m + ".weight", new Raw("U32", new long[]{128, 2}, new byte[128 * 2 * 4]));
            t.put(m + ".scales", new Raw("BF16", new long[]{128, 1}, new byte[128 * 2]));
            t.put(m + ".biases", new Raw("BF16", new long[]{128, 1}, new byte[128 * 2]));
        }), "'" + m + ".weight'", "group size 64 does not divide its row of 16 columns", "per-tensor override");
        assertRefused(variant(q -> q.put("group_size", 96), t -> {}), "quantization.group_size = 96 is not supported");
    }

    @Test
    void missingScalesOrBiasesAreRefused() throws Exception {
        String m = P + "layers.3.mlp.up_proj";
        assertRefused(variant(q -> {}, t -> {
            t.remove(m + ".scales");
            t.remove(m + ".biases");
        }), "'" + m + ".weight' is packed (U32) but '" + m + ".scales' is missing", "re-convert");
        assertRefused(variant(q -> {}, t -> t.remove(m + ".biases")), "'" + m + ".weight' is quantized", "'" + m + ".biases' is missing", "re-convert");
        assertRefused(variant(q -> {}, t -> t.remove(m + ".scales")), "'" + m + ".weight' has biases but no '" + m + ".scales'");
    }

    @Test
    void packedShapesThatDisagreeWithTheConfigAreRefused() throws Exception {
        // 8 bits read from 4-bit data: rows of 64 columns, one group of 64, but the scales hold two groups per row
        assertRefused(variant(q -> q.put("bits", 8), t -> {}), "the packed shapes disagree with config.json", "at 8-bit, group 64");
        assertRefused(variant(q -> q.put("group_size", 32), t -> {}), "the packed shapes disagree with config.json", "4-bit, group 32");
        assertRefused(variant(q -> q.put("bits", 3), t -> {}), "do not hold whole 3-bit codes");
        // the override's own bits are checked against its tensor: layer 0's down_proj holds 8-bit codes
        assertRefused(variant(q -> ((ObjectNode) q.get(P + "layers.0.mlp.down_proj")).put("bits", 4), t -> {}),
                "'" + P + "layers.0.mlp.down_proj.weight'", "disagree", "fix its override");
    }

    @Test
    void overridesThatNameNoTensorOrContradictTheFilesAreRefused() throws Exception {
        assertRefused(variant(q -> q.putObject(P + "layers.9.mlp.down_proj").put("bits", 8).put("group_size", 64), t -> {}),
                "override '" + P + "layers.9.mlp.down_proj' names no tensor", "fix the module path");
        assertRefused(variant(q -> q.put(P + "layers.1.mlp.gate_proj", false), t -> {}),
                "'" + P + "layers.1.mlp.gate_proj' is false (not quantized), but the checkpoint has '" + P + "layers.1.mlp.gate_proj.scales'");
        assertRefused(variant(q -> q.putObject(P + "layers.1.input_layernorm").put("bits", 8), t -> {}),
                "override '" + P + "layers.1.input_layernorm' gives it 8-bit, group 64", "no '" + P + "layers.1.input_layernorm.scales'");
        assertRefused(variant(q -> q.put("quant_method", "gptq"), t -> {}), "quantization key 'quant_method'");
    }

    @Test
    void packedTensorsWithoutAQuantizationConfigAreRefused() throws Exception {
        Path ck = variant(q -> {}, t -> {});
        var cfg = (ObjectNode) JSON.readTree(ck.resolve("config.json").toFile());
        cfg.remove("quantization");
        cfg.remove("quantization_config");
        JSON.writeValue(ck.resolve("config.json").toFile(), cfg);
        assertRefused(ck, "is part of a quantized weight but config.json has no 'quantization'");
    }

    /** The float MoE checkpoint with its experts renamed and split as mlx-lm's SwitchGLU stores them ({@code halves}) or not. */
    private Path switchGlu(String name, boolean halves) throws Exception {
        Path src = ReferenceCases.repoRoot().resolve("checkpoints/gemma4-tiny-moe");
        Path dst = Files.createDirectories(tmp.resolve(name));
        Files.copy(src.resolve("config.json"), dst.resolve("config.json"));
        var map = new LinkedHashMap<String, Raw>();
        try (var f = SafetensorsFile.open(src.resolve("model.safetensors"))) {
            for (var t : f.tensors().values()) {
                byte[] b = t.data().toArray(ValueLayout.JAVA_BYTE);
                if (halves && t.name().endsWith("experts.gate_up_proj")) {
                    // [E, 2·Im, H]: each expert's first Im rows are its gate, the next Im its up projection
                    long[] sh = t.shape();
                    int E = (int) sh[0], rows = (int) sh[1] / 2, rowBytes = (int) (sh[2] * t.dtype().bytes());
                    byte[] g = new byte[b.length / 2], u = new byte[b.length / 2];
                    for (int e = 0; e < E; e++) {
                        System.arraycopy(b, (2 * e) * rows * rowBytes, g, e * rows * rowBytes, rows * rowBytes);
                        System.arraycopy(b, (2 * e + 1) * rows * rowBytes, u, e * rows * rowBytes, rows * rowBytes);
                    }
                    long[] half = {sh[0], rows, sh[2]};
                    String base = t.name().replace("experts.gate_up_proj", "experts.switch_glu.");
                    map.put(base + "gate_proj.weight", new Raw(t.dtype().safetensorsName(), half, g));
                    map.put(base + "up_proj.weight", new Raw(t.dtype().safetensorsName(), half, u));
                    continue;
                }
                String n = t.name().replace("experts.gate_up_proj", "experts.switch_glu.gate_proj.weight")
                        .replace("experts.down_proj", "experts.switch_glu.down_proj.weight");
                map.put(n, new Raw(t.dtype().safetensorsName(), t.shape(), b));
            }
        }
        write(dst.resolve("model.safetensors"), map);
        return dst;
    }

    @Test
    void mlxSwitchGluExpertsRunAsTheFusedOnesAndAStackOfTheWrongShapeIsRefusedNamingIt() throws Exception {
        // the same weights in mlx-lm's layout: transformers' reference of the fused checkpoint matches
        Path glu = switchGlu("moe-switch-glu", true);
        var m = Cli.run("compare", ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny-moe/long").toString(), "--model", glu.toString(),
                "--allow-mismatch", "--no-observer-check", "--json");
        assertThat(m.code()).as(m.toString()).isZero();
        var j = new com.fasterxml.jackson.databind.ObjectMapper().readTree(m.out());
        assertThat(j.get("verdict").asText()).as(j.get("verdict_text").asText()).isEqualTo("match");
        assertThat(j.get("only_in_reference")).isEmpty();
        // gate_proj holding both halves and no up_proj: refused with the tensor named
        var r = Cli.run("run", "--model", switchGlu("moe-fused-as-gate", false).toString(), "--tokens", "2,3", "-n", "1", "--ids");
        assertThat(r.code()).as(r.toString()).isEqualTo(Main.BAD_INPUT);
        assertThat(r.err().strip().lines().count()).isEqualTo(1);
        assertThat(r.err()).contains("experts.switch_glu.gate_proj.weight");
    }
}
