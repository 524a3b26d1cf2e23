package dev.decodiff.harness.selftest;

import dev.decodiff.engine.Fault;
import dev.decodiff.harness.arch.gemma4.bisect.VariantMargins;
import dev.decodiff.harness.compare.detect.Finding;

import java.util.List;

/**
 * What the self-test found: per (fault or clean, checkpoint, case) whether compare and bisect localized the fault to its
 * expected cell (or stayed quiet on a clean run), and per (fault or clean, checkpoint) whether the reference-free
 * selfcheck raised an alarm.
 */
public record SelfTestResult(List<String> checkpoints, List<Outcome> outcomes, List<SelfCheckOutcome> selfChecks,
                             List<VariantMargin> margins, double seconds, List<String> catalogCheckpoints, List<CatalogOutcome> catalog) {

    /**
     * One run of another architecture's catalog (Qwen3.5, the Llama family): {@code fault} null = the clean engine. {@code localized}:
     * compare's first divergence is the expected cell (for a case that cannot show the fault: compare matches; for the
     * restore fault: selfcheck's prefix-reuse fails at its cell); {@code named}: bisect named the fault itself by replay
     * (on a clean run: named nothing); {@code proved}: a substitution at the culprit healed what it broke (null where
     * bisect did not run, or nothing downstream was over tolerance).
     */
    public record CatalogOutcome(String architecture, String fault, String checkpoint, String caseName, ExpectedCell expected,
                                 String compareGot, String namedFault, Boolean proved, boolean localized, boolean named,
                                 String detail, double seconds) {
        public boolean clean() { return fault == null; }

        public boolean applicable() { return expected instanceof ExpectedCell.Cell || expected instanceof ExpectedCell.SelfCheckCell; }

        /** Runs whose fault bisect must name: localized at a cell by compare. */
        public boolean namingRun() { return expected instanceof ExpectedCell.Cell; }

        public boolean ok() { return localized && named; }
    }

    public List<CatalogOutcome> catalogMisses() { return catalog.stream().filter(o -> !o.ok()).toList(); }

    /** An enumerated op variant's margin on one checkpoint's first layer (see {@code VariantMargins}). */
    public record VariantMargin(String checkpoint, VariantMargins.Margin margin) {}

    /**
     * One run. {@code fault} null = the clean engine. {@code compareGot}/{@code bisectGot} say what each found ("step 1,
     * layers.2.attn.v_read", "match", …); {@code ok} = localized at the expected cell, or no alarm on a clean run.
     */
    public record Outcome(Fault fault, String checkpoint, String caseName, ExpectedCell expected, String compareGot,
                          String bisectGot, boolean ok, String detail, double seconds, Naming naming) {
        public Outcome(Fault fault, String checkpoint, String caseName, ExpectedCell expected, String compareGot,
                       String bisectGot, boolean ok, String detail, double seconds) {
            this(fault, checkpoint, caseName, expected, compareGot, bisectGot, ok, detail, seconds, null);
        }

        public boolean applicable() { return !(expected instanceof ExpectedCell.NotApplicable); }

        public boolean clean() { return fault == null; }

        /** Localized at the expected cell AND the expected variant named. */
        public boolean named() { return ok && naming != null && naming.expected() != null && naming.expected().matches(naming.found()); }

        /** A variant was named, and it is not the expected one (on a clean run: any variant named at all). */
        public boolean falseName() {
            if (naming == null || naming.found() == null) return false;
            return naming.expected() == null || !naming.expected().matches(naming.found());
        }
    }

    /**
     * What the explanation side of one run shows: the variant expected (null on clean runs), the variant bisect (or
     * compare, on a clean run) named, and the margin — the first divergent cell's rel L2 over its tolerance.
     */
    public record Naming(ExpectedVariant expected, Finding.Variant found, double relL2, double tolerance) {
        public double margin() { return relL2 / tolerance; }
    }

    /** Runs with a fault whose variant bisect must name (second table). */
    public List<Outcome> namingRuns() {
        return outcomes.stream().filter(o -> !o.clean() && o.applicable() && o.naming() != null && o.naming().expected() != null).toList();
    }

    public long named() { return namingRuns().stream().filter(Outcome::named).count(); }

    /** Variants named wrongly on faulty runs plus any variant named on a clean run. */
    public long falseNames() { return outcomes.stream().filter(Outcome::falseName).count(); }

    /**
     * selfcheck (every reference-free check) on one checkpoint with one fault (null = clean). {@code required}: the
     * fault must raise an alarm (issue 4 names k-eq-v-rotated-keys, ring-wrap and decode-recompute), a clean run must not.
     */
    public record SelfCheckOutcome(Fault fault, String checkpoint, boolean applicable, boolean alarm, boolean required,
                                   String firstFailure) {
        public boolean ok() { return !applicable || (fault == null ? !alarm : !required || alarm); }
    }

    public long applicable() { return outcomes.stream().filter(o -> !o.clean() && o.applicable()).count(); }

    public long localized() { return outcomes.stream().filter(o -> !o.clean() && o.applicable() && o.ok()).count(); }

    public long cleanRuns() { return outcomes.stream().filter(Outcome::clean).count() + selfChecks.stream().filter(s -> s.fault() == null).count(); }

    public long falseAlarms() {
        return outcomes.stream().filter(o -> o.clean() && !o.ok()).count()
                + selfChecks.stream().filter(s -> s.fault() == null && s.alarm()).count();
    }

    public List<SelfCheckOutcome> selfCheckMisses() {
        return selfChecks.stream().filter(s -> s.fault() != null && !s.ok()).toList();
    }

    public List<Outcome> misses() { return outcomes.stream().filter(o -> !o.clean() && o.applicable() && !o.ok()).toList(); }

    public boolean passed() {
        return localized() == applicable() && falseAlarms() == 0 && selfCheckMisses().isEmpty()
                && named() == namingRuns().size() && falseNames() == 0 && catalogMisses().isEmpty();
    }
}
