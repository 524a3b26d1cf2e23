package dev.decodiff.harness.ops;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.decodiff.harness.report.Fmt;

import java.util.List;

/** The terminal table and the JSON of `decodiff ops`. */
public final class OpsReport {
    private OpsReport() {}

    public static boolean allPassed(List<OpResult> results) { return results.stream().allMatch(OpResult::passed); }

    public static String terminal(String oracle, double initSeconds, long seed, List<OpResult> results) {
        var sb = new StringBuilder();
        sb.append("decodiff ops: metal kernels against ").append(oracle).append(", seed ").append(seed)
                .append(Fmt.format(" (ND4J started in %.1f s)%n%n", initSeconds));
        int wOp = 9, wKernel = 6, wShape = 5;
        for (var r : results) {
            wKernel = Math.max(wKernel, r.kernel().length());
            wShape = Math.max(wShape, r.shape().codePointCount(0, r.shape().length()));
        }
        sb.append(Fmt.pad("op", wOp)).append("  ").append(Fmt.pad("kernel", wKernel)).append("  ").append(Fmt.pad("shape", wShape))
                .append("     NMSE  threshold     max |Δ|  verdict\n");
        for (var r : results) {
            sb.append(Fmt.pad(r.op(), wOp)).append("  ").append(Fmt.pad(r.kernel(), wKernel)).append("  ").append(Fmt.pad(r.shape(), wShape))
                    .append(Fmt.padLeft(Fmt.rel(r.nmse()), 9)).append(Fmt.padLeft(Fmt.rel(r.threshold()), 11))
                    .append(Fmt.padLeft(Fmt.rel(r.maxAbsErr()), 12)).append("  ").append(r.passed() ? "ok" : "FAIL").append('\n');
        }
        long failed = results.stream().filter(r -> !r.passed()).count();
        sb.append('\n');
        if (failed == 0) sb.append("PASS: all ").append(results.size()).append(" kernel checks within their NMSE thresholds (docs/ops.md).\n");
        else {
            sb.append("FAIL: ").append(failed).append(" of ").append(results.size()).append(" kernel checks exceed their NMSE threshold:");
            results.stream().filter(r -> !r.passed()).forEach(r -> sb.append("\n  ").append(r.op()).append(' ').append(r.shape())
                    .append(": NMSE ").append(Fmt.rel(r.nmse())).append(" > ").append(Fmt.rel(r.threshold())));
            sb.append('\n');
        }
        return sb.toString();
    }

    public static String json(String oracle, double initSeconds, long seed, List<OpResult> results) {
        var m = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
        ObjectNode root = m.createObjectNode();
        root.put("verdict", allPassed(results) ? "pass" : "fail");
        root.put("oracle", oracle);
        root.put("oracle_init_seconds", round(initSeconds));
        root.put("seed", seed);
        root.put("metric", "nmse = sum((ours - oracle)^2) / sum(oracle^2)");
        var ops = root.putArray("ops");
        for (var r : results) {
            var o = ops.addObject();
            o.put("op", r.op());
            o.put("kernel", r.kernel());
            o.put("shape", r.shape());
            if (Double.isFinite(r.nmse())) o.put("nmse", r.nmse()); else o.putNull("nmse");
            o.put("threshold", r.threshold());
            if (Double.isFinite(r.maxAbsErr())) o.put("max_abs_err", r.maxAbsErr()); else o.putNull("max_abs_err");
            o.put("reference_rms", r.refRms());
            o.put("passed", r.passed());
            o.put("seconds", round(r.seconds()));
        }
        root.put("failed", results.stream().filter(r -> !r.passed()).count());
        try {
            return m.writeValueAsString(root);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private static double round(double s) { return Math.round(s * 1000) / 1000.0; }
}
