package dev.decodiff.harness.arch;

import dev.decodiff.harness.compare.ToleranceProfile;
import dev.decodiff.harness.selftest.SelfTest;

import java.util.List;
import java.util.function.Consumer;

/**
 * `decodiff selftest` on a family whose engine takes every engine option: its whole catalog judged by compare, bisect
 * (the culprit cell and the op variant named) and the reference-free selfcheck, on each bundled checkpoint.
 */
@FunctionalInterface
public interface EngineSelfTest {
    /** Every catalog fault (and the clean engine) on one checkpoint's cases; the model is loaded once. */
    SelfTest.CheckpointRun checkpoint(String checkpoint, List<SelfTest.Case> cases, ToleranceProfile profile, Consumer<String> progress);
}
