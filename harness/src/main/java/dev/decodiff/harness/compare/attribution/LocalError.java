package dev.decodiff.harness.compare.attribution;

/**
 * What one op added to the candidate's error at one cell: its output recomputed exactly from the candidate's own
 * inputs, against the candidate's output (rel L2 = {@code local}); when that is over fp32 noise, the precision
 * hypothesis that reproduces the candidate best ({@code explanation}, leaving {@code leftover}).
 *
 * @param from        what the op was recomputed from ("layers.1.out", "the previous step's k_read and this step's k")
 * @param granularity null when the op itself was recomputed; otherwise why a coarser unit was (the whole layer)
 */
public record LocalError(int step, String point, Status status, double local, double tolerance, String explanation,
                         double leftover, String from, String granularity) {

    public enum Status {
        /** The op reproduces the candidate to fp32 noise: any error of this cell came from upstream. */
        EXACT,
        /** The op's error is reproduced to fp32 noise by a named precision hypothesis. */
        PRECISION,
        /** No precision hypothesis reproduces it: the op itself computes something else. */
        UNEXPLAINED,
        /** The candidate lacks an input of this op, so its own contribution could not be measured. */
        UNATTRIBUTED
    }

    public static LocalError unattributed(int step, String point, double tolerance, String why) {
        return new LocalError(step, point, Status.UNATTRIBUTED, Double.NaN, tolerance, null, Double.NaN, why, null);
    }

    /** Whether this cell's own op is the (or a) finding: its error is neither noise nor explained precision. */
    public boolean unexplained() { return status == Status.UNEXPLAINED; }
}
