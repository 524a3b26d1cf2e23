package dev.decodiff.llamacpp.gguf;

import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerType;
import dev.decodiff.metal.SafetensorsFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class HfToGgufTest {
    /**
     * Hugging Face → GGUF names as gguf-py's tensor map (MODEL_ARCH.GEMMA4) and Gemma4Model.modify_tensors give them,
     * written out here from those sources rather than taken from the converter under test.
     */
    private static final Map<String, String> GGUF_PY = Map.ofEntries(
            Map.entry("embed_tokens.weight", "token_embd.weight"), Map.entry("norm.weight", "output_norm.weight"),
            Map.entry("embed_tokens_per_layer.weight", "per_layer_token_embd.weight"),
            Map.entry("per_layer_model_projection.weight", "per_layer_model_proj.weight"),
            Map.entry("per_layer_projection_norm.weight", "per_layer_proj_norm.weight"),
            Map.entry("input_layernorm.weight", "attn_norm.weight"), Map.entry("post_attention_layernorm.weight", "post_attention_norm.weight"),
            Map.entry("pre_feedforward_layernorm.weight", "ffn_norm.weight"), Map.entry("post_feedforward_layernorm.weight", "post_ffw_norm.weight"),
            Map.entry("pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"), Map.entry("post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"),
            Map.entry("post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"), Map.entry("layer_scalar", "layer_output_scale.weight"),
            Map.entry("self_attn.q_proj.weight", "attn_q.weight"), Map.entry("self_attn.k_proj.weight", "attn_k.weight"),
            Map.entry("self_attn.v_proj.weight", "attn_v.weight"), Map.entry("self_attn.o_proj.weight", "attn_output.weight"),
            Map.entry("self_attn.q_norm.weight", "attn_q_norm.weight"), Map.entry("self_attn.k_norm.weight", "attn_k_norm.weight"),
            Map.entry("mlp.gate_proj.weight", "ffn_gate.weight"), Map.entry("mlp.up_proj.weight", "ffn_up.weight"),
            Map.entry("mlp.down_proj.weight", "ffn_down.weight"), Map.entry("per_layer_input_gate.weight", "inp_gate.weight"),
            Map.entry("per_layer_projection.weight", "proj.weight"), Map.entry("post_per_layer_input_norm.weight", "post_norm.weight"),
            Map.entry("router.proj.weight", "ffn_gate_inp.weight"), Map.entry("router.scale", "ffn_gate_inp.scale"),
            Map.entry("router.per_expert_scale", "ffn_down_exps.scale"), Map.entry("experts.gate_up_proj", "ffn_gate_up_exps.weight"),
            Map.entry("experts.down_proj", "ffn_down_exps.weight"));
    private static final Pattern LAYER = Pattern.compile("model\\.layers\\.(\\d+)\\.(.+)");

    @TempDir
    Path tmp;

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"})
    void anF32ConversionHoldsEveryCheckpointWeightBitForBitUnderItsLlamaCppName(String checkpoint) {
        Path out = tmp.resolve(checkpoint + ".gguf");
        HfToGguf.convert(Checkpoints.dir(checkpoint), out, GgufOutputType.F32, false);
        var gguf = GgufFile.read(out);
        try (var st = SafetensorsFile.open(Checkpoints.dir(checkpoint).resolve("model.safetensors"))) {
            var expectedNames = new ArrayList<String>(List.of("rope_freqs.weight"));
            for (var t : st.tensors().values()) {
                String g = ggufPyName(t.name());
                expectedNames.add(g);
                var info = gguf.tensor(g);
                assertThat(info.type()).as(g).isEqualTo(GgmlType.F32);
                long[] reversed = new long[t.rank()];
                for (int i = 0; i < t.rank(); i++) reversed[i] = t.dim(t.rank() - 1 - i);
                assertThat(info.ne()).as(g + " keeps the PyTorch shape, reversed into ggml order").containsExactly(reversed);
                float[] got = gguf.floats(g);
                float[] want = t.toFloats();
                assertThat(java.util.Arrays.mismatch(got, want)).as(g + ": first element that differs (no +1, no permutation, no rounding)").isEqualTo(-1);
            }
            assertThat(gguf.tensors()).extracting(GgufTensorInfo::name).containsExactlyInAnyOrderElementsOf(expectedNames);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"})
    void theMetadataSaysWhatConfigJsonSaysAsTheEngineReadsIt(String checkpoint) {
        Path out = tmp.resolve(checkpoint + ".gguf");
        HfToGguf.convert(Checkpoints.dir(checkpoint), out, GgufOutputType.F32, false);
        var m = GgufFile.read(out).metadata();
        var c = Gemma4Config.read(Checkpoints.dir(checkpoint).resolve("config.json"));
        MetadataExpectations.assertMatches(m, c, 4096);
        assertThat(m.get("general.file_type").asLong()).isZero();
    }

    @Test
    void aBf16ConversionKeepsTheCheckpointsBf16WeightsBitForBitAndNormsInF32() {
        Path out = tmp.resolve("moe-bf16.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny-moe"), out, GgufOutputType.BF16, false);
        var gguf = GgufFile.read(out);
        try (var st = SafetensorsFile.open(Checkpoints.dir("gemma4-tiny-moe").resolve("model.safetensors"))) {
            for (var t : st.tensors().values()) {
                String g = ggufPyName(t.name());
                boolean matrix = t.rank() >= 2 && !g.endsWith("ffn_gate_inp.weight");
                assertThat(gguf.tensor(g).type()).as(g).isEqualTo(matrix ? GgmlType.BF16 : GgmlType.F32);
                assertThat(java.util.Arrays.mismatch(gguf.floats(g), t.toFloats())).as(g).isEqualTo(-1);
            }
        }
        assertThat(gguf.metadata().get("general.file_type").asLong()).isEqualTo(32);
    }

    @Test
    void theFullLayersRopeFreqsRotateTheFirstQuarterOfEachHalfAndFreezeTheRest() {
        Path out = tmp.resolve("t.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), out, GgufOutputType.F32, false);
        // head dim 64, partial_rotary_factor 0.25: 8 rotated pairs of 32 (n_rot = 0.25·64/2).
        float[] f = GgufFile.read(out).floats("rope_freqs.weight");
        assertThat(f).hasSize(32);
        for (int i = 0; i < 32; i++) assertThat(f[i]).as("freq factor %d", i).isEqualTo(i < 8 ? 1.0f : 1e30f);
    }

    @Test
    void anExistingOutputIsNeitherReplacedNorTouchedWithoutForce() throws Exception {
        Path out = tmp.resolve("keep.gguf");
        Files.writeString(out, "mine");
        assertThatThrownBy(() -> HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), out, GgufOutputType.F32, false))
                .isInstanceOf(GgufException.class).hasMessageContaining(out.toString()).hasMessageContaining("--force");
        assertThat(Files.readString(out)).isEqualTo("mine");
        try (var s = Files.list(tmp)) {
            assertThat(s.toList()).as("no temporary file left behind").containsExactly(out);
        }
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), out, GgufOutputType.F32, true);
        assertThat(GgufFile.read(out).tensors()).isNotEmpty();
    }

    @Test
    void theVocabularyListsTokenizerJsonsTokensByIdWithScoresAndTypesAsTheConverterWrites() throws Exception {
        Path out = tmp.resolve("v.gguf");
        HfToGguf.convert(Checkpoints.dir("gemma4-tiny"), out, GgufOutputType.F32, false);
        var m = GgufFile.read(out).metadata();
        var tok = new com.fasterxml.jackson.databind.ObjectMapper().readTree(Checkpoints.dir("gemma4-tiny").resolve("tokenizer.json").toFile());
        var tokens = m.get("tokenizer.ggml.tokens").asList();
        var types = m.get("tokenizer.ggml.token_type").asList();
        assertThat(tokens).hasSize(tok.get("model").get("vocab").size());
        tok.get("model").get("vocab").fields().forEachRemaining(e -> assertThat(tokens.get(e.getValue().asInt())).isEqualTo(e.getKey()));
        assertThat(new java.util.HashSet<Object>(m.get("tokenizer.ggml.scores").asList())).isEqualTo(java.util.Set.of(-1000.0f));
        // gguf-py TokenType: 1 NORMAL, 3 CONTROL (tokenizer_config.json's pad/eos/bos/unk), 6 BYTE (<0xNN>)
        assertThat(types.subList(0, 4)).isEqualTo(List.of(3L, 3L, 3L, 3L));
        assertThat(types.get(tokens.indexOf("<0x0A>"))).isEqualTo(6L);
        assertThat(types.get(tokens.indexOf("<start_of_turn>"))).as("special in tokenizer.json, not named in tokenizer_config.json").isEqualTo(1L);
        var merges = m.get("tokenizer.ggml.merges").asList();
        var first = tok.get("model").get("merges").get(0);
        assertThat(merges).hasSize(tok.get("model").get("merges").size());
        assertThat(merges.getFirst()).isEqualTo(first.get(0).asText() + " " + first.get(1).asText());
        assertThat(m.get("tokenizer.ggml.bos_token_id").asLong()).isEqualTo(2);
        assertThat(m.get("tokenizer.ggml.eos_token_id").asLong()).isEqualTo(1);
        assertThat(m.get("tokenizer.ggml.add_bos_token").asBoolean()).as("Gemma4Model sets it whatever tokenizer_config says").isTrue();
    }

    static String ggufPyName(String hf) {
        var m = LAYER.matcher(hf);
        if (m.matches()) return "blk." + m.group(1) + "." + GGUF_PY.get(m.group(2));
        return GGUF_PY.get(hf.substring("model.".length()));
    }

    static boolean isSliding(Gemma4Config c, int i) { return c.layer(i).type() == LayerType.SLIDING; }
}
