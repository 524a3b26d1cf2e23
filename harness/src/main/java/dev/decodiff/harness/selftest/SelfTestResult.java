package dev.decodiff.harness.selftest;

import dev.decodiff.engine.Fault;

import java.util.List;

/**
 * What the self-test found: per (fault or clean, checkpoint, case) whether compare and bisect localized the fault to its
 * expected cell (or stayed quiet on a clean run), and per (fault or clean, checkpoint) whether the reference-free
 * selfcheck raised an alarm.
 */
public record SelfTestResult(List<String> checkpoints, List<Outcome> outcomes, List<SelfCheckOutcome> selfChecks, double seconds) {

    /**
     * One run. {@code fault} null = the clean engine. {@code compareGot}/{@code bisectGot} say what each found ("step 1,
     * layers.2.attn.v_read", "match", …); {@code ok} = localized at the expected cell, or no alarm on a clean run.
     */
    public record Outcome(Fault fault, String checkpoint, String caseName, ExpectedCell expected, String compareGot,
                          String bisectGot, boolean ok, String detail, double seconds) {
        public boolean applicable() { return !(expected instanceof ExpectedCell.NotApplicable); }

        public boolean clean() { return fault == null; }
    }

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

    public boolean passed() { return localized() == applicable() && falseAlarms() == 0 && selfCheckMisses().isEmpty(); }
}
