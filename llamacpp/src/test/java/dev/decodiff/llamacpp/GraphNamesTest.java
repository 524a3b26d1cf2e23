package dev.decodiff.llamacpp;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The graph-name table against the Gemma 4 graph source of the pinned release (the cb(...) names it emits). */
class GraphNamesTest {
    @Test
    void graphNamesSplitIntoBaseAndLayer() {
        assertThat(GraphNames.parse("Qcur_pos-12")).isEqualTo(new GraphNames.Parsed("Qcur_pos", 12));
        assertThat(GraphNames.parse("result_norm")).isEqualTo(new GraphNames.Parsed("result_norm", -1));
        assertThat(GraphNames.parse("Kcur_pos-0 (view)")).isEqualTo(new GraphNames.Parsed("Kcur_pos-0 (view)", -1));
        assertThat(GraphNames.entry(GraphNames.parse("Qcur_pos-3")).map(e -> GraphNames.point(e, 3))).contains("layers.3.attn.q");
        assertThat(GraphNames.entry(GraphNames.parse("Qcur_pos"))).isEmpty();
    }

    @Test
    void everyNameInTheTableIsEmittedByTheGraphSourceOfThePinnedRelease() throws Exception {
        var home = dev.decodiff.llamacpp.ffi.LlamaCppTestSupport.requireHome();
        String gemma4 = Files.readString(home.sources().resolve("src/models/gemma4.cpp"));
        String graph = Files.readString(home.sources().resolve("src/llama-graph.cpp"));
        for (var e : GraphNames.ENTRIES)
            assertThat(gemma4.contains("\"" + e.graphName() + "\"") || graph.contains("\"" + e.graphName() + "\""))
                    .as("cb(…, \"%s\", …) in gemma4.cpp or llama-graph.cpp", e.graphName()).isTrue();
        for (String n : new String[]{GraphNames.KQ, GraphNames.KQ_SOFT_MAX, GraphNames.KQV})
            assertThat(graph).contains("cb(" + (n.equals(GraphNames.KQV) ? "kqv" : "kq") + ", \"" + n + "\", il)");
    }
}
