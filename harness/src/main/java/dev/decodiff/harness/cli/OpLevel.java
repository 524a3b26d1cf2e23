package dev.decodiff.harness.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.ops.KernelChecks;
import dev.decodiff.harness.report.Fmt;
import dev.decodiff.harness.ops.OpResult;
import dev.decodiff.harness.ops.OracleLoader;
import dev.decodiff.harness.ops.OracleUnavailableException;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The op level of bisect: once a layer is confirmed wrong on the reference's own input, every kernel the layer
 * runs is checked against ND4J. All passing means the bug is in how the engine composes correct kernels.
 */
record OpLevel(List<OpResult> results, String unavailable) {

    static OpLevel check() {
        try {
            var oracle = OracleLoader.nd4j();
            return new OpLevel(KernelChecks.run(oracle, KernelChecks.DEFAULT_SEED, Set.of(), Map.of(), null), null);
        } catch (OracleUnavailableException e) {
            return new OpLevel(List.of(), e.getMessage());
        }
    }

    long failed() { return results.stream().filter(r -> !r.passed()).count(); }

    String verdict() {
        if (unavailable != null) return "not checked: " + dev.decodiff.harness.BadInputException.oneLine(unavailable);
        if (failed() == 0)
            return "all " + results.size() + " kernel checks agree with ND4J (float64): the kernels are right, the culprit is in how the engine uses them";
        return failed() + " of " + results.size() + " kernel checks disagree with ND4J: "
                + String.join(", ", results.stream().filter(r -> !r.passed()).map(r -> r.op() + " (" + r.shape() + ", NMSE " + Fmt.format("%.2g", r.nmse()) + ")").toList())
                + " — run `decodiff ops` for the table";
    }

    String terminal() { return "\nOp level (metal kernels vs ND4J)\n  " + verdict() + "\n"; }

    static String addTo(String bisectJson, OpLevel level) {
        var json = new ObjectMapper();
        try {
            var root = (ObjectNode) json.readTree(bisectJson);
            var node = root.putObject("op_level");
            node.put("checked", level.unavailable == null);
            node.put("checks", level.results.size());
            node.put("failed", level.failed());
            node.put("verdict", level.verdict());
            return json.writerWithDefaultPrettyPrinter().writeValueAsString(root);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
