package dev.decodiff.harness.compare;

/**
 * The greedy token after one step on both sides. A flip where the reference's top-1/top-2 margin is below the
 * near-tie threshold is a near-tie (fp noise can legitimately decide it), not a failure.
 */
public record TokenAgreement(int step, Integer reference, Integer candidate, Double referenceMargin, Status status) {
    public enum Status { AGREE, NEAR_TIE, FLIP, UNKNOWN }

    public static TokenAgreement of(int step, Integer reference, Integer candidate, Double referenceMargin, double nearTie) {
        Status st;
        if (reference == null || candidate == null) st = Status.UNKNOWN;
        else if (reference.equals(candidate)) st = Status.AGREE;
        else if (referenceMargin != null && referenceMargin < nearTie) st = Status.NEAR_TIE;
        else st = Status.FLIP;
        return new TokenAgreement(step, reference, candidate, referenceMargin, st);
    }

    public boolean failed() { return status == Status.FLIP; }
}
