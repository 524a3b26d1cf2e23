package dev.decodiff.harness.compare;

import java.util.ArrayList;
import java.util.List;

/**
 * What a comparison covered against what the reference claims. Completeness is the reference's claim: a match needs
 * every step and every capture point a complete-marked reference holds compared, and both sides marked complete by
 * their producers. Points only the candidate holds are listed, not a shortfall — a live candidate may capture more
 * than the reference recorded — but steps only the candidate holds are one: they reveal a reference cut short.
 * Points the candidate left out by an explicit user selection (manifest {@code selected_points}) are
 * {@code excluded}: stated in the report, not held against the verdict.
 *
 * @param pointsOnlyInReference points the reference holds that the candidate lacks, not excused by a selection
 * @param pointsOnlyInCandidate points the candidate holds that the reference lacks (not compared; not a shortfall)
 * @param excluded              points left out by a recorded selection, with the side that made it
 * @param gaps                  what either dump says about itself: no completeness mark, absent layers
 */
public record Completeness(int referenceSteps, int candidateSteps, List<String> pointsOnlyInReference,
                           List<String> pointsOnlyInCandidate, List<String> excluded, List<String> gaps) {
    public Completeness {
        pointsOnlyInReference = List.copyOf(pointsOnlyInReference);
        pointsOnlyInCandidate = List.copyOf(pointsOnlyInCandidate);
        excluded = List.copyOf(excluded);
        gaps = List.copyOf(gaps);
    }

    public static Completeness whole(int steps) { return new Completeness(steps, steps, List.of(), List.of(), List.of(), List.of()); }

    public boolean complete() {
        return referenceSteps == candidateSteps && pointsOnlyInReference.isEmpty() && gaps.isEmpty();
    }

    /** Every shortfall, one sentence each, naming the side that has it (points only the candidate holds are none). */
    public List<String> reasons() {
        var out = new ArrayList<String>();
        if (candidateSteps < referenceSteps)
            out.add("the candidate has " + candidateSteps + " of the reference's " + referenceSteps + " steps (steps "
                    + range(candidateSteps, referenceSteps - 1) + " not compared)");
        if (candidateSteps > referenceSteps)
            out.add("the candidate has " + candidateSteps + " steps but the reference only " + referenceSteps + " (steps "
                    + range(referenceSteps, candidateSteps - 1) + " not compared: is the reference cut short?)");
        if (!pointsOnlyInReference.isEmpty())
            out.add("the candidate lacks " + count(pointsOnlyInReference) + " the reference holds: " + abbreviate(pointsOnlyInReference));
        out.addAll(gaps);
        return out;
    }

    private static String range(int a, int b) { return a == b ? Integer.toString(a) : a + "–" + b; }

    private static String count(List<String> points) { return points.size() + (points.size() == 1 ? " point" : " points"); }

    static String abbreviate(List<String> points) {
        int show = 8;
        return points.size() <= show ? String.join(", ", points)
                : String.join(", ", points.subList(0, show)) + ", … (" + (points.size() - show) + " more)";
    }
}
