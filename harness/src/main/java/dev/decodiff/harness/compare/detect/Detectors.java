package dev.decodiff.harness.compare.detect;

import java.util.ArrayList;
import java.util.List;

/**
 * The ordered registry of detectors. Order is precedence: the first detector that applies to the cell's kind and
 * fits explains it; supplements then add their findings. compare uses {@link #COMPARE}; bisect extends it with its
 * model-aware detectors ({@link #extend}).
 */
public final class Detectors {
    private Detectors() {}

    /** compare's detectors, most specific first: they need only the two dumps. */
    public static final List<Detector> COMPARE = List.of(
            new NonFinite(),
            new AllZeros(),
            new ReadWindowLength(),
            new EqualsOtherTensor(),
            new RowsEqualOtherTensor(),
            new UnwrittenRows(),
            new ConstantScale(),
            new ReadWindowShift(),
            new ReadWindowOrder(),
            new SoftcapMissing(),
            new PerVectorScale(),
            new Rotation(),
            new HeadPermutation(),
            new SwappedAxes());

    /** {@code first}, then {@code base}, then {@code last}: a registry extended at both ends. */
    public static List<Detector> extend(List<Detector> first, List<Detector> base, List<Detector> last) {
        var all = new ArrayList<Detector>(first);
        all.addAll(base);
        all.addAll(last);
        return List.copyOf(all);
    }

    /** The first fitting finding of the registry, followed by every supplement's; null when nothing fits. */
    public static Finding explain(List<Detector> registry, DetectorContext ctx) {
        String kind = ctx.kind();
        Finding found = null;
        for (var d : registry) {
            if (d.supplements() || !d.appliesTo(kind)) continue;
            found = d.explain(ctx);
            if (found != null) break;
        }
        for (var d : registry) {
            if (!d.supplements() || !d.appliesTo(kind)) continue;
            var more = d.explain(ctx);
            if (more != null) found = found == null ? more : found.and(more);
        }
        return found;
    }
}
