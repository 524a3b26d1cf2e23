package dev.decodiff.harness.compare.attribution;

/**
 * What one op added to one side's error at one cell: its output recomputed exactly from that side's own inputs, against
 * that side's output (rel L2 = {@code local}); when that is over fp32 noise, the precision hypothesis that reproduces it
 * best ({@code explanation}, leaving {@code leftover}).
 *
 * @param from        what the op was recomputed from ("layers.1.out", "the previous step's k_read and this step's k")
 * @param granularity null when the op itself was recomputed; otherwise why a coarser unit was (the whole layer)
 * @param floor       the detection floor: the largest local error the precision class of {@code explanation} produces
 *                    at this op (sampled, times a margin), so the smallest bug this op can tell from that rounding;
 *                    NaN where no envelope was needed (the op exact, or a hypothesis reproduced it to fp32 noise)
 * @param envelope    the cell is precision because its local error lies inside that envelope, not because a hypothesis
 *                    reproduced it: a bug smaller than {@code floor} here would look the same
 */
public record LocalError(int step, String point, Status status, double local, double tolerance, String explanation,
                         double leftover, String from, String granularity, double floor, boolean envelope) {

    public enum Status {
        /** The op reproduces the side's tensor to fp32 noise: any error of this cell came from upstream. */
        EXACT,
        /** The op's error is reproduced to fp32 noise by a named precision hypothesis, or lies inside its envelope. */
        PRECISION,
        /** No precision hypothesis reproduces it: the op itself computes something else. */
        UNEXPLAINED,
        /** The side lacks an input of this op, so its own contribution could not be measured. */
        UNATTRIBUTED
    }

    public LocalError(int step, String point, Status status, double local, double tolerance, String explanation, double leftover,
                      String from, String granularity) {
        this(step, point, status, local, tolerance, explanation, leftover, from, granularity, Double.NaN, false);
    }

    public static LocalError unattributed(int step, String point, double tolerance, String why) {
        return new LocalError(step, point, Status.UNATTRIBUTED, Double.NaN, tolerance, null, Double.NaN, why, null);
    }

    /** Whether this cell's own op is the (or a) finding: its error is neither noise nor explained precision. */
    public boolean unexplained() { return status == Status.UNEXPLAINED; }

    /** Whether the op's error was measured and accounted for (exact, or a named precision effect). */
    public boolean accounted() { return status == Status.EXACT || status == Status.PRECISION; }
}
