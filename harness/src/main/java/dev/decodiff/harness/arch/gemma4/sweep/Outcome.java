package dev.decodiff.harness.arch.gemma4.sweep;

/** How one scenario came out: its schedules agree, disagree (or break a KV rule), the engine refused, or it does not apply. */
public sealed interface Outcome {
    String word();

    /** Every schedule agrees with the first on every shared cell and no KV rule broke. */
    record Pass(int cells, double worstRelL2, String precision) implements Outcome {
        public Pass(int cells, double worstRelL2) { this(cells, worstRelL2, null); }

        public String word() { return "pass"; }
    }

    /**
     * The first cell, in causal order of the schedule that departs (step, then layer order, then position), where it
     * leaves the first schedule's row, or the first KV rule broken.
     *
     * @param schedule  index of the schedule that departs (0 for a KV rule broken in the plain one)
     * @param reference the first schedule's row at that cell (null for a KV rule)
     */
    record Fail(int schedule, int step, int seq, int position, String point, double relL2, double tolerance, String kind,
                String detail, int failedCells, int cells, float[] reference, float[] candidate) implements Outcome {
        public String word() { return "fail"; }

        public String cell() {
            return seq < 0 ? "step " + step + " (the engine threw)" : "step " + step + ", sequence " + seq + ", position " + position + ", " + point;
        }
    }

    /** The engine refused an operation; {@code byDesign}: the operation leaves what the cache can honour. */
    record Refused(String op, String message, boolean byDesign) implements Outcome {
        public String word() { return byDesign ? "refused-as-designed" : "refused"; }
    }

    record NotApplicable(String why) implements Outcome {
        public String word() { return "n/a"; }
    }

    default boolean failed() { return this instanceof Fail; }
}
