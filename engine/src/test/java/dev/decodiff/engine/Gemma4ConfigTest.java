package dev.decodiff.engine;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** Config resolution against the released Gemma 4 configs and transformers 5.17's defaults (both config forms). */
class Gemma4ConfigTest {
    private static Gemma4Config parse(String json) throws Exception {
        return Gemma4Config.parse(new ObjectMapper().readTree(json), "config.json");
    }

    private static String pattern(String unit, int repeats) {
        return String.join(",", java.util.Collections.nCopies(repeats, unit));
    }

    /** E2B as the official checkpoint writes it (transformers 5.5–5.7 form, multimodal wrapper with text_config). */
    @Test
    void e2bOfficialFormResolvesKvSharingAndDoubleWideMlp() throws Exception {
        var types = pattern("\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"full_attention\"", 7);
        var c = parse("""
                {"model_type":"gemma4","text_config":{"model_type":"gemma4_text","hidden_size":1536,"num_hidden_layers":35,
                 "num_attention_heads":8,"num_key_value_heads":1,"head_dim":256,"global_head_dim":512,"intermediate_size":6144,
                 "hidden_size_per_layer_input":256,"num_kv_shared_layers":20,"use_double_wide_mlp":true,
                 "final_logit_softcapping":30.0,"layer_types":[%s]}}""".formatted(types));
        assertThat(c.firstKvShared()).isEqualTo(15);
        // spec §4: shared sliding layers read layer 13, shared full layers read layer 14
        assertThat(c.layer(15).kvSource()).isEqualTo(13);
        assertThat(c.layer(19).kvSource()).isEqualTo(14);
        assertThat(c.layer(34).kvSource()).isEqualTo(14);
        assertThat(c.layer(14).kvShared()).isFalse();
        assertThat(c.layer(4).headDim()).isEqualTo(512);
        assertThat(c.layer(3).headDim()).isEqualTo(256);
        assertThat(c.layer(14).intermediate()).isEqualTo(6144);
        assertThat(c.layer(15).intermediate()).isEqualTo(12288);
        assertThat(c.pleDim()).isEqualTo(256);
        assertThat(c.finalLogitSoftcap()).isEqualTo(30f);
    }

    @Test
    void kEqVFullLayersUseTheGlobalKvHeadsOnlyWhenKEqVIsSet() throws Exception {
        var types = pattern("\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"sliding_attention\",\"full_attention\"", 2);
        var base = """
                {"model_type":"gemma4_text","hidden_size":64,"num_hidden_layers":12,"num_attention_heads":32,
                 "num_key_value_heads":16,"head_dim":16,"global_head_dim":32,"num_global_key_value_heads":4,
                 "hidden_size_per_layer_input":0,"attention_k_eq_v":%s,"layer_types":[%s]}""";
        var kEqV = parse(base.formatted("true", types));
        assertThat(kEqV.layer(5).kvHeads()).isEqualTo(4);
        assertThat(kEqV.layer(5).kEqV()).isTrue();
        assertThat(kEqV.layer(4).kvHeads()).isEqualTo(16);
        assertThat(kEqV.layer(4).kEqV()).isFalse();
        var plain = parse(base.formatted("false", types));
        assertThat(plain.layer(5).kvHeads()).isEqualTo(16);
        assertThat(plain.layer(5).kEqV()).isFalse();
    }

    @Test
    void absentKeysGetTransformersDefaults() throws Exception {
        var c = parse("""
                {"model_type":"gemma4_text","hidden_size":64,"num_hidden_layers":7,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":16}""");
        // layer i is full when (i+1) % 6 == 0, and the last layer is forced to full
        assertThat(c.layers().stream().map(LayerSpec::type).toList()).isEqualTo(List.of(
                LayerType.SLIDING, LayerType.SLIDING, LayerType.SLIDING, LayerType.SLIDING, LayerType.SLIDING, LayerType.FULL, LayerType.FULL));
        assertThat(c.layer(5).headDim()).isEqualTo(512); // global_head_dim defaults to 512, not head_dim
        assertThat(c.pleDim()).isEqualTo(256);            // an omitted key means PLE is on
        assertThat(c.hasSoftcap()).isFalse();              // final_logit_softcapping defaults to None
        assertThat(c.slidingWindow()).isEqualTo(512);
        assertThat(c.fullRope().type()).isEqualTo("proportional");
        assertThat(c.fullRope().partialRotaryFactor()).isEqualTo(0.25);
    }

