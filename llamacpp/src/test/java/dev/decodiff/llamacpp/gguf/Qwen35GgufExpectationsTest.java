package dev.decodiff.llamacpp.gguf;

import dev.decodiff.metal.DType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * decodiff's Qwen3.5 GGUFs against what llama.cpp's pinned converter writes for the same checkpoints: metadata key by
 * key (order, type, value) and every tensor's name, shape, type and bytes (sha256). The expectations were made by
 * that converter (scripts/qwen35-converter-expectations.py; it needs torch, which the test machines do not have), so
 * the head reordering of the linear-attention value heads, the 1+w norms, ssm_a = −exp(A_log) and the expert stacks
 * are checked against llama.cpp's code, not against decodiff's. The per-expert layout of the MoE checkpoint was
 * checked there to give the same file as its fused layout; {@link #perExpertLayoutPlansTheFusedLayoutsTensors} checks
 * the plan of that layout here.
 */
class Qwen35GgufExpectationsTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @CsvSource({"qwen35-tiny, f32", "qwen35-tiny, bf16", "qwen35-tiny-moe, f32", "qwen35-tiny-moe, bf16"})
    void decodiffWritesWhatLlamaCppsConverterWrites(String checkpoint, String type) throws Exception {
        Path out = tmp.resolve(checkpoint + ".gguf");
        HfToGguf.convert(Checkpoints.dir(checkpoint), out, GgufOutputType.parse(type), false);
        var expected = Files.readAllLines(Path.of(getClass().getResource("/qwen35-converter/" + checkpoint + "-" + type + ".txt").toURI()));
        assertThat(lines(out)).containsExactlyElementsOf(expected);
    }

    @Test
    void perExpertLayoutPlansTheFusedLayoutsTensors() throws Exception {
        Path dir = Checkpoints.dir("qwen35-tiny-moe");
        var json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(dir.resolve("config.json").toFile());
        var fused = new ArrayList<Gemma4GgufPlan.HfTensor>();
        var perExpert = new ArrayList<Gemma4GgufPlan.HfTensor>();
        String p = "model.language_model.layers.0.";
        fused.add(new Gemma4GgufPlan.HfTensor(p + "mlp.experts.gate_up_proj", DType.BF16, new long[]{8, 32, 48}));
        fused.add(new Gemma4GgufPlan.HfTensor(p + "mlp.experts.down_proj", DType.BF16, new long[]{8, 48, 16}));
        for (int e = 0; e < 8; e++) {
            perExpert.add(new Gemma4GgufPlan.HfTensor(p + "mlp.experts." + e + ".gate_proj.weight", DType.BF16, new long[]{16, 48}));
            perExpert.add(new Gemma4GgufPlan.HfTensor(p + "mlp.experts." + e + ".up_proj.weight", DType.BF16, new long[]{16, 48}));
            perExpert.add(new Gemma4GgufPlan.HfTensor(p + "mlp.experts." + e + ".down_proj.weight", DType.BF16, new long[]{48, 16}));
        }
        var a = Qwen35GgufPlan.of("m", json, dir.resolve("config.json"), fused, GgufOutputType.BF16).tensorInfos();
        var b = Qwen35GgufPlan.of("m", json, dir.resolve("config.json"), perExpert, GgufOutputType.BF16).tensorInfos();
        assertThat(b).containsExactlyInAnyOrderElementsOf(a);
        assertThat(a).extracting(GgufTensorInfo::name).containsExactlyInAnyOrder("blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight");
    }

    /** The file in the expectation format: "KV key TYPE[/ITEM] value" and "T name ne TYPE sha256". */
    static List<String> lines(Path gguf) {
        var f = GgufFile.read(gguf);
        var out = new ArrayList<String>();
        f.metadata().forEach((k, v) -> {
            if (k.equals("general.name")) return;
            String t = v.type().name() + (v.type() == GgufValueType.ARRAY ? "/" + v.itemType().name() : "");
            out.add("KV " + k + " " + t + " " + value(v));
        });
        try (var ch = FileChannel.open(gguf)) {
            for (var t : f.tensors()) {
                var buf = ByteBuffer.allocate((int) t.byteSize());
                ch.read(buf, f.dataOffset() + t.offset());
                var ne = new StringBuilder();
                for (long d : t.ne()) ne.append(ne.isEmpty() ? "" : ",").append(d);
                out.add("T " + t.name() + " " + ne + " " + t.type().name() + " "
                        + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(buf.array())));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        return out;
    }

    private static String value(GgufValue v) {
        var t = v.type() == GgufValueType.ARRAY ? v.itemType() : v.type();
        List<?> items = v.type() == GgufValueType.ARRAY ? v.asList() : List.of(v.value());
        var sb = new StringBuilder();
        for (Object o : items) {
            if (!sb.isEmpty()) sb.append(',');
            sb.append(t == GgufValueType.FLOAT32 ? String.format(Locale.ROOT, "%08x", Float.floatToRawIntBits((Float) o)) : o.toString());
        }
        return sb.toString();
    }
}
