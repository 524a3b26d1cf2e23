package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.decodiff.harness.TinyCheckpoint;
import dev.decodiff.metal.NativeKernels;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static dev.decodiff.harness.cli.CliTest.run;
import static org.assertj.core.api.Assertions.assertThat;

/** Every dump says how it was made, compare shows both sides' producers, and a faulted or lossy dump is no reference. */
class ProvenanceTest {
    @TempDir
    static Path tmp;
    static Path model, clean, faulted, lossy, roundedMatmul;

    @BeforeAll
    static void dumps() {
        model = TinyCheckpoint.write(tmp.resolve("checkpoints/tiny"));
        clean = tmp.resolve("clean");
        faulted = tmp.resolve("faulted");
        lossy = tmp.resolve("lossy");
        roundedMatmul = tmp.resolve("matmul-bf16");
        String tokens = "2,5,9,13,17,21,25";
        for (var args : new String[][]{
                {"dump", "--model", model.toString(), "--tokens", tokens, "-n", "6", "--out", clean.toString()},
                {"dump", "--model", model.toString(), "--tokens", tokens, "-n", "6", "--out", faulted.toString(), "--fault", "ring-wrap"},
                {"dump", "--model", model.toString(), "--tokens", tokens, "-n", "6", "--out", lossy.toString(), "--kv-cache", "bf16,bf16"},
                {"dump", "--model", model.toString(), "--tokens", tokens, "-n", "6", "--out", roundedMatmul.toString(), "--matmul", "bf16"}}) {
            var r = run(args);
            assertThat(r.code()).as(r.err()).isZero();
        }
    }

    static JsonNode producer(Path dump) throws Exception {
        return new ObjectMapper().readTree(Files.readString(dump.resolve("manifest.json"))).get("producer");
    }

    @Test
    void aDumpRecordsEngineVersionKernelsKvTypesFaultsAndItsCommand() throws Exception {
        var p = producer(faulted);
        assertThat(p.get("name").asText()).isEqualTo("decodiff");
        assertThat(p.get("version").asText()).isNotBlank();
        assertThat(p.get("engine").asText()).isEqualTo("decodiff-java");
        assertThat(p.get("kernels").asText()).isEqualTo(NativeKernels.status());
        assertThat(p.get("kv_cache").get("keys").asText()).isEqualTo("f32");
        assertThat(p.get("faults").get(0).asText()).isEqualTo("ring-wrap");
        assertThat(p.get("options").toString()).contains("\"--fault\"", "\"ring-wrap\"", "\"-n\"", "\"6\"");
        var q = producer(lossy);
        assertThat(q.get("kv_cache").get("keys").asText()).isEqualTo("bf16");
        assertThat(q.get("kv_cache").get("values").asText()).isEqualTo("bf16");
        assertThat(q.get("faults")).isEmpty();
        assertThat(producer(clean).get("faults")).isEmpty();
        assertThat(producer(clean).get("matmul").asText()).isEqualTo("fp32");
        assertThat(producer(roundedMatmul).get("matmul").asText()).isEqualTo("bf16");
    }

    @Test
    void aFaultedOrLossyDumpIsRefusedAsAReferenceUnlessAllowed() {
        for (Path bad : new Path[]{faulted, lossy, roundedMatmul}) {
            var r = run("compare", bad.toString(), clean.toString());
            assertThat(r.code()).as(r.out() + r.err()).isEqualTo(2);
            assertThat(r.out()).doesNotContain("MATCH");
            assertThat(r.err().strip().lines().toList()).hasSize(1);
            assertThat(r.err()).contains(bad.resolve("manifest.json").toString()).contains("--allow-faulted-reference");
        }
        assertThat(run("compare", faulted.toString(), clean.toString()).err()).contains("catalog faults switched on (ring-wrap)");
        assertThat(run("compare", lossy.toString(), clean.toString()).err()).contains("lossy KV cache (keys bf16, values bf16)");
        assertThat(run("compare", roundedMatmul.toString(), clean.toString()).err()).contains("bf16 matrix products (--matmul bf16)");
        var allowed = run("compare", faulted.toString(), clean.toString(), "--allow-faulted-reference");
        assertThat(allowed.code()).as(allowed.err()).isNotEqualTo(2);
        // the same dumps are fine as candidates
        assertThat(run("compare", clean.toString(), lossy.toString()).code()).isNotEqualTo(2);
    }

    @Test
    void compareShowsBothSidesProducers() throws Exception {
        var r = run("compare", clean.toString(), faulted.toString());
        var lines = r.out().lines().toList();
        assertThat(lines).anySatisfy(l -> assertThat(l).startsWith("  reference  " + clean).contains("decodiff").contains("KV cache f32/f32")
                .doesNotContain("faults"));
        int cand = lines.indexOf("  candidate  " + faulted);
        assertThat(cand).as(r.out()).isPositive();
        assertThat(lines.get(cand + 1)).startsWith("             by decodiff").contains("faults ring-wrap").contains("kernels " + NativeKernels.status());
        Path html = tmp.resolve("provenance.html");
        run("compare", clean.toString(), faulted.toString(), "--html", html.toString());
        assertThat(Files.readString(html)).contains("faults ring-wrap").contains("kernels " + NativeKernels.status());
        var j = new ObjectMapper().readTree(run("compare", clean.toString(), lossy.toString(), "--json").out());
        assertThat(j.get("producers").get("candidate").get("kv_cache").get("values").asText()).isEqualTo("bf16");
        assertThat(j.get("producers").get("reference").get("engine").asText()).isEqualTo("decodiff-java");
    }

    @Test
    void aKvTypeThatCannotHoldTheModelsRowsIsBadInputNotACrash() {
        var r = run("dump", "--model", model.toString(), "--tokens", "2,5,9", "-n", "2", "--out", tmp.resolve("q8").toString(), "--kv-cache", "q8_0");
        assertThat(r.code()).isEqualTo(2);
        assertThat(r.err().strip().lines().toList()).hasSize(1);
        assertThat(r.err()).contains(model.toString()).contains("--kv-cache q8_0 stores rows in blocks of 32").doesNotContain("internal error");
        var c = run("compare", clean.toString(), "--model", model.toString(), "--kv-cache", "q4_0");
        assertThat(c.code()).isEqualTo(2);
        assertThat(c.err()).contains("--kv-cache q4_0 stores rows in blocks of 32");
    }
}
