package dev.decodiff.harness.arch.gemma4.sweep;

import java.util.List;

/**
 * What one schedule gave: every captured row by (step, sequence, position, point), the KV-integrity violations seen
 * on the way, and — when the engine refused an operation — which one and why (the run stops there).
 */
public record ScheduleRun(List<Cell> cells, List<Violation> violations, Refusal refusal, String unsupported, int steps, Thrown thrown) {
    public ScheduleRun(List<Cell> cells, List<Violation> violations, Refusal refusal, String unsupported, int steps) {
        this(cells, violations, refusal, unsupported, steps, null);
    }

    /** The engine threw at this operation (not a refusal it documents): a finding at that step. */
    public record Thrown(int opIndex, String op, int step, String message) {}

    /** A captured row: point's row at this position of this sequence, as computed at this step of the schedule. */
    public record Cell(int step, int seq, int position, String point, float[] data) {}

    /** A KV-integrity rule broken at a step: which rule, where, how much, and what the wrong rows are when known. */
    public record Violation(int step, int seq, int position, String point, String rule, double relL2, String detail) {}

    /** The engine refused the operation at this index of the schedule. */
    public record Refusal(int opIndex, String op, String message) {}

    public static ScheduleRun unsupported(String why) { return new ScheduleRun(List.of(), List.of(), null, why, 0); }
}
