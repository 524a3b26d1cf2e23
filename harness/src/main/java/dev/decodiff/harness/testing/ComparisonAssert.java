package dev.decodiff.harness.testing;

import dev.decodiff.harness.compare.ComparisonResult;
import dev.decodiff.harness.report.VerdictText;
import org.assertj.core.api.AbstractAssert;

/** AssertJ assertions on a finished comparison (e.g. of two dump folders). */
public final class ComparisonAssert extends AbstractAssert<ComparisonAssert, ComparisonResult> {
    ComparisonAssert(ComparisonResult actual) { super(actual, ComparisonAssert.class); }

    public ComparisonAssert isMatch() {
        isNotNull();
        if (!actual.matches()) failWithMessage("%s", VerdictText.paragraph(actual));
        return this;
    }

    public ComparisonAssert firstDivergesAt(int step, String point) {
        isNotNull();
        var fd = actual.firstDivergence();
        if (fd == null || fd.step() != step || !fd.point().equals(point))
            failWithMessage("expected the first divergence at step %d, %s, but: %s", step, point, VerdictText.paragraph(actual));
        return this;
    }

    public ComparisonAssert hasDiagnosisContaining(String text) {
        isNotNull();
        var fd = actual.firstDivergence();
        if (fd == null || fd.diagnosis() == null || !fd.diagnosis().contains(text))
            failWithMessage("expected a diagnosis containing \"%s\", but: %s", text, VerdictText.paragraph(actual));
        return this;
    }
}