    @Test
    void unsupportedValuesAreRefusedWithTheFileNamed() {
        assertThatThrownBy(() -> parse("""
                {"model_type":"gemma4_text","num_hidden_layers":1,"rope_parameters":{"full_attention":{"rope_type":"yarn"}}}"""))
                .isInstanceOf(CheckpointException.class).hasMessageContaining("config.json").hasMessageContaining("yarn");
        assertThatThrownBy(() -> parse("""
                {"model_type":"gemma4_text","num_hidden_layers":1,"use_bidirectional_attention":"all"}"""))
                .isInstanceOf(CheckpointException.class).hasMessageContaining("use_bidirectional_attention");
        assertThatThrownBy(() -> parse("""
                {"model_type":"llama","num_hidden_layers":1}"""))
                .isInstanceOf(CheckpointException.class).hasMessageContaining("not a Gemma 4");
        assertThatThrownBy(() -> parse("""
                {"model_type":"gemma4_text","num_hidden_layers":1,"hidden_activation":"silu"}"""))
                .isInstanceOf(CheckpointException.class).hasMessageContaining("silu");
    }

    @Test
    void impossibleSizesAreRefusedNamingTheKeyInsteadOfTruncatedOrDividedByZero() {
        record Case(String json, String key) {}
        var cases = java.util.List.of(
                new Case("\"sliding_window\":0", "'sliding_window' = 0"),
                new Case("\"sliding_window\":-3", "'sliding_window' = -3"),
                new Case("\"vocab_size\":1e12", "'vocab_size' = 1.0E12"),
                new Case("\"vocab_size\":1000000000000", "'vocab_size' = 1000000000000"),
                new Case("\"vocab_size\":2.5", "'vocab_size' = 2.5"),
                new Case("\"num_key_value_heads\":0", "'num_key_value_heads' = 0"),
                new Case("\"hidden_size\":\"128\"", "'hidden_size' = \"128\""),
                new Case("\"max_position_embeddings\":0", "'max_position_embeddings' = 0"),
                new Case("\"per_layer_config\":{\"0\":{\"head_dim\":0}}", "'head_dim' = 0"),
                new Case("\"enable_moe_block\":true,\"num_experts\":4,\"top_k_experts\":8,\"moe_intermediate_size\":16", "top_k_experts=8"));
        for (var c : cases) {
            assertThatThrownBy(() -> parse("{\"model_type\":\"gemma4_text\",\"num_hidden_layers\":2," + c.json() + "}"))
                    .as(c.json()).isInstanceOf(CheckpointException.class)
                    .hasMessageContaining("config.json").hasMessageContaining(c.key());
        }
    }

    @Test
    void maxPositionEmbeddingsIsReadWithTransformersDefault() throws Exception {
        assertThat(parse("{\"model_type\":\"gemma4_text\",\"num_hidden_layers\":2,\"max_position_embeddings\":4096}").maxPositions()).isEqualTo(4096);
        // Gemma4TextConfig's default in transformers 5.17
        assertThat(parse("{\"model_type\":\"gemma4_text\",\"num_hidden_layers\":2}").maxPositions()).isEqualTo(131072);
    }

    @Test
    void ropeTablesMatchTransformersForTheReleasedDims() {
        // spec §6.2: the two table entries where torch's fp32 pow differs from the correctly rounded one
        var sliding = new Rope(RopeSpec.defaultRope(1e4), 256).invFreq();
        assertThat(sliding[111]).isEqualTo((float) 0.0003398208355065435);
        var full = new Rope(RopeSpec.proportional(1e6, 0.25, 1.0), 512).invFreq();
        assertThat(full[29]).isEqualTo((float) 0.20908001065254211);
        assertThat(full).hasSize(256);
        for (int j = 64; j < 256; j++) assertThat(full[j]).isZero(); // dims 64…255 pass through
    }
}
