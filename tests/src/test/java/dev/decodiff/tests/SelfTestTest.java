package dev.decodiff.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.engine.Fault;
import dev.decodiff.engine.Gemma4Config;
import dev.decodiff.engine.LayerSpec;
import dev.decodiff.harness.dump.DumpReader;
import dev.decodiff.harness.compare.detect.Finding;
import dev.decodiff.harness.arch.gemma4.selftest.Gemma4Expectations;
import dev.decodiff.harness.selftest.ExpectedCell;
import dev.decodiff.harness.selftest.ExpectedVariant;
import dev.decodiff.harness.selftest.SelfTest;
import dev.decodiff.harness.selftest.SelfTestReport;
import dev.decodiff.harness.selftest.SelfTestResult;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The bar: `decodiff selftest` localizes every catalog fault on every bundled checkpoint and case where it applies
 * to the cell fixed from the math, with zero false alarms; bisect proves the values == keys story (a k_eq_v layer's values built from rotated keys) in one
 * command; selfcheck catches its three faults with no reference and passes clean checkpoints.
 */
class SelfTestTest {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path root;

    @TempDir
    Path tmp;

    @BeforeAll
    static void home() {
        root = ReferenceCases.repoRoot();
        System.setProperty("decodiff.home", root.toString());
    }


    /** One self-test run (about a minute on two cores) shared by the assertions on its JSON and on its table. */
    static SelfTestResult selftest;

    static synchronized SelfTestResult selftest() {
        // Gemma 4's half; Qwen3.5's catalog has its own class (Qwen35SelfTestTest)
        if (selftest == null) selftest = new SelfTest(SelfTest.Part.GEMMA4).run(root, what -> {});
        return selftest;
    }

    @Test
    void selftestLocalizesEveryFaultWithNoFalseAlarm() throws Exception {
        var result = selftest();
        var j = JSON.readTree(SelfTestReport.json(result));
        var misses = new ArrayList<String>();
        for (var run : j.get("runs")) {
            String status = run.get("status").asText();
            if (!status.equals("localized") && !status.equals("clean") && !status.equals("n-a"))
                misses.add(status + ": " + run.get("fault").asText() + " on " + run.get("checkpoint").asText() + "/" + run.get("case").asText()
                        + ": compare → " + run.get("compare") + ", bisect → " + run.get("bisect") + "; " + run.get("detail").asText());
        }
        for (var s : j.get("selfcheck"))
            if (!s.get("ok").asBoolean()) misses.add("selfcheck " + s.get("fault").asText() + " on " + s.get("checkpoint").asText() + ": " + s.get("status").asText());
        assertThat(misses).as("misses and false alarms").isEmpty();
        assertThat(j.get("localized").asLong()).isEqualTo(j.get("applicable").asLong());
        assertThat(j.get("false_alarms").asLong()).isZero();
        assertThat(j.get("selfcheck_misses").asLong()).isZero();
        assertThat(j.get("verdict").asText()).isEqualTo("pass");
        assertThat(result.passed()).isTrue();

        // Coverage: every bundled checkpoint, both cases, every catalog fault somewhere, and clean runs.
        assertThat(j.get("checkpoints")).hasSize(4);
        for (Fault f : Fault.values()) {
            long localized = 0;
            for (var run : j.get("runs")) if (run.get("fault").asText().equals(f.id()) && run.get("status").asText().equals("localized")) localized++;
            assertThat(localized).as("%s is localized on some checkpoint and case", f.id()).isPositive();
        }
        long clean = 0;
        for (var run : j.get("runs")) if (run.get("fault").asText().equals("clean")) clean++;
        assertThat(clean).as("clean compare runs: 4 checkpoints × short, long").isEqualTo(8);
        assertThat(j.get("applicable").asLong()).isGreaterThanOrEqualTo(60);
        System.out.printf("selftest: %d localized of %d, false alarms %d, %.1fs%n", j.get("localized").asLong(), j.get("applicable").asLong(),
                j.get("false_alarms").asLong(), j.get("seconds").asDouble());
    }

    @Test
    void selftestNamesTheVariantOfEveryFaultItLocalizesAndNoneOnCleanRuns() throws Exception {
        var j = JSON.readTree(SelfTestReport.json(selftest()));
        var naming = j.get("naming");
        var unnamed = new ArrayList<String>();
        for (var run : j.get("runs"))
            if (run.has("variant_expected") && !run.get("variant_expected").isNull() && !run.get("named").asBoolean())
                unnamed.add(run.get("fault").asText() + " on " + run.get("checkpoint").asText() + "/" + run.get("case").asText()
                        + ": expected " + run.get("variant_expected").asText() + ", got " + run.get("variant") + "; " + run.get("detail").asText());
        assertThat(unnamed).as("localized but not named").isEmpty();
        assertThat(naming.get("named").asLong()).isEqualTo(naming.get("applicable").asLong()).isGreaterThanOrEqualTo(60);
        assertThat(naming.get("false_names").asLong()).isZero();
        // every family the catalog switches on is named somewhere: attention scale, mask, activation, norm, rope, cache
        for (String f : List.of("attention-scale-inv-sqrt-d", "prefill-bidirectional", "mlp-silu", "v-norm-missing",
                "decode-position-off-by-one", "sliding-window-off-by-one", "ring-wrap", "attention-softcap-50",
                "sliding-window-minus-two", "q-norm-missing", "k-norm-one-plus"))
            assertThat(naming.get("table").get(f).toString()).as(f).contains("✓").doesNotContain("✗");
        // the margins of the enumerated variants: every op family is measured, and exact GELU is the small one
        var margins = new java.util.HashMap<String, Double>();
        for (var m : j.get("variant_margins"))
            margins.merge(m.get("variant").asText(), m.get("margin").asDouble(), Math::min);
        assertThat(margins.keySet()).anyMatch(v -> v.startsWith("the scores scaled by 1/√d")).anyMatch(v -> v.startsWith("v_norm absent"))
                .anyMatch(v -> v.startsWith("SiLU")).anyMatch(v -> v.startsWith("the sliding window off by +1"));
        assertThat(margins.get("exact (erf) GELU instead of gelu_pytorch_tanh")).isBetween(1.0, 2.0);
        assertThat(margins.get("SiLU instead of gelu_pytorch_tanh")).isGreaterThan(100);
    }

    @Test
    void selftestTableSaysItInOneLine() {
        String table = SelfTestReport.terminal(selftest(), false);
        assertThat(table).contains("k-eq-v-rotated-keys").contains("(clean)").contains("n-a").contains("selfcheck, no reference")
                .containsPattern("PASS {2}\\d+ localized of \\d+, false alarms 0");
        assertThat(table).doesNotContain("✗");
    }

    @Test
    void bisectProvesValuesEqualKeys() throws Exception {
        var ref = root.resolve("reference-dumps/gemma4-tiny/long");
        int layer = firstKEqV("gemma4-tiny");
        Path html = tmp.resolve("bisect.html");
        var r = Cli.run("bisect", ref.toString(), "--fault", "k-eq-v-rotated-keys", "--json", "--html", html.toString());
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("culprit");
        var c = j.get("culprit");
        assertThat(c.get("step").asInt()).isEqualTo(1);
        assertThat(c.get("layer").asInt()).isEqualTo(layer);
        assertThat(c.get("point").asText()).isEqualTo("layers." + layer + ".attn.v_read");
        var healed = new ArrayList<String>();
        j.get("healed_by").forEach(h -> healed.add(h.asText()));
        assertThat(healed).contains("attn.v_read").doesNotContain("attn.q", "attn.k", "attn.v", "attn.k_read");
        assertThat(j.get("diagnosis").asText()).contains("values read back from the cache are the keys")
                .contains("layers." + layer + ".attn.k_read");
        // Layers before the culprit are clean on their own input; the first one after it only inherits.
        var layers = j.get("layers");
        for (int i = 0; i < layer; i++) assertThat(layers.get(i).get("status").asText()).isEqualTo("clean");
        assertThat(layers.get(layer).get("status").asText()).isEqualTo("culprit");
        assertThat(layers.get(layer + 1).get("status").asText()).isEqualTo("inherits");
        assertThat(j.get("cache_verdict").asText()).contains("not the cause");
        // The culprit is confirmed, so the kernels are checked against ND4J: they are right, the composition is not.
        assertThat(j.get("op_level").get("checked").asBoolean()).isTrue();
        assertThat(j.get("op_level").get("failed").asInt()).isZero();
        assertThat(j.get("op_level").get("checks").asInt()).isPositive();
        assertThat(Files.readString(html)).contains("CULPRIT").contains("layers." + layer + ".attn.v_read").contains("Substitution inside layer");

        var t = Cli.run("bisect", ref.toString(), "--fault", "k-eq-v-rotated-keys", "--no-ops");
        assertThat(t.code()).isEqualTo(1);
        assertThat(t.out()).doesNotContain("Op level");
        assertThat(t.out()).contains("CULPRIT").contains("✓ heals").contains("Cache transplant over steps").contains("inherits");
    }

    @Test
    void bisectOfACleanEngineHasNothingToDo() throws Exception {
        var r = Cli.run("bisect", root.resolve("reference-dumps/gemma4-tiny/short").toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("match");
        assertThat(j.get("culprit").isNull()).isTrue();
        assertThat(j.get("healed_by")).isEmpty();
    }

    @Test
    void bisectCarriesTheCacheHistoryAcrossStepsForARingThatWrapsWrongly() throws Exception {
        // short case: prompt 7, W = 8: position 8 is written one slot too far at step 2, read back at step 3.
        var r = Cli.run("bisect", root.resolve("reference-dumps/gemma4-tiny/short").toString(), "--fault", "ring-wrap", "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = r.json();
        assertThat(j.get("culprit").get("step").asInt()).isEqualTo(3);
        assertThat(j.get("culprit").get("point").asText()).isEqualTo("layers.0.attn.k_read");
        assertThat(j.get("transplant")).hasSize(4);
        assertThat(j.get("cache_verdict").asText()).contains("stores or hands back its rows wrongly");
        var healed = new ArrayList<String>();
        j.get("healed_by").forEach(h -> healed.add(h.asText()));
        assertThat(healed).contains("attn.k_read+attn.v_read");
    }

    @Test
    void bisectRefusesBadInput() {
        var r = Cli.run("bisect", tmp.resolve("nope").toString());
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err()).contains("nope");
        assertThat(Cli.run("bisect", "--fault", "no-such-fault").code()).isEqualTo(2);
    }

    @ParameterizedTest
    @ValueSource(strings = {"gemma4-tiny", "gemma4-tiny-ple", "gemma4-tiny-moe"})
    void selfcheckPassesEveryCleanCheckpoint(String name) throws Exception {
        var r = Cli.run("selfcheck", "--model", root.resolve("checkpoints").resolve(name).toString(), "--json");
        assertThat(r.code()).as(r.toString()).isZero();
        var j = r.json();
        assertThat(j.get("verdict").asText()).isEqualTo("pass");
        assertThat(j.get("checks").size()).isGreaterThanOrEqualTo(9);
    }

    @Test
    void selfcheckCatchesItsThreeFaultsWithNoReference() throws Exception {
        var tiny = root.resolve("checkpoints/gemma4-tiny").toString();
        int layer = firstKEqV("gemma4-tiny");
        var kv = Cli.run("selfcheck", "--model", tiny, "--fault", "k-eq-v-rotated-keys", "--json").json();
        assertThat(kv.get("verdict").asText()).isEqualTo("fail");
        assertThat(failing(kv, "cache-reads-match-writes").get("point").asText()).isEqualTo("layers." + layer + ".attn.v_read");
        assertThat(failing(kv, "cache-reads-match-writes").get("detail").asText()).contains("they are the keys");
        assertThat(failing(kv, "decode-vs-prefill")).isNotNull();

        var ring = Cli.run("selfcheck", "--model", tiny, "--fault", "ring-wrap", "--json");
        assertThat(ring.code()).isEqualTo(1);
        var rj = ring.json();
        assertThat(failing(rj, "cache-reads-match-writes").get("point").asText()).isEqualTo("layers.0.attn.k_read");
        assertThat(failing(rj, "cache-reads-match-writes").get("detail").asText()).contains("wrong cache slots");

        var rec = Cli.run("selfcheck", "--model", tiny, "--fault", "decode-recompute");
        assertThat(rec.code()).isEqualTo(1);
        assertThat(rec.out()).contains("positions-per-decode-step").contains("✗ FAIL").contains("re-reads the sequence");
    }

    static JsonNode failing(JsonNode j, String check) {
        for (var c : j.get("checks")) if (c.get("check").asText().equals(check) && !c.get("passed").asBoolean()) return c;
        throw new AssertionError(check + " did not fail: " + j.toPrettyString());
    }

    @Test
    void expectedCellsComeFromTheConfigAndManifestAlone() {
        Gemma4Config ple;
        var cfg = Gemma4Config.read(root.resolve("checkpoints/gemma4-tiny/config.json"));
        var shortCase = DumpReader.open(root.resolve("reference-dumps/gemma4-tiny/short")).manifest();
        var longCase = DumpReader.open(root.resolve("reference-dumps/gemma4-tiny/long")).manifest();
        float[] ones = new float[cfg.numLayers()];
        java.util.Arrays.fill(ones, 1f);
        // short: prompt 7 (positions 0–6), W = 8: position 8 is fed at step 2, first read from the ring at step 3.
        assertCell(Gemma4Expectations.cell(Fault.SLIDING_WINDOW_OFF_BY_ONE, cfg, ones, shortCase), 2, 0, "layers.0.attn.k_read");
        assertCell(Gemma4Expectations.cell(Fault.RING_WRAP, cfg, ones, shortCase), 3, 0, "layers.0.attn.k_read");
        // long: prompt 23 already reaches the window at step 0; the ring is first read at step 1.
        assertCell(Gemma4Expectations.cell(Fault.SLIDING_WINDOW_OFF_BY_ONE, cfg, ones, longCase), 0, 0, "layers.0.attn.k_read");
        assertCell(Gemma4Expectations.cell(Fault.RING_WRAP, cfg, ones, longCase), 1, 0, "layers.0.attn.k_read");
        assertCell(Gemma4Expectations.cell(Fault.K_EQ_V_ROTATED_KEYS, cfg, ones, longCase), 1, 2, "layers.2.attn.v_read");
        assertCell(Gemma4Expectations.cell(Fault.ROPE_PROPORTIONAL_AS_PREFIX, cfg, ones, longCase), 0, 2, "layers.2.attn.q");
        assertCell(Gemma4Expectations.cell(Fault.GQA_MODULO, cfg, ones, longCase), 0, 0, "layers.0.attn.out");
        // No k_eq_v / no shared layers / every scalar 1: not applicable, with the reason.
        assertThat(Gemma4Expectations.cell(Fault.KV_SHARED_FIRST_SOURCE, cfg, ones, longCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        assertThat(Gemma4Expectations.cell(Fault.LAYER_SCALAR_IGNORED, cfg, ones, longCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        ple = Gemma4Config.read(root.resolve("checkpoints/gemma4-tiny-ple/config.json"));
        assertThat(Gemma4Expectations.cell(Fault.K_EQ_V_ROTATED_KEYS, ple, ones, longCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        assertCell(Gemma4Expectations.cell(Fault.KV_SHARED_FIRST_SOURCE, ple, ones, longCase), 0, 4, "layers.4.attn.k_read");
        assertThat(Gemma4Expectations.cell(Fault.DECODE_RECOMPUTE, cfg, ones, longCase)).isInstanceOf(ExpectedCell.NoNumericDivergence.class);
        // The op variants: the first op that computes them wrongly is in layer 0 at step 0.
        assertCell(Gemma4Expectations.cell(Fault.ATTENTION_SCALE_INV_SQRT_D, cfg, ones, shortCase), 0, 0, "layers.0.attn.out");
        assertCell(Gemma4Expectations.cell(Fault.PREFILL_BIDIRECTIONAL, cfg, ones, shortCase), 0, 0, "layers.0.attn.out");
        assertCell(Gemma4Expectations.cell(Fault.MLP_GELU_ERF, cfg, ones, longCase), 0, 0, "layers.0.mlp.out");
        assertCell(Gemma4Expectations.cell(Fault.ATTENTION_SOFTCAP_50, cfg, ones, shortCase), 0, 0, "layers.0.attn.out");
        assertCell(Gemma4Expectations.cell(Fault.Q_NORM_MISSING, cfg, ones, shortCase), 0, 0, "layers.0.attn.q");
        assertCell(Gemma4Expectations.cell(Fault.K_NORM_ONE_PLUS, cfg, ones, shortCase), 0, 0, "layers.0.attn.k");
        // short: the prompt's last position 6 is W−2 already, so a window of W−2 = 6 keys drops position 0 at step 0.
        assertCell(Gemma4Expectations.cell(Fault.SLIDING_WINDOW_MINUS_TWO, cfg, ones, shortCase), 0, 0, "layers.0.attn.k_read");
        // the rewiring faults: the first k_eq_v layer's value; MoE and per-layer-input faults only where the config has them
        assertCell(Gemma4Expectations.cell(Fault.VALUE_AFTER_K_NORM, cfg, ones, shortCase), 0, 2, "layers.2.attn.v");
        assertThat(Gemma4Expectations.cell(Fault.VALUE_AFTER_K_NORM, ple, ones, shortCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        assertThat(Gemma4Expectations.cell(Fault.MOE_ROUTER_UNNORMED, cfg, ones, shortCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        var moe = Gemma4Config.read(root.resolve("checkpoints/gemma4-tiny-moe/config.json"));
        assertCell(Gemma4Expectations.cell(Fault.MOE_ROUTING_NOT_RENORMALISED, moe, ones, shortCase), 0, 0, "layers.0.moe.out");
        assertThat(Gemma4Expectations.cell(Fault.PLE_COMBINE_MISSING, cfg, ones, shortCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        assertThat(((ExpectedCell.Cell) Gemma4Expectations.cell(Fault.PLE_COMBINE_MISSING, ple, ones, shortCase)).point()).isEqualTo("ple");
        float[] scalars = ones.clone();
        scalars[0] = 0.5f;
        assertThat(Gemma4Expectations.cell(Fault.LAYER_SCALAR_BEFORE_PLE, ple, ones, shortCase)).isInstanceOf(ExpectedCell.NotApplicable.class);
        assertCell(Gemma4Expectations.cell(Fault.LAYER_SCALAR_BEFORE_PLE, ple, scalars, shortCase), 0, 0, "layers.0.out");
    }

    @Test
    void expectedVariantsComeFromTheFaultAndTheConfig() {
        var cfg = Gemma4Config.read(root.resolve("checkpoints/gemma4-tiny/config.json"));
        var ple = Gemma4Config.read(root.resolve("checkpoints/gemma4-tiny-ple/config.json"));
        var longCase = DumpReader.open(root.resolve("reference-dumps/gemma4-tiny/long")).manifest();
        float[] ones = new float[ple.numLayers()];
        java.util.Arrays.fill(ones, 1f);
        // d of layer 0 from config.json: head_dim of a sliding layer
        int d = cfg.layer(0).headDim();
        assertThat(Gemma4Expectations.variant(Fault.ATTENTION_SCALE_INV_SQRT_D, cfg, null).name()).isEqualTo("the scores scaled by 1/√d (d = " + d + ")");
        // ple: layer 4 shares layer 3's cache; the fault makes it read the first sliding layer, 0
        var shared = Gemma4Expectations.variant(Fault.KV_SHARED_FIRST_SOURCE, ple, Gemma4Expectations.cell(Fault.KV_SHARED_FIRST_SOURCE, ple, ones, longCase));
        assertThat(shared).isEqualTo(new ExpectedVariant("kv source", "layer 4 reads layer 0's cache"));
        assertThat(Gemma4Expectations.variant(Fault.DECODE_RECOMPUTE, cfg, null)).isNull();
        assertThat(new ExpectedVariant("attention", "no causal mask in prefill")
                .matches(new Finding.Variant("attention", "no causal mask in prefill (prompt rows also see the later prompt positions)"))).isTrue();
        assertThat(new ExpectedVariant("attention", "no causal mask in prefill").matches(new Finding.Variant("attention", "no mask at all"))).isFalse();
    }

    static void assertCell(ExpectedCell e, int step, int layer, String point) {
        assertThat(e).isInstanceOf(ExpectedCell.Cell.class);
        var c = (ExpectedCell.Cell) e;
        assertThat(c.step()).as("step of %s", c).isEqualTo(step);
        assertThat(c.layer()).as("layer of %s", c).isEqualTo(layer);
        assertThat(c.point()).as("point of %s", c).isEqualTo(point);
    }

    static int firstKEqV(String checkpoint) {
        var cfg = Gemma4Config.read(root.resolve("checkpoints").resolve(checkpoint).resolve("config.json"));
        return cfg.layers().stream().filter(LayerSpec::kEqV).findFirst().orElseThrow().index();
    }
}
