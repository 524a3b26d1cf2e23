package dev.decodiff.tests;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** bisect judges with compare's tolerances and does not call a lossy KV cache's expected rounding a culprit. */
class BisectVerdictsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static String ref(String c) { return ReferenceCases.repoRoot().resolve("reference-dumps/gemma4-tiny/" + c).toString(); }

    @Test
    void q8_0CacheNoiseIsReportedAsRoundingNotACulprit() throws Exception {
        var r = Cli.run("bisect", ref("short"), "--kv-cache", "q8_0", "--no-ops", "--json");
        assertThat(r.code()).as(r.toString()).isEqualTo(1);
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).as(r.out()).isEqualTo("kv_cache_rounding");
        assertThat(j.get("culprit").isNull()).isTrue();
        assertThat(j.get("conclusion").asText()).contains("exact f32 cache keeps every cell within tolerance").contains("not a bug");
        var text = Cli.run("bisect", ref("short"), "--kv-cache", "q8_0", "--no-ops");
        assertThat(text.out()).contains("KV-CACHE ROUNDING").doesNotContain("CULPRIT");
    }

    @Test
    void aRealFaultUnderAQuantizedCacheIsStillACulprit() throws Exception {
        var r = Cli.run("bisect", ref("short"), "--kv-cache", "q8_0", "--fault", "v-norm-missing", "--no-ops", "--json");
        var j = JSON.readTree(r.out());
        assertThat(j.get("verdict").asText()).as(r.out()).isEqualTo("culprit");
        assertThat(j.get("culprit").get("point").asText()).endsWith("attn.v");
    }

    @Test
    void onABfloat16ReferenceBisectAndCompareAgree() throws Exception {
        var c = Cli.run("compare", ref("long-bf16"), "--json");
        var b = Cli.run("bisect", ref("long-bf16"), "--no-ops", "--json");
        String compareVerdict = JSON.readTree(c.out()).get("verdict").asText();
        assertThat(compareVerdict).as(c.toString()).isEqualTo("match");
        assertThat(JSON.readTree(b.out()).get("verdict").asText()).as(b.toString()).isEqualTo(compareVerdict);
        assertThat(b.code()).isEqualTo(c.code()).isZero();
    }
}
